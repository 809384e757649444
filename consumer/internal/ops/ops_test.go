package ops

import (
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/lkscore/lkscore/dashboard"
)

// TestOpsPprof: Go's profiles are on the ops listener only when ops_pprof
// asks for them.
func TestOpsPprof(t *testing.T) {
	t.Parallel()
	for _, on := range []bool{false, true} {
		h := Handler(func() string { return "" }, func() string { return "" }, prometheus.NewRegistry(), http.NotFoundHandler(), on,
			dashboard.Access{TrustLoopback: true}.NewGuard().Wrap)
		rec := httptest.NewRecorder()
		req := httptest.NewRequest(http.MethodGet, "/debug/pprof/goroutine?debug=1", nil)
		req.RemoteAddr, req.Host = "127.0.0.1:5000", "localhost:9090"
		h.ServeHTTP(rec, req)
		if got := rec.Code == http.StatusOK; got != on {
			t.Errorf("ops_pprof %v: /debug/pprof/goroutine answered %d", on, rec.Code)
		}
		// pprof is behind the dashboard's guard: another Host, or a client off loopback without the token, is refused.
		for _, r := range []struct{ remote, host string }{{"127.0.0.1:5000", "attacker.example"}, {"10.0.0.9:5000", "localhost"}} {
			rec := httptest.NewRecorder()
			req := httptest.NewRequest(http.MethodGet, "/debug/pprof/goroutine?debug=1", nil)
			req.RemoteAddr, req.Host = r.remote, r.host
			h.ServeHTTP(rec, req)
			if rec.Code == http.StatusOK {
				t.Errorf("ops_pprof %v: /debug/pprof/goroutine from %s as %s answered 200", on, r.remote, r.host)
			}
		}
	}
}

// TestReadyz: /readyz answers 503 with the reason until nothing is wrong.
func TestReadyz(t *testing.T) {
	t.Parallel()
	why := "nats not connected"
	h := Handler(func() string { return "" }, func() string { return why }, prometheus.NewRegistry(), http.NotFoundHandler(), false, dashboard.Access{}.NewGuard().Wrap)
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/readyz", nil))
	if rec.Code != http.StatusServiceUnavailable || rec.Body.String() != why+"\n" {
		t.Errorf("not ready: %d %q", rec.Code, rec.Body.String())
	}
	why = ""
	rec = httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/readyz", nil))
	if rec.Code != http.StatusOK {
		t.Errorf("ready: %d %q", rec.Code, rec.Body.String())
	}
}
