package consumer

import (
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

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

// TestEmbeddedPortInUse: a taken embedded NATS port fails at once, naming
// the port and its setting, instead of after the readiness wait.
func TestEmbeddedPortInUse(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	port := ln.Addr().(*net.TCPAddr).Port
	start := time.Now()
	s, err := startEmbedded(t.TempDir(), port, 10*time.Second)
	if err == nil {
		s.Shutdown()
		t.Fatal("started on a port in use")
	}
	if waited := time.Since(start); waited > 2*time.Second || !strings.Contains(err.Error(), fmt.Sprintf("127.0.0.1:%d (nats.embedded_port)", port)) {
		t.Errorf("after %s: %v", waited, err)
	}
}
