package main

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"github.com/lkscore/lkscore/internal/testenv"
)

// TestCLISaysWhatIsWrong: the commands that talk to NATS, against a NATS
// that does not answer and against one lkscore never ran on, say so in
// words (where, what is missing, what to check) and exit non-zero, with no
// raw client error ("nats: API error: code=404 err_code=10059", "nats: no
// servers available for connection") as the message.
func TestCLISaysWhatIsWrong(t *testing.T) {
	bare := testenv.StartNATS(t) // JetStream, none of lkscore's streams
	env := map[string]string{"LIVEKIT_API_KEY": "k", "LIVEKIT_API_SECRET": "secret-0123456789abcdef"}
	getenv := func(k string) string { return env[k] }
	for _, tc := range []struct {
		url, want string
		args      []string
	}{
		{"nats://127.0.0.1:1", "cannot reach NATS at nats://127.0.0.1:1: nothing answers there", []string{"tail"}},
		{"nats://127.0.0.1:1", "cannot reach NATS at nats://127.0.0.1:1", []string{"dlq", "list"}},
		{bare.URL(), "LKSCORE_RESULTS does not exist on this NATS server: lkscore serve creates it", []string{"tail", "--since", "1m"}},
		{bare.URL(), "LKSCORE_DLQ does not exist on this NATS server", []string{"dlq", "list"}},
		{bare.URL(), "LKSCORE_DLQ does not exist on this NATS server", []string{"dlq", "replay", "--seq", "3"}},
		{bare.URL(), "LKSCORE_RESULTS does not exist on this NATS server", []string{"bench", "--sessions", "1", "--url", "http://127.0.0.1:1"}},
	} {
		var out, errb bytes.Buffer
		args := append(append([]string{"lkscore"}, tc.args...), "--nats-url", tc.url)
		code := run(context.Background(), args, getenv, &out, &errb)
		msg := errb.String()
		if code == 0 || !strings.Contains(msg, tc.want) || strings.HasPrefix(strings.TrimPrefix(msg, "lkscore: "), "nats: ") ||
			strings.Contains(msg, "err_code=") && !strings.Contains(msg, "does not exist") {
			t.Errorf("lkscore %s against %s: exit %d\n%s%s", strings.Join(tc.args, " "), tc.url, code, out.String(), msg)
		}
	}
	// forget on a NATS lkscore never ran on: nothing to forget, said per place, no error.
	var out, errb bytes.Buffer
	code := run(context.Background(), []string{"lkscore", "forget", "--session", "RM_a/AJ_b", "--nats-url", bare.URL(), "--data-dir", t.TempDir()}, getenv, &out, &errb)
	if strings.Contains(out.String(), "ERROR") || code != 0 {
		t.Errorf("forget on an empty NATS: exit %d\n%s%s", code, out.String(), errb.String())
	}
}
