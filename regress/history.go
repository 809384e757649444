package regress

import (
	"fmt"
	"math"
	"slices"
	"sort"
)

// History is what detection keeps of one agent/version: the first sessions
// (which calibrate the drift chart) and the most recent ones, each capped.
// Add is commutative and idempotent (samples are a set ordered by Seq), so
// replaying the results stream in any order rebuilds the same History.
type History struct {
	Key   Key      `json:"key"`
	Total int      `json:"total"` // sessions ever added (distinct Seq)
	First []Sample `json:"first"` // the lowest Seqs, at most calibrationSize
	Last  []Sample `json:"last"`  // the highest Seqs, at most Config.Keep
}

func calibrationSize(cfg Config) int { return cfg.DriftWindow * cfg.DriftCalibration }

// Add merges s into h. It reports false when s was already there.
func (h *History) Add(s Sample, cfg Config) bool {
	cfg = cfg.withDefaults()
	if containsSeq(h.First, s.Seq) || containsSeq(h.Last, s.Seq) {
		return false
	}
	h.Total++
	h.First = insertCapped(h.First, s, calibrationSize(cfg), true)
	h.Last = insertCapped(h.Last, s, cfg.Keep, false)
	return true
}

func containsSeq(samples []Sample, seq uint64) bool {
	i := sort.Search(len(samples), func(i int) bool { return samples[i].Seq >= seq })
	return i < len(samples) && samples[i].Seq == seq
}

// insertCapped keeps samples sorted by Seq and at most n long, dropping the
// highest Seqs (keepLowest) or the lowest.
func insertCapped(samples []Sample, s Sample, n int, keepLowest bool) []Sample {
	i := sort.Search(len(samples), func(i int) bool { return samples[i].Seq >= s.Seq })
	samples = slices.Insert(samples, i, s)
	if len(samples) > n {
		if keepLowest {
			samples = samples[:n]
		} else {
			samples = slices.Delete(samples, 0, len(samples)-n)
		}
	}
	return samples
}

// Clone returns a copy whose slices Add may change without touching h's.
func (h *History) Clone() History {
	c := *h
	c.First = slices.Clone(h.First)
	c.Last = slices.Clone(h.Last)
	return c
}

// Recent returns the version's most recent sessions (at most Config.Keep).
func (h *History) Recent() []Sample { return h.Last }

// Alert kinds, as the subjects lkscore.alert.<kind>.<agent> name them.
const (
	KindRegression = "regression"
	KindDrift      = "drift"
	KindFailures   = "failures"
)

// Signal is one condition detection found firing, for one metric.
type Signal struct {
	Kind   string `json:"kind"`
	Metric string `json:"metric"`
	// Evidence: the figures on each side and the test behind them.
	Baseline  float64 `json:"baseline"`
	Current   float64 `json:"current"`
	Effect    float64 `json:"effect"`
	P         float64 `json:"p_value,omitempty"`
	Q         float64 `json:"q_value,omitempty"`
	Limit     float64 `json:"limit,omitempty"` // drift: the control limit crossed
	Test      string  `json:"test"`
	NBaseline int     `json:"n_baseline"`
	NCurrent  int     `json:"n_current"`
	// Firing: the test fires. DriftStatus and SpikeStatus return the
	// metrics that do not too, with their figures.
	Firing bool `json:"-"`
	// Description says what a threshold counted; the alert carries it as
	// its baseline_of.
	Description string `json:"-"`
}

func firingOnly(all []Signal) []Signal {
	var out []Signal
	for _, s := range all {
		if s.Firing {
			out = append(out, s)
		}
	}
	return out
}

// Regression compares the version's recent sessions with a baseline.
func Regression(baseline, current []Sample, cfg Config) (Comparison, []Signal) {
	c := Compare(baseline, current, cfg)
	var sig []Signal
	for _, m := range c.Metrics {
		if m.Regressed {
			sig = append(sig, Signal{Kind: KindRegression, Metric: m.Metric, Baseline: m.Baseline, Current: m.Current, Effect: m.Effect,
				P: m.P, Q: m.Q, Test: m.Test, NBaseline: m.NBaseline, NCurrent: m.NCurrent})
		}
	}
	return c, sig
}

// Drift runs an EWMA control chart per continuous metric over the
// version's recent sessions in windows of cfg.DriftWindow: the chart's
// centre and spread come from the version's first cfg.DriftCalibration
// windows. A metric drifts when the EWMA of the latest window is beyond the
// control limit in the worse direction, by at least the metric's minimum
// effect.
func Drift(h *History, cfg Config) []Signal { return firingOnly(DriftStatus(h, cfg)) }

