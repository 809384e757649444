package broker

import (
	"fmt"
	"net"
	"strings"
	"testing"
	"time"
)

// TestEmbeddedPortInUse: a taken embedded NATS port fails at once, naming
// the port and its setting, instead of after the readiness wait.
func TestEmbeddedPortInUse(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	port := ln.Addr().(*net.TCPAddr).Port
	start := time.Now()
	s, err := StartEmbedded(t.TempDir(), port, 10*time.Second, "test-token", 0, false)
	if err == nil {
		s.Shutdown()
		t.Fatal("started on a port in use")
	}
	if waited := time.Since(start); waited > 2*time.Second || !strings.Contains(err.Error(), fmt.Sprintf("127.0.0.1:%d (nats.embedded_port)", port)) {
		t.Errorf("after %s: %v", waited, err)
	}
}
