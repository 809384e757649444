package regress

import (
	"fmt"
	"math"
)

// Evaluation is one kind of detection run on a version's history: the
// metrics it judged and those firing, with the evidence.
type Evaluation struct {
	Kind       string // KindRegression, KindDrift, KindFailures
	Judged     []string
	Firing     map[string]Signal
	BaselineOf string            // what the current figures were compared with
	Comparison *Comparison       // the regression against a baseline; nil for drift and failures
	Worst      []SessionRef      // drift and failures: the worst of the latest sessions
	Status     map[string]Signal // drift and failures: every judged metric, firing or not
}

// driftMetrics are the metrics judged for drift: every metric but the
// failure rates and the per-session counts.
func driftMetrics() []string {
	var out []string
	for _, name := range MetricNames() {
		if name != MetricToolErrors && name != MetricInterrupts && name != MetricCRError && name != MetricFailed {
			out = append(out, name)
		}
	}
	return out
}

// Evaluate runs every detection h has enough sessions for: the regression
// against base (nil: no baseline; baseOf says what base is), drift against
// the version's own first sessions, and failure spikes.
func Evaluate(h *History, base []Sample, baseOf string, cfg Config) []Evaluation {
	var out []Evaluation
	if base != nil {
		c, sig := Regression(base, h.Recent(), cfg)
		if c.Judged {
			ev := Evaluation{Kind: KindRegression, Firing: map[string]Signal{}, BaselineOf: baseOf, Comparison: &c}
			for _, m := range c.Metrics {
				ev.Judged = append(ev.Judged, m.Metric)
			}
			for _, s := range sig {
				ev.Firing[s.Metric] = s
			}
			out = append(out, ev)
		}
	}
	if h.Total >= cfg.DriftWindow*(cfg.DriftCalibration+1) {
		out = append(out, statusEvaluation(Evaluation{Kind: KindDrift, Judged: driftMetrics(),
			BaselineOf: fmt.Sprintf("this version's first %d sessions", cfg.DriftWindow*cfg.DriftCalibration),
			Worst:      WorstSessions(latestN(h.Recent(), cfg.DriftWindow), 5)}, DriftStatus(h, cfg)))
	}
	if len(h.Recent()) >= cfg.SpikeWindow+cfg.MinSessions {
		out = append(out, statusEvaluation(Evaluation{Kind: KindFailures, Judged: []string{MetricCRError, MetricFailed},
			BaselineOf: "this version's earlier sessions", Worst: WorstSessions(latestN(h.Recent(), cfg.SpikeWindow), 5)},
			SpikeStatus(h, cfg)))
	}
	return out
}

// statusEvaluation fills ev's status and firing metrics from a test's
// signals.
func statusEvaluation(ev Evaluation, signals []Signal) Evaluation {
	ev.Firing, ev.Status = map[string]Signal{}, map[string]Signal{}
	for _, s := range signals {
		ev.Status[s.Metric] = s
		if s.Firing {
			ev.Firing[s.Metric] = s
		}
	}
	return ev
}

// Clear reports whether a firing metric is clearly back to normal. For a
// version against its baseline that takes more than "no longer
// significant": the q-value above 2 × fdr, or the effect below half the
// minimum, so that a metric hovering at the threshold does not fire and
// resolve by turns. Drift and failure spikes resolve when their test no
// longer fires.
func (ev Evaluation) Clear(metric string, cfg Config) bool {
	if ev.Comparison == nil {
		return true
	}
	fdr := cfg.FDR
	if fdr <= 0 {
		fdr = DefaultConfig().FDR
	}
	for _, m := range ev.Comparison.Metrics {
		if m.Metric == metric {
			return !m.Worse || m.Q > 2*fdr || math.Abs(m.Effect) < m.MinEffect/2
		}
	}
	return true
}

// Latest returns the figures of a metric's judgement when it is no longer
// firing, for the resolved message.
func (ev Evaluation) Latest(metric string) (Signal, bool) {
	if ev.Comparison == nil {
		s, ok := ev.Status[metric] // drift and failures
		return s, ok
	}
	for _, m := range ev.Comparison.Metrics {
		if m.Metric == metric {
			return Signal{Baseline: m.Baseline, Current: m.Current, Effect: m.Effect, P: m.P, Q: m.Q}, true
		}
	}
	return Signal{}, false
}

// latestN returns the last n of samples (all of them when fewer).
func latestN(samples []Sample, n int) []Sample {
	return samples[max(0, len(samples)-n):]
}
