package main

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/livekit/protocol/auth"
	"google.golang.org/protobuf/encoding/protojson"
)

// benchRun runs `lkscore bench` against the in-process daemon with the
// daemon's own key, and decodes its JSON report.
func benchRun(t *testing.T, natsURL, ingest string, args ...string) (map[string]any, int, string) {
	t.Helper()
	env := map[string]string{"LIVEKIT_API_KEY": "APItail", "LIVEKIT_API_SECRET": "tail-secret-0123456789"}
	var out, errb bytes.Buffer
	code := run(context.Background(), append([]string{"lkscore", "bench", "--nats-url", natsURL, "--url", "http://" + ingest, "--json"}, args...),
		func(k string) string { return env[k] }, &out, &errb)
	var rep map[string]any
	if out.Len() > 0 {
		if err := json.Unmarshal(out.Bytes(), &rep); err != nil {
			t.Fatalf("report is not JSON: %v\n%s", err, out.String())
		}
	}
	return rep, code, errb.String()
}

// TestBenchEmbedded: lkscore bench against the embedded default scores every
// session it sends exactly once and reports rates and latencies.
func TestBenchEmbedded(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: load test")
	}
	d, _ := startTestDaemon(t)
	rep, code, stderr := benchRun(t, d.NATSURL(), d.IngestAddr(), "--sessions", "60", "--concurrency", "6")
	if code != 0 {
		t.Fatalf("exit %d: %s\n%v", code, stderr, rep)
	}
	if rep["mode"] != "sessions" || rep["sent"] != 60.0 || rep["scored"] != 60.0 || rep["lost"] != 0.0 || rep["duplicated"] != 0.0 {
		t.Fatalf("report %v", rep)
	}
	lat := rep["latency_ms"].(map[string]any)
	if rep["sessions_per_sec"].(float64) <= 0 || rep["webhooks_per_sec"].(float64) <= 0 || lat["p50"].(float64) <= 0 || lat["p99"].(float64) < lat["p50"].(float64) {
		t.Fatalf("report %v", rep)
	}
	t.Logf("%v", rep)
	if rep["daemon_cpu"] != nil {
		t.Fatalf("daemon CPU reported without --ops-url: %v", rep["daemon_cpu"])
	}

	// With the daemon's ops listener, its CPU a session and its role.
	rep, code, stderr = benchRun(t, d.NATSURL(), d.IngestAddr(), "--sessions", "30", "--concurrency", "4", "--ops-url", "http://"+d.OpsAddr())
	if code != 0 {
		t.Fatalf("exit %d: %s\n%v", code, stderr, rep)
	}
	cpu, _ := rep["daemon_cpu"].([]any)
	if len(cpu) != 1 {
		t.Fatalf("daemon_cpu %v", rep["daemon_cpu"])
	}
	c := cpu[0].(map[string]any)
	if c["role"] != "all" || c["cpu_seconds"].(float64) <= 0 || c["cpu_ms_per_session"].(float64) <= 0 ||
		c["cpu_ms_per_session"].(float64) != c["cpu_seconds"].(float64)*1000/30 {
		t.Fatalf("daemon_cpu %v", c)
	}
	// An address that is not an ops listener is refused before any load.
	_, code, stderr = benchRun(t, d.NATSURL(), d.IngestAddr(), "--sessions", "1", "--ops-url", "http://"+d.IngestAddr())
	if code != 2 || !strings.Contains(stderr, "--ops-url") {
		t.Fatalf("a wrong --ops-url: exit %d: %s", code, stderr)
	}

	// At a fixed rate, the send takes about n/rate seconds.
	rep, code, stderr = benchRun(t, d.NATSURL(), d.IngestAddr(), "--sessions", "20", "--concurrency", "4", "--rate", "40")
	if code != 0 || rep["scored"] != 20.0 || rep["send_seconds"].(float64) < 0.45 {
		t.Fatalf("exit %d: %s\n%v", code, stderr, rep)
	}
}

func TestBenchWebhooks(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: load test")
	}
	d, _ := startTestDaemon(t)
	rep, code, stderr := benchRun(t, d.NATSURL(), d.IngestAddr(), "--webhooks", "--sessions", "500", "--concurrency", "16")
	if code != 0 || rep["mode"] != "webhooks" || rep["sent"] != 500.0 || rep["refused"] != 0.0 || rep["webhooks_per_sec"].(float64) <= 0 {
		t.Fatalf("exit %d: %s\n%v", code, stderr, rep)
	}
}

// TestBenchReportsRefusals: a wrong key is refused by the daemon, and bench
// says so and exits 1 instead of reporting a rate.
func TestBenchReportsRefusals(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: load test")
	}
	d, _ := startTestDaemon(t)
	env := map[string]string{"LIVEKIT_API_KEY": "APItail", "LIVEKIT_API_SECRET": "not-the-daemons-secret"}
	var out, errb bytes.Buffer
	code := run(context.Background(), []string{"lkscore", "bench", "--nats-url", d.NATSURL(), "--url", "http://" + d.IngestAddr(),
		"--webhooks", "--sessions", "5", "--concurrency", "2"}, func(k string) string { return env[k] }, &out, &errb)
	if code != 1 || !strings.Contains(out.String(), "refused 5") {
		t.Fatalf("exit %d\n%s\n%s", code, out.String(), errb.String())
	}
}

// TestBenchResignsStaleWebhooks: a webhook signed ahead whose token is
// older than bench's bound is signed again as it is sent, not sent with a
// token the daemon refuses as expired.
func TestBenchResignsStaleWebhooks(t *testing.T) {
	_, snd := startTestDaemon(t)
	room := benchRoom("stale", 0)
	body, err := protojson.Marshal(benchWebhook(room))
	if err != nil {
		t.Fatal(err)
	}
	expired, err := auth.NewAccessToken("APItail", "tail-secret-0123456789").SetValidFor(-10 * time.Minute).ToJWT()
	if err != nil {
		t.Fatal(err)
	}
	o := benchOptions{webhooksOnly: true, signed: []signedWebhook{{body: body, token: expired}}}
	o.signedAt = time.Now().Add(-signAheadFor - time.Second)
	if _, _, err := benchSession(context.Background(), snd, o, 0, room, ""); err != nil {
		t.Fatalf("a stale pre-signed webhook: %v", err)
	}
	o.signedAt = time.Now() // fresh: the stored token is sent as it is, and refused
	if _, _, err := benchSession(context.Background(), snd, o, 0, room, ""); err == nil {
		t.Fatal("the expired token was accepted: the test does not show the re-signing")
	}
}
