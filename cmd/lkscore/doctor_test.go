package main

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/livekit/protocol/livekit"

	"github.com/lkscore/lkscore/internal/testenv"
)

func runDoctor(t *testing.T, env map[string]string, args ...string) (int, string) {
	t.Helper()
	var out, errb bytes.Buffer
	code := run(context.Background(), append([]string{"lkscore", "doctor"}, args...), func(k string) string { return env[k] }, &out, &errb)
	return code, out.String() + errb.String()
}

// failed reports whether doctor's output has a FAIL line for check name.
func failed(out, name string) bool {
	for _, l := range strings.Split(out, "\n") {
		if f := strings.Fields(l); len(f) > 1 && f[0] == "FAIL" && strings.HasPrefix(strings.TrimSpace(l[5:]), name) {
			return true
		}
	}
	return false
}

// TestDoctor: against a running daemon, lkscore doctor finds a webhook
// never seen (and exits 1) while its own signed test webhook is accepted,
// then, once a webhook was stored, finds nothing wrong (exit 0); it finds NATS unreachable, a store it cannot
// write, no LiveKit keys, and a clock off by more than the tokens' leeway,
// each with what to set, and exits non-zero.
func TestDoctor(t *testing.T) {
	dataDir := t.TempDir()
	d, snd, _ := startTestDaemonIn(t, dataDir)
	keys := map[string]string{"LIVEKIT_API_KEY": "APItail", "LIVEKIT_API_SECRET": "tail-secret-0123456789"}
	base := []string{"--nats-url", d.NATSURL(), "--data-dir", dataDir, "--url", "http://" + d.IngestAddr(), "--ops-url", "http://" + d.OpsAddr()}

	code, out := runDoctor(t, keys, base...)
	if code != 1 || !failed(out, "webhooks") || failed(out, "nats") || failed(out, "store") || failed(out, "keys") ||
		!strings.Contains(out, "/webhook") || !strings.Contains(out, "ok    test webhook") {
		t.Fatalf("fresh daemon: exit %d\n%s", code, out)
	}
	// LiveKit's first webhook arrives (doctor's own test webhook, a
	// room_started lkscore does not store, does not count).
	if err := snd.Webhook(context.Background(), &livekit.WebhookEvent{Event: "room_finished", Id: "EV_doctor", CreatedAt: time.Now().Unix(),
		Room: &livekit.Room{Sid: "RM_doctor", Name: "doctor"}}); err != nil {
		t.Fatal(err)
	}
	code, out = runDoctor(t, keys, base...)
	if code != 0 || strings.Contains(out, "FAIL") {
		t.Fatalf("after LiveKit's first webhook: exit %d\n%s", code, out)
	}

	code, out = runDoctor(t, keys, "--nats-url", "nats://"+testenv.FreeAddr(t), "--data-dir", dataDir, "--no-test-webhook",
		"--ops-url", "http://"+d.OpsAddr())
	if code != 1 || !failed(out, "nats") || !strings.Contains(out, "nats.url") {
		t.Errorf("NATS unreachable: exit %d\n%s", code, out)
	}

	notADir := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(notADir, []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	code, out = runDoctor(t, keys, "--nats-url", d.NATSURL(), "--data-dir", notADir, "--no-test-webhook", "--ops-url", "http://"+d.OpsAddr())
	if code != 1 || !failed(out, "store") {
		t.Errorf("store not writable: exit %d\n%s", code, out)
	}

	code, out = runDoctor(t, nil, append(base, "--no-test-webhook")...)
	if code != 1 || !failed(out, "keys") || !strings.Contains(out, "LIVEKIT_API_KEY") {
		t.Errorf("no keys: exit %d\n%s", code, out)
	}

	skewed := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Date", time.Now().Add(-3*time.Minute).UTC().Format(http.TimeFormat))
		w.WriteHeader(http.StatusOK)
	}))
	defer skewed.Close()
	code, out = runDoctor(t, keys, "--nats-url", d.NATSURL(), "--data-dir", dataDir, "--no-test-webhook", "--ops-url", skewed.URL)
	if code != 1 || !failed(out, "clock") || !strings.Contains(out, "NTP") {
		t.Errorf("clock skew: exit %d\n%s", code, out)
	}
}

// TestDoctorDoesNotLie: doctor's signed test webhook is not counted as
// LiveKit's traffic (the last-accepted gauge stays unset, so the "LiveKit
// stopped sending" alert still fires under a scheduled doctor); run
// without the daemon's data dir it creates no store in the working
// directory and says so; pointed at another store it says that store is
// not the daemon's (issue 66).
func TestDoctorDoesNotLie(t *testing.T) {
	dataDir := t.TempDir()
	d, snd, _ := startTestDaemonIn(t, dataDir)
	keys := map[string]string{"LIVEKIT_API_KEY": "APItail", "LIVEKIT_API_SECRET": "tail-secret-0123456789"}
	ops := "--ops-url=http://" + d.OpsAddr()
	if _, out := runDoctor(t, keys, "--nats-url", d.NATSURL(), "--data-dir", dataDir, "--url", "http://"+d.IngestAddr(), ops); !strings.Contains(out, "ok    test webhook") {
		t.Fatalf("the test webhook was not accepted:\n%s", out)
	}
	resp, err := http.Get("http://" + d.OpsAddr() + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	metrics, _ := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	if strings.Contains(string(metrics), `lkscore_ingest_last_accepted_timestamp_seconds{api_key="APItail",endpoint="webhook"}`) {
		t.Error("doctor's test webhook set the webhook's last-accepted gauge: it hides LiveKit going quiet")
	}

	cwd := t.TempDir()
	t.Chdir(cwd)
	code, out := runDoctor(t, keys, "--nats-url", d.NATSURL(), "--no-test-webhook", ops)
	if code != 1 || !failed(out, "store") || !strings.Contains(out, "--data-dir") {
		t.Errorf("without the daemon's data dir: exit %d\n%s", code, out)
	}
	if entries, _ := os.ReadDir(cwd); len(entries) > 0 {
		t.Errorf("doctor created %s in the working directory", entries[0].Name())
	}

	sendScenario(t, snd, "1_clean_call")
	testenv.WaitFor(t, 20*time.Second, "the upload", func() bool { return len(resultKeys(t, d.NATSURL())) >= 1 })
	other := t.TempDir()
	if err := os.MkdirAll(filepath.Join(other, "recordings"), 0o755); err != nil {
		t.Fatal(err)
	}
	code, out = runDoctor(t, keys, "--nats-url", d.NATSURL(), "--data-dir", other, "--no-test-webhook", ops)
	if code != 1 || !failed(out, "store") || !strings.Contains(out, "not the daemon's store") {
		t.Errorf("another store: exit %d\n%s", code, out)
	}
	code, out = runDoctor(t, keys, "--nats-url", d.NATSURL(), "--data-dir", dataDir, "--no-test-webhook", ops)
	if failed(out, "store") || !strings.Contains(out, "the store the daemon's uploads go to") {
		t.Errorf("the daemon's own store: exit %d\n%s", code, out)
	}
}
