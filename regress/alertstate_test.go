package regress

import (
	"strings"
	"testing"
	"time"

	"github.com/lkscore/lkscore/wire"
)

// TestAdvanceFiresHoldsResolves: the alert state machine alone, without
// NATS. A metric that starts firing is recorded once; it does not resolve
// before regression.min_firing however quiet the metric; it resolves after,
// with the figures that resolved it.
func TestAdvanceFiresHoldsResolves(t *testing.T) {
	t.Parallel()
	cfg, minFiring := DefaultConfig(), time.Minute
	key := Key{Agent: "support", Version: "2", ScoringVersion: "1.2.0"}
	t0 := time.Date(2026, 12, 3, 8, 0, 0, 0, time.UTC)
	drift := func(firing bool, current float64) Evaluation {
		s := Signal{Kind: KindDrift, Metric: MetricOverall, Baseline: 90, Current: current, Firing: firing}
		ev := Evaluation{Kind: KindDrift, Judged: []string{MetricOverall},
			Firing: map[string]Signal{}, Status: map[string]Signal{s.Metric: s}}
		if firing {
			ev.Firing[s.Metric] = s
		}
		return ev
	}
	var st AlertState
	step := func(ev Evaluation, at time.Time, seq uint64) {
		Advance(&st, key, ev, cfg, minFiring, Trigger{Session: "RM/AJ", Seq: seq, At: at})
	}

	step(drift(true, 70), t0, 10)
	if len(st.Outbox) != 1 || st.Outbox[0].Status != wire.AlertFiring || !st.Outbox[0].Since.Equal(t0) {
		t.Fatalf("after the first firing evaluation, outbox %+v", st.Outbox)
	}
	if id := st.Outbox[0].ID; !strings.HasPrefix(id, "drift/support/2/1.2.0/overall@10") {
		t.Errorf("alert id %q", id)
	}
	st.Outbox = nil
	step(drift(true, 68), t0.Add(10*time.Second), 11)
	if len(st.Outbox) != 0 {
		t.Fatalf("a metric still firing was recorded again: %+v", st.Outbox)
	}
	step(drift(false, 89), t0.Add(30*time.Second), 12)
	if len(st.Outbox) != 0 || len(st.Firing) != 1 {
		t.Fatalf("resolved inside min_firing: outbox %+v, firing %d", st.Outbox, len(st.Firing))
	}
	step(drift(false, 89.5), t0.Add(2*time.Minute), 13)
	if len(st.Outbox) != 1 || len(st.Firing) != 0 {
		t.Fatalf("not resolved after min_firing: outbox %+v, firing %d", st.Outbox, len(st.Firing))
	}
	r := st.Outbox[0]
	if r.Status != wire.AlertResolved || r.Current != 89.5 || r.Seq != 13 || !r.Since.Equal(t0) {
		t.Errorf("resolved alert %+v: want the resolving figures (current 89.5, seq 13) and the firing episode's since", r)
	}
}

// TestAdvanceRegressionHysteresis: a regression against a baseline that is
// no longer significant but still near the threshold stays firing
// (Evaluation.Clear); one clearly back to normal resolves.
func TestAdvanceRegressionHysteresis(t *testing.T) {
	t.Parallel()
	cfg, minFiring := DefaultConfig(), time.Duration(0)
	fdr := cfg.FDR
	key := Key{Agent: "booking", Version: "3", ScoringVersion: "1.2.0"}
	at := time.Date(2026, 12, 3, 9, 0, 0, 0, time.UTC)
	comparison := func(q, effect float64) Evaluation {
		c := Comparison{Judged: true, Metrics: []MetricResult{{Metric: MetricE2EP50, Worse: true, Q: q,
			Effect: effect, MinEffect: 0.2, Baseline: 1.0, Current: 1.0 + effect}}}
		return Evaluation{Kind: KindRegression, Judged: []string{MetricE2EP50}, Firing: map[string]Signal{},
			Comparison: &c}
	}
	st := AlertState{Firing: map[string]wire.Alert{
		KindRegression + "/" + MetricE2EP50: {ID: "x", Kind: KindRegression, Since: at.Add(-time.Hour)},
	}}
	for _, tc := range []struct {
		q, effect float64
		resolves  bool
	}{
		{1.5 * fdr, 0.25, false}, // not significant, but neither far from it nor a small effect
		{3 * fdr, 0.25, true},    // q above 2 × fdr
		{1.5 * fdr, 0.05, true},  // effect below half the minimum
	} {
		s := st
		s.Firing = map[string]wire.Alert{}
		for k, v := range st.Firing {
			s.Firing[k] = v
		}
		s.Outbox = nil
		ev := comparison(tc.q, tc.effect)
		Advance(&s, key, ev, cfg, minFiring, Trigger{Session: "RM/AJ", Seq: 7, At: at})
		if got := len(s.Outbox) == 1 && s.Outbox[0].Status == wire.AlertResolved; got != tc.resolves {
			t.Errorf("q %.3f effect %.2f: resolved %v, want %v", tc.q, tc.effect, got, tc.resolves)
		}
	}
}