// DriftStatus is Drift's judgement of every continuous metric it can
// judge, firing or not (Signal.Firing): a resolved alert reports the
// figures that resolved it.
func DriftStatus(h *History, cfg Config) []Signal {
	cfg = cfg.withDefaults()
	calib := calibrationSize(cfg)
	if len(h.First) < calib || h.Total < calib+cfg.DriftWindow {
		return nil
	}
	// Windows after the calibration sessions, oldest first, whole windows
	// ending at the latest session.
	lastCalib := h.First[calib-1].Seq
	var after []Sample
	for _, s := range h.Last {
		if s.Seq > lastCalib {
			after = append(after, s)
		}
	}
	nWin := len(after) / cfg.DriftWindow
	if nWin == 0 {
		return nil
	}
	after = after[len(after)-nWin*cfg.DriftWindow:]
	var out []Signal
	for _, d := range metricDefs() {
		if d.kind != kindContinuous {
			continue
		}
		var calibMeans []float64
		for w := 0; w < cfg.DriftCalibration; w++ {
			if v := values(h.First[w*cfg.DriftWindow:(w+1)*cfg.DriftWindow], d.name); len(v) > 0 {
				calibMeans = append(calibMeans, mean(v))
			}
		}
		if len(calibMeans) < cfg.DriftCalibration {
			continue
		}
		mu, sigma := mean(calibMeans), stddev(calibMeans)
		z := mu
		for w := 0; w < nWin; w++ {
			v := values(after[w*cfg.DriftWindow:(w+1)*cfg.DriftWindow], d.name)
			if len(v) == 0 {
				continue
			}
			z = cfg.DriftLambda*mean(v) + (1-cfg.DriftLambda)*z
		}
		limit := mu + d.worse*cfg.DriftL*sigma*math.Sqrt(cfg.DriftLambda/(2-cfg.DriftLambda))
		out = append(out, Signal{Kind: KindDrift, Metric: d.name, Baseline: round(mu, 4), Current: round(z, 4),
			Effect: round(z-mu, 4), Limit: round(limit, 4), Test: "ewma", NBaseline: calib, NCurrent: len(after),
			Firing: (z-limit)*d.worse > 0 && math.Abs(z-mu) >= cfg.minEffect(d)})
	}
	return out
}

// Spikes tests the share of failing sessions (CR_ERROR, or a fail verdict)
// in the latest cfg.SpikeWindow sessions against the version's earlier
// sessions: a one-sided binomial tail below cfg.SpikeP, and a share at
// least the metric's minimum effect above the history's.
func Spikes(h *History, cfg Config) []Signal { return firingOnly(SpikeStatus(h, cfg)) }

// SpikeStatus is Spikes' judgement of both failure metrics, firing or not.
func SpikeStatus(h *History, cfg Config) []Signal {
	cfg = cfg.withDefaults()
	if len(h.Last) < cfg.SpikeWindow+cfg.MinSessions {
		return nil
	}
	window := h.Last[len(h.Last)-cfg.SpikeWindow:]
	earlier := h.Last[:len(h.Last)-cfg.SpikeWindow]
	var out []Signal
	for _, d := range metricDefs() {
		if d.name != MetricCRError && d.name != MetricFailed {
			continue
		}
		k0, n0 := counts(earlier, d)
		k, n := counts(window, d)
		p0 := (float64(k0) + 1) / (float64(n0) + 2) // never 0: one failure in the history is no proof of none
		share := float64(k) / float64(n)
		p := binomialTail(k, n, p0)
		out = append(out, Signal{Kind: KindFailures, Metric: d.name, Baseline: round(p0, 4), Current: round(share, 4),
			Effect: round(share-p0, 4), P: roundP(p), Test: "binomial_tail", NBaseline: n0, NCurrent: n,
			Firing: p < cfg.SpikeP && share-p0 >= cfg.minEffect(d)})
	}
	return out
}

// String is for logs.
func (k Key) String() string {
	return fmt.Sprintf("%s@%s (scoring %s)", k.Agent, k.Version, k.ScoringVersion)
}

// Remove drops a session's samples (lkscore forget). It reports whether
// there were any. Total, the sessions ever added, stays.
func (h *History) Remove(session string) bool {
	keep := func(s []Sample) []Sample {
		return slices.DeleteFunc(s, func(x Sample) bool { return x.Session == session })
	}
	n := len(h.First) + len(h.Last)
	h.First, h.Last = keep(h.First), keep(h.Last)
	return len(h.First)+len(h.Last) != n
}
