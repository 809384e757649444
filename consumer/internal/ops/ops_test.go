package ops

import (
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
)

// TestOpsPprof: Go's profiles are on the ops listener only when ops_pprof
// asks for them.
func TestOpsPprof(t *testing.T) {
	t.Parallel()
	for _, on := range []bool{false, true} {
		h := Handler(func() string { return "" }, prometheus.NewRegistry(), http.NotFoundHandler(), on)
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/debug/pprof/goroutine?debug=1", nil))
		if got := rec.Code == http.StatusOK; got != on {
			t.Errorf("ops_pprof %v: /debug/pprof/goroutine answered %d", on, rec.Code)
		}
	}
}

// TestReadyz: /readyz answers 503 with the reason until nothing is wrong.
func TestReadyz(t *testing.T) {
	t.Parallel()
	why := "nats not connected"
	h := Handler(func() string { return why }, prometheus.NewRegistry(), http.NotFoundHandler(), false)
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
