package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/lkscore/lkscore/internal/population"
	"github.com/lkscore/lkscore/internal/testenv"
	"github.com/lkscore/lkscore/regress"
	"github.com/lkscore/lkscore/scoring"
	"github.com/lkscore/lkscore/wire"
)

func scenarioDirs(t *testing.T) []string {
	t.Helper()
	dirs, err := filepath.Glob("../../scenarios/data/*")
	if err != nil || len(dirs) != 6 {
		t.Fatalf("scenarios: %v %v", dirs, err)
	}
	return dirs
}

func runCLI(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	var out, errb bytes.Buffer
	code := run(context.Background(), append([]string{"lkscore"}, args...), func(string) string { return "" }, &out, &errb)
	return code, out.String(), errb.String()
}

// cleanBaseline writes a baseline of 30 clean generated sessions.
func cleanBaseline(t *testing.T) string {
	t.Helper()
	scorer, err := scoring.NewScorer(scoring.DefaultConfig())
	if err != nil {
		t.Fatal(err)
	}
	var samples []regress.Sample
	for i, card := range population.Generate(scorer, population.Clean("booking-agent", "1.0"), 1, 30) {
		samples = append(samples, regress.SampleOf(&card, uint64(i+1)))
	}
	data, _ := json.Marshal(regress.NewBaseline("booking-agent", "1.0", scorer.Version(), samples))
	path := filepath.Join(t.TempDir(), "clean.json")
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestCheckGate: the six acceptance scenarios pass against a baseline built
// from themselves, and fail (exit 3, saying which metrics moved) against a
// baseline of clean sessions.
func TestCheckGate(t *testing.T) {
	dirs := scenarioDirs(t)
	self := filepath.Join(t.TempDir(), "self.json")
	if code, out, errs := runCLI(t, append([]string{"baseline", "build", "--agent", "booking-agent", "--version", "1.0", "-o", self}, dirs...)...); code != 0 || !strings.Contains(out, "6 sessions") {
		t.Fatalf("build: exit %d\n%s%s", code, out, errs)
	}
	code, out, errs := runCLI(t, append([]string{"check", "--baseline", self}, dirs...)...)
	if code != 0 || !strings.Contains(out, "no regression") {
		t.Fatalf("check against itself: exit %d\n%s%s", code, out, errs)
	}
	code, out, errs = runCLI(t, append([]string{"check", "--baseline", cleanBaseline(t)}, dirs...)...)
	if code != 3 || !strings.Contains(out, "regressed: ") || !strings.Contains(out, "overall") || !strings.Contains(errs, "regressed against baseline sha256:") {
		t.Fatalf("check against clean sessions: exit %d\n%s%s", code, out, errs)
	}
	t.Logf("\n%s", out)

	// A tampered baseline is refused.
	data, _ := os.ReadFile(self)
	tampered := filepath.Join(t.TempDir(), "tampered.json")
	_ = os.WriteFile(tampered, bytes.Replace(data, []byte(`"version": "1.0"`), []byte(`"version": "2.0"`), 1), 0o644)
	if code, _, errs := runCLI(t, append([]string{"check", "--baseline", tampered}, dirs...)...); code != 2 || !strings.Contains(errs, "does not match its id") {
		t.Fatalf("tampered baseline: exit %d: %s", code, errs)
	}
}

// TestBaselineSealFromDaemon: scorecards on the daemon's results stream
// build history; seal snapshots it, show summarizes it, export writes the
// file check reads.
func TestBaselineSealFromDaemon(t *testing.T) {
	d, _ := startTestDaemon(t)
	js := testenv.JetStream(t, d.NATSURL())
	scorer, err := scoring.NewScorer(scoring.DefaultConfig())
	if err != nil {
		t.Fatal(err)
	}
	subj := wire.NewSubjects("lkscore.", "LKSCORE")
	for _, c := range population.Generate(scorer, population.Baseline("booking-agent", "1.0"), 9, 35) {
		data, _ := json.Marshal(c)
		msg := nats.NewMsg(subj.Result(c.Completion.CloseReason))
		msg.Data = data
		msg.Header.Set(wire.HeaderSessionKey, c.Session.Key)
		if _, err := js.PublishMsg(context.Background(), msg); err != nil {
			t.Fatal(err)
		}
	}
	kv, err := js.KeyValue(context.Background(), subj.RegressionBucket())
	if err != nil {
		t.Fatal(err)
	}
	key := wire.HistoryKey(regress.Key{Agent: "booking-agent", Version: "1.0", ScoringVersion: scorer.Version()})
	testenv.WaitFor(t, 20*time.Second, "the history to reach 35 sessions", func() bool {
		var h regress.History
		e, err := kv.Get(context.Background(), key)
		return err == nil && json.Unmarshal(e.Value(), &h) == nil && h.Total == 35
	})
	nu := []string{"--nats-url", d.NATSURL()}
	code, out, errs := runCLI(t, append([]string{"baseline", "seal", "--agent", "booking-agent", "--version", "1.0"}, nu...)...)
	if code != 0 || !strings.Contains(out, "sealed sha256:") || !strings.Contains(out, "35 sessions") {
		t.Fatalf("seal: exit %d\n%s%s", code, out, errs)
	}
	code, out, errs = runCLI(t, append([]string{"baseline", "show", "--agent", "booking-agent"}, nu...)...)
	if code != 0 || !strings.Contains(out, "e2e_latency_p50_ms") || !strings.Contains(out, "version 1.0") {
		t.Fatalf("show: exit %d\n%s%s", code, out, errs)
	}
	file := filepath.Join(t.TempDir(), "sealed.json")
	if code, out, errs = runCLI(t, append([]string{"baseline", "export", "--agent", "booking-agent", "-o", file}, nu...)...); code != 0 {
		t.Fatalf("export: exit %d\n%s%s", code, out, errs)
	}
	code, out, errs = runCLI(t, append([]string{"check", "--baseline", file}, scenarioDirs(t)...)...)
	if code != 3 || !strings.Contains(out, "REGRESSED") {
		t.Fatalf("check against the sealed baseline: exit %d\n%s%s", code, out, errs)
	}
	if code, _, errs = runCLI(t, append([]string{"baseline", "seal", "--agent", "nobody", "--version", "1"}, nu...)...); code != 1 || !strings.Contains(errs, "no history") {
		t.Fatalf("seal of an unknown agent: exit %d: %s", code, errs)
	}
}

// TestTailAlerts: tail --alerts prints the alerts on the alert stream.
func TestTailAlerts(t *testing.T) {
	d, _ := startTestDaemon(t)
	js := testenv.JetStream(t, d.NATSURL())
	subj := wire.NewSubjects("lkscore.", "LKSCORE")
	a := wire.Alert{ID: "regression/booking/2/x/e2e_latency_p50_ms@9", Kind: "regression", Status: "firing", Agent: "booking", Version: "2",
		Metric: "e2e_latency_p50_ms", Baseline: 950, Current: 1400, Effect: 450, QValue: 0.001, Test: "mann_whitney_u",
		NBaseline: 40, NCurrent: 30, BaselineOf: "version 1", At: time.Now()}
	data, _ := json.Marshal(a)
	msg := nats.NewMsg(subj.Alert(a.Kind, a.Agent))
	msg.Data = data
	msg.Header.Set(wire.HeaderAgentName, a.Agent) // as the detector publishes it
	if _, err := js.PublishMsg(context.Background(), msg); err != nil {
		t.Fatal(err)
	}
	code, out, errs := runCLI(t, "tail", "--alerts", "--since", "1h", "--limit", "1", "--agent", "booking", "--nats-url", d.NATSURL())
	if code != 0 || !strings.Contains(out, "firing") || !strings.Contains(out, "booking@2") || !strings.Contains(out, "e2e_latency_p50_ms: 950 → 1400") {
		t.Fatalf("exit %d\n%s%s", code, out, errs)
	}
}
