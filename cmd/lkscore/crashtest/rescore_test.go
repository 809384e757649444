package crashtest

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// byVersion counts the results stream's scorecards per session key under
// each scoring version.
func (c *cluster) byVersion() map[string]map[string]int {
	c.t.Helper()
	nc, err := nats.Connect(c.natsURL())
	if err != nil {
		c.t.Fatal(err)
	}
	defer nc.Close()
	js, _ := jetstream.New(nc)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	s, err := js.Stream(ctx, "LKSCORE_RESULTS")
	if err != nil {
		c.t.Fatal(err)
	}
	info, err := s.Info(ctx)
	if err != nil {
		c.t.Fatal(err)
	}
	out := map[string]map[string]int{}
	for seq := info.State.FirstSeq; info.State.Msgs > 0 && seq <= info.State.LastSeq; seq++ {
		m, err := s.GetMsg(ctx, seq)
		if err != nil {
			c.t.Fatalf("result %d: %v", seq, err)
		}
		v := m.Header.Get("Lk-Scoring-Version")
		if out[v] == nil {
			out[v] = map[string]int{}
		}
		out[v][m.Header.Get("Lk-Session-Key")]++
	}
	return out
}

// rescoreCmd is `lkscore rescore` against the cluster, as an operator runs it.
func (c *cluster) rescoreCmd(cfgFile string, args ...string) *exec.Cmd {
	bin, _ := binaries(c.t)
	cmd := exec.Command(bin, append([]string{"rescore", "--config", cfgFile, "--nats-url", c.natsURL(), "--since", "1h"}, args...)...)
	cmd.Env = c.s3Env()
	return cmd
}

// TestRescoreKilledHalfwayResumes: 300 sessions scored by two worker
// processes; `lkscore rescore` under a config with rules is killed with
// SIGKILL once the workers have published about half the new scorecards;
// run again, it goes on, and every session ends with exactly one scorecard
// under the new scoring version (and still one under the old), each
// byte-identical to the one the rescore computed itself (two replicas and
// the CLI agree).
func TestRescoreKilledHalfwayResumes(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: runs processes")
	}
	c := newCluster(t)
	c.startLkscore("worker", "worker")
	c.startLkscore("worker-b", "worker")
	l := c.startLoad("rs", 1)
	<-l.burst(300, 16)
	sent := l.finish() // the burst, and the odd one the steady load sent
	c.checkExactlyOnce(sent, 60*time.Second)
	n := len(sent)
	old := c.byVersion()
	if len(old) != 1 {
		t.Fatalf("scoring versions before the rescore: %v", len(old))
	}

	// The new model: the crash config with a rule and a tighter bar.
	newCfg := filepath.Join(c.dir, "new.yaml")
	if err := os.WriteFile(newCfg, []byte(crashConfig+`
scoring:
  verdict: {pass: 90, warn: 70}
  rules:
    - name: handoff_required
      expr: size(handoffs) == 0
      severity: warning
`), 0o644); err != nil {
		t.Fatal(err)
	}
	// A dry run first: it names the version and publishes nothing.
	out, err := c.rescoreCmd(newCfg, "--dry-run", "--json").Output()
	if err != nil {
		t.Fatalf("dry run: %v", err)
	}
	var dry struct {
		ScoringVersion string `json:"scoring_version"`
		Sessions       int    `json:"sessions"`
		Rescored       int    `json:"rescored"`
	}
	if err := json.Unmarshal(out, &dry); err != nil || dry.Sessions != n || dry.Rescored != n {
		t.Fatalf("dry run: %v %+v", err, dry)
	}
	if got := c.byVersion(); len(got) != 1 {
		t.Fatalf("the dry run published: %d versions", len(got))
	}

	// Publish, killed half-way.
	first := startProc(t, "rescore-1", c.rescoreCmd(newCfg, "--in-flight", "8"))
	nc, err := nats.Connect(c.natsURL())
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, _ := jetstream.New(nc)
	results, err := js.Stream(context.Background(), "LKSCORE_RESULTS")
	if err != nil {
		t.Fatal(err)
	}
	published := func() int { // the stream held n before the rescore
		info, err := results.Info(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		return int(info.State.Msgs) - n
	}
	deadline := time.Now().Add(2 * time.Minute)
	for published() < n/2 {
		if time.Now().After(deadline) || !first.state.Load() {
			t.Fatalf("the rescore did not reach half-way: %d published, running %v", published(), first.state.Load())
		}
		time.Sleep(5 * time.Millisecond)
	}
	if err := first.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	<-first.exit
	atKill := len(c.byVersion()[dry.ScoringVersion])
	if atKill >= n {
		t.Fatalf("the rescore had finished (%d) before it was killed: the test proves nothing", atKill)
	}
	t.Logf("killed with %d of %d published", atKill, n)

	// Again, to the end.
	second := startProc(t, "rescore-2", c.rescoreCmd(newCfg, "--in-flight", "8"))
	select {
	case err := <-second.exit:
		second.state.Store(false)
		if err != nil {
			t.Fatalf("second run: %v\n%s", err, second.log.String())
		}
	case <-time.After(3 * time.Minute):
		t.Fatal("the second run did not finish")
	}
	if log := second.log.String(); !strings.Contains(log, "already published") || strings.Contains(log, "differ from this run's") {
		t.Errorf("the second run does not say what was already there, or a published scorecard differs:\n%s", lastBytes(log, 2000))
	}
	after := c.byVersion()
	if len(after[dry.ScoringVersion]) != n {
		t.Errorf("%d sessions under the new version, want %d", len(after[dry.ScoringVersion]), n)
	}
	for v, keys := range after {
		for key, k := range keys {
			if k != 1 {
				t.Errorf("%s: %d scorecards under %s", key, k, v)
			}
		}
	}
	if c.deadLetters() != 0 {
		t.Errorf("%d dead letters", c.deadLetters())
	}

	// The baseline, rebuilt under the new version from what was published.
	bin, _ := binaries(t)
	out, err = exec.Command(bin, "baseline", "build", "--scoring-version", dry.ScoringVersion, "--agent", "crash-agent",
		"--version", "unknown", "--nats-url", c.natsURL(), "--config", newCfg).Output()
	if err != nil {
		t.Fatalf("baseline build: %v", err)
	}
	var b struct {
		ScoringVersion string            `json:"scoring_version"`
		Samples        []json.RawMessage `json:"samples"`
	}
	if err := json.Unmarshal(out, &b); err != nil || b.ScoringVersion != dry.ScoringVersion || len(b.Samples) != n {
		t.Errorf("baseline: %v, scoring %s, %d samples, want %d", err, b.ScoringVersion, len(b.Samples), n)
	}
}
