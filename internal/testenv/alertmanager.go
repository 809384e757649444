package testenv

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// Alertmanager is a real Prometheus Alertmanager on loopback, built by
// tools/install-alertmanager.sh, with one route to a receiver that sends
// nothing: the tests read what it holds through its API.
type Alertmanager struct {
	URL string
	t   testing.TB
	bin string
	dir string
	cmd *exec.Cmd
	log *SyncBuffer
}

// AMAlert is what GET /api/v2/alerts answers per alert (the fields the
// tests read).
type AMAlert struct {
	Labels       map[string]string `json:"labels"`
	Annotations  map[string]string `json:"annotations"`
	StartsAt     time.Time         `json:"startsAt"`
	EndsAt       time.Time         `json:"endsAt"`
	GeneratorURL string            `json:"generatorURL"`
	Status       struct {
		State string `json:"state"`
	} `json:"status"`
}

func alertmanagerPath(t testing.TB) string {
	t.Helper()
	return toolPath(t, "alertmanager", "build it with `bash tools/install-alertmanager.sh`", "LKSCORE_REQUIRE_ALERTMANAGER",
		"SKIPPING ALERTMANAGER TESTS")
}

// StartAlertmanager starts Alertmanager on a free loopback port, without
// clustering, killed at cleanup.
func StartAlertmanager(t testing.TB) *Alertmanager {
	t.Helper()
	am := &Alertmanager{t: t, bin: alertmanagerPath(t), dir: t.TempDir(), log: &SyncBuffer{}}
	cfg := filepath.Join(am.dir, "alertmanager.yml")
	if err := os.WriteFile(cfg, []byte("route:\n  receiver: nowhere\nreceivers:\n  - name: nowhere\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	am.URL = "http://" + FreeAddr(t)
	t.Cleanup(func() {
		am.Stop()
		if t.Failed() {
			t.Logf("alertmanager log:\n%s", am.log.String())
		}
	})
	am.Start()
	return am
}

// Start starts a stopped Alertmanager again on the same address and
// storage: it keeps silences and its notification log, and, as in
// production, forgets every alert.
func (a *Alertmanager) Start() {
	a.t.Helper()
	if a.cmd != nil {
		return
	}
	addr := strings.TrimPrefix(a.URL, "http://")
	a.cmd = exec.Command(a.bin, "--config.file", filepath.Join(a.dir, "alertmanager.yml"), "--storage.path", filepath.Join(a.dir, "data"),
		"--web.listen-address", addr, "--cluster.listen-address=")
	a.cmd.Stdout, a.cmd.Stderr = a.log, a.log
	if err := a.cmd.Start(); err != nil {
		a.t.Fatal(err)
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		resp, err := http.Get(a.URL + "/-/ready")
		if err == nil {
			_ = resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return
			}
		}
		if time.Now().After(deadline) {
			a.t.Fatalf("alertmanager not ready on %s: %v\n%s", addr, err, a.log.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// Stop kills Alertmanager; a no-op when stopped.
func (a *Alertmanager) Stop() {
	if a.cmd != nil && a.cmd.Process != nil {
		_ = a.cmd.Process.Kill()
		_ = a.cmd.Wait()
	}
	a.cmd = nil
}

// Alerts returns the alerts Alertmanager holds as active now (resolved
// ones leave the list).
func (a *Alertmanager) Alerts(t testing.TB) []AMAlert {
	t.Helper()
	resp, err := http.Get(a.URL + "/api/v2/alerts")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var out []AMAlert
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil {
		t.Fatalf("GET /api/v2/alerts: %v", err)
	}
	return out
}

// Received returns how many alerts Alertmanager's API took in, by status
// (firing, resolved): alertmanager_alerts_received_total.
func (a *Alertmanager) Received(t testing.TB) map[string]int {
	t.Helper()
	resp, err := http.Get(a.URL + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	out := map[string]int{}
	sc := bufio.NewScanner(io.LimitReader(resp.Body, 8<<20))
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, "alertmanager_alerts_received_total{") {
			continue
		}
		for _, st := range []string{"firing", "resolved"} {
			if strings.Contains(line, fmt.Sprintf(`status="%s"`, st)) {
				f, err := strconv.ParseFloat(line[strings.LastIndexByte(line, ' ')+1:], 64)
				if err != nil {
					t.Fatalf("alertmanager metric %q: %v", line, err)
				}
				out[st] = int(f)
			}
		}
	}
	return out
}
