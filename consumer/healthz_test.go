package consumer

import (
	"context"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/livekit/protocol/livekit"
	"github.com/livekit/protocol/utils/protojson"

	"github.com/lkscore/lkscore/internal/testenv"
)

// healthz is the daemon's /healthz: its status and body.
func healthz(t testing.TB, d *Daemon) (int, string) {
	t.Helper()
	resp, err := http.Get("http://" + d.opsLn.Addr().String() + "/healthz")
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = resp.Body.Close() }()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// TestHealthzWhenNATSIsGone: with the NATS server stopped, /healthz stays
// 200 for nats.unhealthy_after, then fails so that Kubernetes restarts the
// process; it is 200 again once the server is back. A connection the
// client closed for good (it never reconnects: issue 65's "maximum
// control line exceeded") fails it at once.
func TestHealthzWhenNATSIsGone(t *testing.T) {
	t.Parallel()
	ns := startNATS(t)
	cfg := testConfig(t, ns.URL())
	cfg.NATS.UnhealthyAfter = 2 * time.Second
	d, _ := startDaemon(t, cfg)
	if c, body := healthz(t, d); c != 200 {
		t.Fatalf("/healthz %d %q with NATS up", c, body)
	}
	ns.Stop()
	testenv.WaitFor(t, 5*time.Second, "/readyz to fail with NATS stopped", func() bool { return readyz(t, d) == 503 })
	if c, body := healthz(t, d); c != 200 {
		t.Errorf("/healthz %d %q at once after NATS stopped, want 200 until nats.unhealthy_after", c, body)
	}
	down := time.Now()
	testenv.WaitFor(t, 10*time.Second, "/healthz to fail with NATS stopped", func() bool { c, _ := healthz(t, d); return c == 503 })
	if waited := time.Since(down); waited < time.Second {
		t.Errorf("/healthz failed %v after NATS stopped, before nats.unhealthy_after (2s)", waited)
	}
	if _, body := healthz(t, d); !strings.Contains(body, "unreachable") {
		t.Errorf("/healthz body %q: want the reason", body)
	}
	ns.Start()
	testenv.WaitFor(t, 10*time.Second, "/healthz to pass with NATS back", func() bool { c, _ := healthz(t, d); return c == 200 })

	d.nc.Close()
	if c, body := healthz(t, d); c != 503 || !strings.Contains(body, "closed") {
		t.Errorf("/healthz %d %q with the connection closed for good, want 503 naming it", c, body)
	}
}

// TestShutdownDelayKeepsServing: after a SIGTERM (Shutdown) the daemon is
// unready at once but its ingest takes requests for shutdown_delay, as
// Kubernetes keeps routing to a terminating pod for a moment: a webhook
// sent then is stored (200, no retry needed) and nothing is lost.
func TestShutdownDelayKeepsServing(t *testing.T) {
	t.Parallel()
	ns := startNATS(t)
	cfg := pipelineConfig(t, ns.URL())
	cfg.ShutdownDelay = 1500 * time.Millisecond
	d, _ := startDaemon(t, cfg)
	done := make(chan error, 1)
	go func() { done <- d.Shutdown(context.Background()) }()
	testenv.WaitFor(t, time.Second, "unready after SIGTERM", func() bool { return readyz(t, d) == 503 })
	ev := jobEnded("EV_Terminating", "RM_Terminating", "AJ_Terminating", "a", livekit.JobStatus_JS_SUCCESS)
	body, _ := protojson.Marshal(ev)
	if code, msg := signedPost(t, d, body); code != 200 {
		t.Fatalf("a webhook during shutdown_delay: %d %s", code, msg)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	found := false
	for _, m := range streamMsgs(t, ns.URL(), "LKSCORE_WEBHOOKS") {
		found = found || strings.Contains(string(m.Data), "EV_Terminating")
	}
	if !found {
		t.Error("the webhook answered 200 during shutdown_delay is not stored")
	}
}
