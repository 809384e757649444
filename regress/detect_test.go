package regress_test

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/lkscore/lkscore/internal/population"
	"github.com/lkscore/lkscore/regress"
	"github.com/lkscore/lkscore/scoring"
	"github.com/lkscore/lkscore/session"
)

func samples(t testing.TB, p population.Params, seed uint64, n int, firstSeq uint64) []regress.Sample {
	t.Helper()
	scorer, err := scoring.NewScorer(scoring.DefaultConfig())
	if err != nil {
		t.Fatal(err)
	}
	var out []regress.Sample
	for i, card := range population.Generate(scorer, p, seed, n) {
		out = append(out, regress.SampleOf(&card, firstSeq+uint64(i)))
	}
	return out
}

// rates runs Compare on 40 seeds of baseline against current populations,
// 30 sessions each, and returns the share of seeds that regressed and the
// metrics that did.
func rates(t *testing.T, base, cur population.Params) (float64, map[string]int) {
	flagged, which := 0, map[string]int{}
	for seed := uint64(1); seed <= 40; seed++ {
		c := regress.Compare(samples(t, base, seed, 30, 0), samples(t, cur, 1000+seed, 30, 1000), regress.DefaultConfig())
		if !c.Judged {
			t.Fatalf("seed %d not judged: %s", seed, c.Why)
		}
		if len(c.Regressed) > 0 {
			flagged++
		}
		for _, m := range c.Regressed {
			which[m]++
		}
	}
	return float64(flagged) / 40, which
}

// TestFalsePositiveRate: identical populations with different seeds raise no
// regression in at least 95% of 40 seeds.
func TestFalsePositiveRate(t *testing.T) {
	fp, which := rates(t, population.Baseline("a", "1"), population.Baseline("a", "2"))
	t.Logf("false-positive rate %.3f (%v)", fp, which)
	if fp > 0.05 {
		t.Fatalf("false-positive rate %.3f above 0.05: %v", fp, which)
	}
}

// TestPowerLatency: +300 ms on the e2e latency median is flagged, on that
// metric, in at least 90% of 40 seeds with 30 sessions each side.
func TestPowerLatency(t *testing.T) {
	cur := population.Baseline("a", "2")
	cur.E2EMedianMs += 300
	power, which := rates(t, population.Baseline("a", "1"), cur)
	t.Logf("power %.3f (%v)", power, which)
	if float64(which[regress.MetricE2EP50])/40 < 0.9 {
		t.Fatalf("e2e p50 flagged in %d of 40 seeds: %v", which[regress.MetricE2EP50], which)
	}
}

// TestPowerToolErrors: a tool error rate going from 2% to 10% is flagged in
// at least 90% of 40 seeds.
func TestPowerToolErrors(t *testing.T) {
	cur := population.Baseline("a", "2")
	cur.ToolErrorRate = 0.10
	power, which := rates(t, population.Baseline("a", "1"), cur)
	t.Logf("power %.3f (%v)", power, which)
	if float64(which[regress.MetricToolErrors])/40 < 0.9 {
		t.Fatalf("tool error rate flagged in %d of 40 seeds: %v", which[regress.MetricToolErrors], which)
	}
	// Half the tool calls (about 5.5 a session): reported, not required.
	base, half := population.Baseline("a", "1"), cur
	base.ToolEvery, half.ToolEvery = 2, 2
	_, which = rates(t, base, half)
	t.Logf("with a tool call every other turn: tool error rate flagged in %d of 40 seeds", which[regress.MetricToolErrors])
}

// TestTooFewSessionsNeverJudged: below MinSessions on either side, even a
// glaring regression is not judged.
func TestTooFewSessionsNeverJudged(t *testing.T) {
	bad := population.Baseline("a", "2")
	bad.E2EMedianMs, bad.ToolErrorRate = 5000, 0.9
	for _, n := range []int{1, 10, 29} {
		c := regress.Compare(samples(t, population.Baseline("a", "1"), 1, 100, 0), samples(t, bad, 2, n, 1000), regress.DefaultConfig())
		if c.Judged || len(c.Regressed) > 0 {
			t.Fatalf("%d sessions judged: %+v", n, c)
		}
		c = regress.Compare(samples(t, bad, 2, n, 0), samples(t, population.Baseline("a", "1"), 1, 100, 1000), regress.DefaultConfig())
		if c.Judged {
			t.Fatalf("a %d-session baseline judged", n)
		}
	}
}

