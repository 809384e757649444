//go:build !race

package crashtest

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/lkscore/lkscore/internal/testenv"
)

// TestServeDataDirLocked: a second serve process on a data dir another one
// uses (its embedded NATS store) exits non-zero within 2 s, naming the dir
// and the process holding it.
func TestServeDataDirLocked(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: builds the lkscore and nats-server binaries")
	}
	bin, _ := binaries(t)
	dir := t.TempDir()
	cfgFile := filepath.Join(t.TempDir(), "c.yml")
	testenv.WriteFile(t, cfgFile, "nats:\n  embedded_port: -1\n")
	serve := func() *exec.Cmd {
		cmd := exec.Command(bin, "serve", "--config", cfgFile, "--listen", "127.0.0.1:0", "--ops-listen", freeAddr(t), "--data-dir", dir)
		cmd.Env = append(os.Environ(), "LIVEKIT_API_KEY=devkey", "LIVEKIT_API_SECRET=devsecret-0123456789")
		return cmd
	}
	first := startProc(t, "first", serve())
	ready := func() bool { return strings.Contains(first.log.String(), "lkscore ready") }
	testenv.WaitFor(t, 20*time.Second, "the first serve to be ready or exit", func() bool { return ready() || !first.state.Load() })
	if !ready() {
		t.Fatalf("first serve exited before it was ready:\n%s", first.log.String())
	}
	second := serve()
	start := time.Now()
	out, err := second.CombinedOutput()
	took := time.Since(start)
	if err == nil || took > 2*time.Second {
		t.Fatalf("second serve: %v after %s\n%s", err, took, out)
	}
	want := fmt.Sprintf("data dir %s is in use by process %d", dir, first.cmd.Process.Pid)
	if !strings.Contains(string(out), want) {
		t.Errorf("second serve's error does not say %q:\n%s", want, out)
	}
}
