package main

import (
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
	cards := population.Generate(scorer, population.Baseline("booking-agent", "1.0"), 9, 35)
	for _, c := range cards {
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
	key := regress.HistoryKey(regress.Key{Agent: "booking-agent", Version: "1.0", ScoringVersion: scorer.Version()})
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

	// forget takes a session out of the sealed baseline, and says so
	// (issue 66: the export still held it).
	victim := cards[3].Session.Key
	if b, _ := os.ReadFile(file); !strings.Contains(string(b), victim) {
		t.Fatalf("the export does not hold %s before forget: the check proves nothing", victim)
	}
	code, out, errs = runCLI(t, append([]string{"forget", "--session", victim, "--data-dir", t.TempDir()}, nu...)...)
	if code != 0 || !strings.Contains(out, "sealed again without the session") {
		t.Fatalf("forget: exit %d\n%s%s", code, out, errs)
	}
	if code, out, errs = runCLI(t, append([]string{"baseline", "export", "--agent", "booking-agent", "-o", file}, nu...)...); code != 0 {
		t.Fatalf("export after forget: exit %d\n%s%s", code, out, errs)
	}
	if b, _ := os.ReadFile(file); strings.Contains(string(b), victim) {
		t.Errorf("the sealed baseline still holds %s after forget", victim)
	}
}

// TestBaselineShowFindsTheDaemons (issue 68): `baseline show` without
// --config computes the default config's scoring version, not the
// daemon's. With one sealed baseline for the agent it shows that one (and
// says its scoring version); with several it lists them.
func TestBaselineShowFindsTheDaemons(t *testing.T) {
	d, _ := startTestDaemon(t)
	js := testenv.JetStream(t, d.NATSURL())
	cfg := scoring.DefaultConfig()
	cfg.Latency.E2EGoodMs = 900 // the daemon's own policy: not the defaults
	scorer, err := scoring.NewScorer(cfg)
	if err != nil {
		t.Fatal(err)
	}
	sv := scorer.VersionFor("booking-agent")
	testenv.PublishCards(t, js, population.Generate(scorer, population.Baseline("booking-agent", "1.0"), 9, 35), 0)
	subj := wire.NewSubjects("lkscore.", "LKSCORE")
	kv, err := js.KeyValue(context.Background(), subj.RegressionBucket())
	if err != nil {
		t.Fatal(err)
	}
	key := regress.HistoryKey(regress.Key{Agent: "booking-agent", Version: "1.0", ScoringVersion: sv})
	testenv.WaitFor(t, 20*time.Second, "the history to reach 35 sessions", func() bool {
		var h regress.History
		e, err := kv.Get(context.Background(), key)
		return err == nil && json.Unmarshal(e.Value(), &h) == nil && h.Total == 35
	})
	nu := []string{"--nats-url", d.NATSURL()}
	if code, out, errs := runCLI(t, append([]string{"baseline", "seal", "--agent", "booking-agent", "--version", "1.0", "--scoring-version", sv}, nu...)...); code != 0 {
		t.Fatalf("seal: exit %d\n%s%s", code, out, errs)
	}
	code, out, errs := runCLI(t, append([]string{"baseline", "show", "--agent", "booking-agent"}, nu...)...)
	if code != 0 || !strings.Contains(out, "scoring "+sv) {
		t.Fatalf("show without --config: exit %d, want the baseline sealed under %s\n%s%s", code, sv, out, errs)
	}
	// A second sealed baseline, under another scoring version: show lists both.
	e, err := kv.Get(context.Background(), regress.BaselineKey("booking-agent", sv))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := kv.Put(context.Background(), regress.BaselineKey("booking-agent", "1.4.0+cother"), e.Value()); err != nil {
		t.Fatal(err)
	}
	code, out, errs = runCLI(t, append([]string{"baseline", "show", "--agent", "booking-agent"}, nu...)...)
	if code != 1 || !strings.Contains(errs, sv) || !strings.Contains(errs, "1.4.0+cother") || !strings.Contains(errs, "--scoring-version") {
		t.Fatalf("show with two baselines: exit %d, want both versions listed\n%s%s", code, out, errs)
	}
}