// TestHistoryReplayIsExact: adding the same samples in any order, twice,
// gives the same History.
func TestHistoryReplayIsExact(t *testing.T) {
	s := samples(t, population.Baseline("a", "1"), 7, 300, 1)
	cfg := regress.DefaultConfig()
	var fwd, rev regress.History
	for _, x := range s {
		fwd.Add(x, cfg)
	}
	for i := len(s) - 1; i >= 0; i-- {
		rev.Add(s[i], cfg)
		rev.Add(s[i], cfg)
	}
	if a, b := fmt.Sprint(fwd), fmt.Sprint(rev); a != b || fwd.Total != 300 || len(fwd.Last) != cfg.Keep || len(fwd.First) != cfg.DriftWindow*cfg.DriftCalibration {
		t.Fatalf("histories differ or are not capped: total %d/%d, last %d, first %d", fwd.Total, rev.Total, len(fwd.Last), len(fwd.First))
	}
}

// TestDriftAndSpikes: a version whose latency grows after calibration
// drifts; one whose sessions start failing spikes; a steady one does neither.
func TestDriftAndSpikes(t *testing.T) {
	cfg := regress.DefaultConfig()
	build := func(later population.Params) *regress.History {
		var h regress.History
		for _, x := range samples(t, population.Baseline("a", "1"), 3, 150, 1) {
			h.Add(x, cfg)
		}
		for _, x := range samples(t, later, 4, 30, 1000) {
			h.Add(x, cfg)
		}
		return &h
	}
	steady := build(population.Baseline("a", "1"))
	if d, s := regress.Drift(steady, cfg), regress.Spikes(steady, cfg); len(d)+len(s) > 0 {
		t.Fatalf("steady version: drift %v, spikes %v", d, s)
	}
	slow := population.Baseline("a", "1")
	slow.E2EMedianMs = 2000
	if d := regress.Drift(build(slow), cfg); !hasMetric(d, regress.MetricE2EP50) {
		t.Fatalf("a slower provider did not drift: %v", d)
	}
	failing := population.Baseline("a", "1")
	failing.ErrorCloseRate = 0.5
	if s := regress.Spikes(build(failing), cfg); !hasMetric(s, regress.MetricCRError) {
		t.Fatalf("CR_ERROR in half the sessions did not spike: %v", s)
	}
}

func hasMetric(sig []regress.Signal, m string) bool {
	for _, s := range sig {
		if s.Metric == m {
			return true
		}
	}
	return false
}

// TestKeyOf: the version comes from a version tag, else the deployment id,
// else "unknown"; the scoring version is part of the key.
func TestKeyOf(t *testing.T) {
	card := session.Scorecard{ScoringVersion: "1.0.0+abc", Session: session.SessionRef{Identity: session.Identity{AgentName: "booking"}, Tags: []string{"env:prod", "version:1.4.2"}, DeploymentID: "dep_1"}}
	if k := regress.KeyOf(&card, ""); k != (regress.Key{Agent: "booking", Version: "1.4.2", ScoringVersion: "1.0.0+abc"}) {
		t.Fatalf("tag: %+v", k)
	}
	if k := regress.KeyOf(&card, "release="); k.Version != "dep_1" {
		t.Fatalf("deployment id: %+v", k)
	}
	// The metadata key's version ranks after the deployment id.
	card.Session.Tags = []string{regress.MetadataVersionTag + "2.0"}
	if k := regress.KeyOf(&card, ""); k.Version != "dep_1" {
		t.Fatalf("metadata before deployment id: %+v", k)
	}
	card.Session.DeploymentID = ""
	if k := regress.KeyOf(&card, ""); k.Version != "2.0" {
		t.Fatalf("metadata: %+v", k)
	}
	card.Session = session.SessionRef{}
	if k := regress.KeyOf(&card, ""); k.Agent != regress.Unknown || k.Version != regress.Unknown {
		t.Fatalf("nothing known: %+v", k)
	}
}

