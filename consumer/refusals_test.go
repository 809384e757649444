package consumer

import (
	"bytes"
	"encoding/json"
	"log/slog"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/lkscore/lkscore/internal/testenv"
)

// TestWiringMistakesLogged: at the default log level (info), a webhook
// signed with the wrong secret, one from an unknown key, an upload whose
// header is corrupt and a webhook posted to a wrong path each leave one warn
// line naming its reason (and the 401s say which it was); 1,000 more
// wrong-secret webhooks add no line of their own.
func TestWiringMistakesLogged(t *testing.T) {
	t.Parallel()
	ns := startNATS(t)
	d, _, logs := startDaemonLogging(t, testConfig(t, ns.URL()), slog.LevelInfo)
	base := "http://" + d.IngestAddr()
	body := []byte(`{"event":"room_finished","id":"EV_w","room":{"sid":"RM_w","name":"w"},"createdAt":"1764417600"}`)
	send := func(path, auth string, b []byte, ct string) (int, string) {
		resp, msg := post(t, base+path, auth, ct, bytes.NewReader(b))
		return resp.StatusCode, msg
	}
	wrongSecret := testenv.SignWebhook(t, testenv.Key, "not-the-secret", body, 5*time.Minute)
	code1, msg1 := send("/webhook", wrongSecret, body, "application/webhook+json")
	code2, msg2 := send("/webhook", testenv.SignWebhook(t, "APIunknown", testenv.Secret, body, 5*time.Minute), body, "application/webhook+json")
	upload, ct := testenv.PythonUpload(t, testenv.FullParts([]byte("not a protobuf header \xff\xff"), []byte(`{"items":[]}`), nil)[:2])
	code3, _ := send("/observability/recordings/v0", testenv.Bearer(testenv.PythonToken(t, testenv.Key, testenv.Secret, true)), upload, ct)
	code4, _ := send("/webhooks", testenv.SignWebhook(t, testenv.Key, testenv.Secret, body, 5*time.Minute), body, "application/webhook+json")
	if code1 != 401 || code2 != 401 || code3 != 400 || code4 != 404 {
		t.Fatalf("answers %d %d %d %d, want 401 401 400 404", code1, code2, code3, code4)
	}
	if msg1 == msg2 || !strings.Contains(msg2, "APIunknown") || !strings.Contains(msg1, "secret") {
		t.Errorf("a wrong secret and an unknown key must say which: %q / %q", msg1, msg2)
	}

	warns := func() map[string]int {
		n := map[string]int{}
		for _, line := range strings.Split(strings.TrimSpace(logs.String()), "\n") {
			var rec struct {
				Level, Reason string
			}
			if json.Unmarshal([]byte(line), &rec) == nil && rec.Level == "WARN" && rec.Reason != "" {
				n[rec.Reason]++
			}
		}
		return n
	}
	want := map[string]int{"bad_signature": 1, "unknown_key": 1, "bad_upload": 1, "unknown_path": 1}
	got := warns()
	for reason, n := range want {
		if got[reason] != n {
			t.Errorf("%d warn lines for %s, want %d (all: %v)", got[reason], reason, n, got)
		}
	}
	for range 1000 {
		if c, _ := send("/webhook", wrongSecret, body, "application/webhook+json"); c != http.StatusUnauthorized {
			t.Fatalf("answer %d", c)
		}
	}
	if n := warns()["bad_signature"]; n > 3 {
		t.Errorf("1,000 more wrong-secret webhooks left %d warn lines, want at most 3", n)
	}
}
