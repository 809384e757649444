package consumer

import (
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/lkscore/lkscore/config"
)

// TestOpsPprof: Go's profiles are on the ops listener only when ops_pprof
// asks for them.
func TestOpsPprof(t *testing.T) {
	for _, on := range []bool{false, true} {
		cfg := config.Default()
		cfg.OpsPprof = on
		d := &Daemon{cfg: cfg, gatherer: prometheus.NewRegistry()}
		rec := httptest.NewRecorder()
		d.opsHandler().ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/debug/pprof/goroutine?debug=1", nil))
		if got := rec.Code == http.StatusOK; got != on {
			t.Errorf("ops_pprof %v: /debug/pprof/goroutine answered %d", on, rec.Code)
		}
	}
}