// TestSampleLeavesOutWhatWasNotMeasured: an unscored session's overall and
// a component that measured nothing give no value (not 0) to the history.
func TestSampleLeavesOutWhatWasNotMeasured(t *testing.T) {
	unscored := scoring.Score(scoring.Session{Identity: session.Identity{Key: "RM_h/AJ"}, Close: session.Close{CloseReason: "CR_USER_INITIATED"}}, scoring.DefaultConfig())
	s := regress.SampleOf(&unscored, 1)
	if v, ok := s.Value(regress.MetricOverall); ok {
		t.Errorf("unscored session's overall in the history: %v", v)
	}
	for _, c := range unscored.Components {
		if v, ok := s.Value(c.Name); ok {
			t.Errorf("%s, not measured, in the history: %v", c.Name, v)
		}
	}
	f := func(v float64) *float64 { return &v }
	talk := scoring.Score(scoring.Session{Identity: session.Identity{Key: "RM_t/AJ"}, Close: session.Close{CloseReason: "CR_USER_INITIATED"}, Items: []scoring.Item{
		{ID: "u", Type: scoring.TypeMessage, Role: scoring.RoleUser, Text: "hi", CreatedAt: 1, TranscriptConfidence: f(0.9)},
		{ID: "a", Type: scoring.TypeMessage, Role: scoring.RoleAssistant, Text: "hello", CreatedAt: 2, HasMetrics: true, E2ELatency: f(1)},
	}}, scoring.DefaultConfig())
	s = regress.SampleOf(&talk, 2)
	if _, ok := s.Value(regress.MetricOverall); !ok {
		t.Error("a scored session's overall is missing")
	}
	if v, ok := s.Value("tool_reliability"); ok {
		t.Errorf("tool reliability of a session that called no tool: %v", v)
	}
}

// TestSampleStoredBeforeTokens: a sample written before the token metrics
// (eight values) reads back with those Missing, and a sample that measured
// none of them is written as before, byte for byte (a sealed baseline
// keeps its id); one that did carries them.
func TestSampleStoredBeforeTokens(t *testing.T) {
	old := `{"seq":3,"session":"RM_a/AJ_b","values":[91.5,100,-1,88,72.25,1140,2210.5,0.91],"tool_calls":11,"tool_errors":1,"agent_turns":9,"codes":["slow_response"]}`
	var s regress.Sample
	if err := json.Unmarshal([]byte(old), &s); err != nil {
		t.Fatal(err)
	}
	if _, ok := s.Value(regress.MetricOutputTokens); ok {
		t.Fatal("a sample stored before the token metrics has output tokens")
	}
	if v, ok := s.Value(regress.MetricConfidence); !ok || v != 0.91 {
		t.Fatalf("confidence %v %v", v, ok)
	}
	again, err := json.Marshal(s)
	if err != nil || string(again) != old {
		t.Fatalf("written again:\n%s\nwas\n%s", again, old)
	}
	card := session.Scorecard{Session: session.SessionRef{Identity: session.Identity{Key: "RM_t/AJ"}}, Metrics: session.Metrics{UserTurns: 4},
		Usage: &session.Usage{Reported: true, InputTokens: session.Opt[int]{V: 1200, Set: true}, OutputTokens: session.Opt[int]{V: 340, Set: true}}}
	b, _ := json.Marshal(regress.SampleOf(&card, 1))
	if !strings.Contains(string(b), `,300,85]`) { // per turn of the caller
		t.Errorf("a sample with tokens: %s", b)
	}
}

// TestPowerOutputTokens (issue 69): a version whose calls use 30% more
// output tokens is flagged on that metric in at least 90% of 40 seeds
// with 30 sessions each side; 8 unshifted seeds raise no token alarm.
func TestPowerOutputTokens(t *testing.T) {
	cur := population.Baseline("a", "2")
	cur.OutputTokensPerTurn *= 1.3
	power, which := rates(t, population.Baseline("a", "1"), cur)
	t.Logf("power %.3f (%v)", power, which)
	if float64(which[regress.MetricOutputTokens])/40 < 0.9 {
		t.Fatalf("output tokens flagged in %d of 40 seeds: %v", which[regress.MetricOutputTokens], which)
	}
	for seed := uint64(1); seed <= 8; seed++ {
		c := regress.Compare(samples(t, population.Baseline("a", "1"), seed, 30, 0),
			samples(t, population.Baseline("a", "2"), 1000+seed, 30, 1000), regress.DefaultConfig())
		if slices.Contains(c.Regressed, regress.MetricOutputTokens) || slices.Contains(c.Regressed, regress.MetricInputTokens) {
			t.Errorf("seed %d: unshifted tokens flagged: %v", seed, c.Regressed)
		}
	}
}
