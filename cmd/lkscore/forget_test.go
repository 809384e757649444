package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/lkscore/lkscore/internal/testenv"
)

// resultKeys lists the session keys of the scorecards on the results stream.
func resultKeys(t *testing.T, url string) []string {
	t.Helper()
	js := testenv.JetStream(t, url)
	s, err := js.Stream(context.Background(), "LKSCORE_RESULTS")
	if err != nil {
		t.Fatal(err)
	}
	info, _ := s.Info(context.Background())
	var keys []string
	for seq := info.State.FirstSeq; info.State.Msgs > 0 && seq <= info.State.LastSeq; seq++ {
		if m, err := s.GetMsg(context.Background(), seq); err == nil {
			keys = append(keys, m.Header.Get("Lk-Session-Key"))
		}
	}
	return keys
}

// TestForget: `lkscore forget` removes one session's stored objects, facts
// and stream messages, leaves the others alone, and reports what it did.
func TestForget(t *testing.T) {
	dataDir := t.TempDir()
	d, snd, _ := startTestDaemonIn(t, dataDir)
	sendScenario(t, snd, "1_clean_call")
	sendScenario(t, snd, "6_error_close")
	testenv.WaitFor(t, 20*time.Second, "both scorecards", func() bool { return len(resultKeys(t, d.NATSURL())) >= 2 })
	var stdout, stderr bytes.Buffer
	code := run(context.Background(), []string{"lkscore", "forget", "--session", "RM_CleanCall01/AJ_CleanCall01",
		"--nats-url", d.NATSURL(), "--data-dir", dataDir}, func(string) string { return "" }, &stdout, &stderr)
	out := stdout.String()
	if code != 0 || !strings.Contains(out, "stream LKSCORE_RESULTS") || !strings.Contains(out, "recording store") {
		t.Fatalf("exit %d\n%s\n%s", code, out, stderr.String())
	}
	if keys := resultKeys(t, d.NATSURL()); len(keys) != 1 || keys[0] != "RM_ErrorClose06/AJ_ErrorClose06" {
		t.Errorf("scorecards left: %v", keys)
	}
	rec := filepath.Join(dataDir, "recordings")
	if _, err := os.Stat(filepath.Join(rec, "RM_CleanCall01")); !os.IsNotExist(err) {
		t.Errorf("the forgotten session's recording is still stored: %v", err)
	}
	if _, err := os.Stat(filepath.Join(rec, "RM_ErrorClose06", "AJ_ErrorClose06", "header.binpb")); err != nil {
		t.Errorf("the other session's recording is gone: %v", err)
	}
	js := testenv.JetStream(t, d.NATSURL())
	kv, _ := js.KeyValue(context.Background(), "LKSCORE_SESSION_FACTS")
	if _, err := kv.Get(context.Background(), "RM_CleanCall01.AJ_CleanCall01"); err == nil {
		t.Error("the forgotten session's facts are still there")
	}
	if _, err := kv.Get(context.Background(), "RM_ErrorClose06.AJ_ErrorClose06"); err != nil {
		t.Errorf("the other session's facts are gone: %v", err)
	}
	t.Logf("forget report:\n%s", out)
}
