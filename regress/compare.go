package regress

import (
	"fmt"
	"math"
	"sort"

	"github.com/lkscore/lkscore/wire"
)

// Config tunes detection. Zero fields take the defaults (DefaultConfig).
type Config struct {
	// MinSessions: a version (and its baseline) is judged only with at least
	// this many sessions.
	MinSessions int `yaml:"min_sessions" json:"min_sessions"`
	// FDR is the false discovery rate of the Benjamini–Hochberg correction
	// across the metrics compared at once.
	FDR float64 `yaml:"fdr" json:"fdr"`
	// MinEffect overrides a metric's minimum effect, by metric name.
	MinEffect map[string]float64 `yaml:"min_effect" json:"min_effect,omitempty"`
	// DriftWindow is the number of consecutive sessions in one drift window;
	// DriftCalibration the windows that set a version's control limits.
	DriftWindow      int     `yaml:"drift_window" json:"drift_window"`
	DriftCalibration int     `yaml:"drift_calibration" json:"drift_calibration"`
	DriftLambda      float64 `yaml:"drift_lambda" json:"drift_lambda"`
	DriftL           float64 `yaml:"drift_limit" json:"drift_limit"`
	// SpikeWindow sessions are tested against the version's earlier
	// sessions; SpikeP is the binomial tail probability that alerts.
	SpikeWindow int     `yaml:"spike_window" json:"spike_window"`
	SpikeP      float64 `yaml:"spike_p" json:"spike_p"`
	// Keep is how many recent sessions per agent/version history keeps.
	Keep int `yaml:"keep" json:"keep"`
}

// DefaultConfig is the documented default.
func DefaultConfig() Config {
	return Config{MinSessions: 30, FDR: 0.05, DriftWindow: 10, DriftCalibration: 5, DriftLambda: 0.2, DriftL: 3,
		SpikeWindow: 20, SpikeP: 0.001, Keep: 100}
}

func (c Config) withDefaults() Config {
	d := DefaultConfig()
	if c.MinSessions <= 0 {
		c.MinSessions = d.MinSessions
	}
	if c.FDR <= 0 {
		c.FDR = d.FDR
	}
	if c.DriftWindow <= 0 {
		c.DriftWindow = d.DriftWindow
	}
	if c.DriftCalibration <= 0 {
		c.DriftCalibration = d.DriftCalibration
	}
	if c.DriftLambda <= 0 {
		c.DriftLambda = d.DriftLambda
	}
	if c.DriftL <= 0 {
		c.DriftL = d.DriftL
	}
	if c.SpikeWindow <= 0 {
		c.SpikeWindow = d.SpikeWindow
	}
	if c.SpikeP <= 0 {
		c.SpikeP = d.SpikeP
	}
	if c.Keep <= 0 {
		c.Keep = d.Keep
	}
	return c
}

// Validate reports settings that cannot work.
func (c Config) Validate() error {
	c = c.withDefaults()
	switch {
	case c.FDR >= 1:
		return fmt.Errorf("regression.fdr: must be below 1, got %v", c.FDR)
	case c.DriftLambda > 1:
		return fmt.Errorf("regression.drift_lambda: must be in (0, 1], got %v", c.DriftLambda)
	case c.SpikeP >= 1:
		return fmt.Errorf("regression.spike_p: must be below 1, got %v", c.SpikeP)
	case c.Keep < c.MinSessions || c.Keep < c.DriftWindow*(c.DriftCalibration+1) || c.Keep < 2*c.SpikeWindow:
		return fmt.Errorf("regression.keep: %d sessions cannot hold min_sessions, drift calibration or two spike windows", c.Keep)
	}
	for name := range c.MinEffect {
		if !knownMetric(name) {
			return fmt.Errorf("regression.min_effect: unknown metric %q", name)
		}
	}
	return nil
}

func knownMetric(name string) bool {
	for _, d := range metricDefs() {
		if d.name == name {
			return true
		}
	}
	return false
}

func (c Config) minEffect(d metricDef) float64 {
	if v, ok := c.MinEffect[d.name]; ok {
		return v
	}
	return d.minEffect
}

// MetricResult is one metric's comparison.
type MetricResult struct {
	Metric string `json:"metric"`
	// Baseline and Current are medians (continuous metrics) or pooled
	// proportions (rates).
	Baseline float64 `json:"baseline"`
	Current  float64 `json:"current"`
	// Effect is Current − Baseline; positive Worse means it moved in the bad direction.
	Effect    float64 `json:"effect"`
	Worse     bool    `json:"worse"`
	MinEffect float64 `json:"min_effect"`
	P         float64 `json:"p_value"`
	Q         float64 `json:"q_value"` // Benjamini–Hochberg adjusted
	Test      string  `json:"test"`    // mann_whitney_u or two_proportion_z
	NBaseline int     `json:"n_baseline"`
	NCurrent  int     `json:"n_current"`
	Regressed bool    `json:"regressed"`
}

// Comparison is a version judged against its baseline.
type Comparison struct {
	Judged    bool           `json:"judged"`
	Why       string         `json:"why,omitempty"` // when not judged
	Metrics   []MetricResult `json:"metrics,omitempty"`
	Regressed []string       `json:"regressed,omitempty"`
	// WorstSessions are the current sessions with the lowest overall score.
	WorstSessions []SessionRef `json:"worst_sessions,omitempty"`
	// CodesGrown are finding codes whose share of sessions grew by at
	// least 10 points.
	CodesGrown []CodeShare `json:"codes_grown,omitempty"`
}

// SessionRef names a session in alerts: its scorecard key and score (the
// contract's type: alerts carry it).
type SessionRef = wire.SessionRef

// CodeShare is a finding code's share of sessions on each side (the
// contract's type: alerts carry it).
type CodeShare = wire.CodeShare

// Compare judges current against baseline, metric by metric: Mann–Whitney U
// for continuous metrics, a pooled two-proportion z-test for rates, both
// one-sided (only a change for the worse can alert), the p-values adjusted
// together with Benjamini–Hochberg. A metric regressed
// when its q-value is at most cfg.FDR, it moved in the worse direction, and
// by at least its minimum effect. Either side below cfg.MinSessions is not
// judged.
func Compare(baseline, current []Sample, cfg Config) Comparison {
	cfg = cfg.withDefaults()
	if len(current) < cfg.MinSessions || len(baseline) < cfg.MinSessions {
		return Comparison{Why: fmt.Sprintf("%d sessions against %d in the baseline; at least %d each are needed", len(current), len(baseline),
			cfg.MinSessions)}
	}
	out := Comparison{Judged: true}
	var ps []float64
	for _, d := range metricDefs() {
		r := MetricResult{Metric: d.name, MinEffect: cfg.minEffect(d)}
		switch d.kind {
		case kindContinuous:
			x, y := values(baseline, d.name), values(current, d.name)
			if len(x) < cfg.MinSessions || len(y) < cfg.MinSessions {
				continue // not measured often enough on one side
			}
			r.Test, r.NBaseline, r.NCurrent = "mann_whitney_u", len(x), len(y)
			r.Baseline, r.Current, r.P = median(x), median(y), mannWhitney(x, y, d.worse)
			r.MinEffect = max(r.MinEffect, d.minRelative*math.Abs(r.Baseline))
		case kindRate:
			k1, n1 := counts(baseline, d)
			k2, n2 := counts(current, d)
			if n1 == 0 || n2 == 0 {
				continue
			}
			r.Test, r.NBaseline, r.NCurrent = "two_proportion_z", n1, n2
			r.Baseline, r.Current, r.P = float64(k1)/float64(n1), float64(k2)/float64(n2), twoProportions(k1, n1, k2, n2, d.worse)
		}
		r.Effect = r.Current - r.Baseline
		r.Worse = r.Effect*d.worse > 0
		out.Metrics = append(out.Metrics, r)
		ps = append(ps, r.P)
	}
	qs := benjaminiHochberg(ps)
	for i := range out.Metrics {
		r := &out.Metrics[i]
		r.Q = qs[i]
		r.Regressed = r.Worse && r.Q <= cfg.FDR && math.Abs(r.Effect) >= r.MinEffect
		if r.Regressed {
			out.Regressed = append(out.Regressed, r.Metric)
		}
		r.Baseline, r.Current, r.Effect = round(r.Baseline, 4), round(r.Current, 4), round(r.Effect, 4)
		r.P, r.Q = roundP(r.P), roundP(r.Q)
	}
	out.WorstSessions = worst(current, 5)
	out.CodesGrown = codesGrown(baseline, current, 0.10)
	return out
}

// roundP keeps four significant digits: enough to read, and no false precision.
func roundP(p float64) float64 {
	if p < 1e-15 {
		return 0
	}
	mag := math.Pow(10, math.Floor(math.Log10(p))-3)
	return math.Round(p/mag) * mag
}

func counts(samples []Sample, d metricDef) (k, n int) {
	for i := range samples {
		a, b := d.count(&samples[i])
		k, n = k+a, n+b
	}
	return k, n
}

// WorstSessions returns the n sessions with the lowest overall score (ties by key).
func WorstSessions(samples []Sample, n int) []SessionRef { return worst(samples, n) }

// worst returns the n sessions with the lowest overall score (ties by key).
func worst(samples []Sample, n int) []SessionRef {
	refs := make([]SessionRef, 0, len(samples))
	for i := range samples {
		v, _ := samples[i].Value(MetricOverall)
		refs = append(refs, SessionRef{Session: samples[i].Session, Overall: v})
	}
	sort.Slice(refs, func(i, j int) bool {
		if refs[i].Overall != refs[j].Overall {
			return refs[i].Overall < refs[j].Overall
		}
		return refs[i].Session < refs[j].Session
	})
	return refs[:min(n, len(refs))]
}

// codesGrown lists the finding codes whose share of sessions grew by at
// least minGrowth, largest growth first.
func codesGrown(baseline, current []Sample, minGrowth float64) []CodeShare {
	share := func(samples []Sample) map[string]float64 {
		m := map[string]float64{}
		for i := range samples {
			seen := map[string]bool{}
			for _, c := range samples[i].Codes {
				if !seen[c] {
					seen[c] = true
					m[c] += 1 / float64(len(samples))
				}
			}
		}
		return m
	}
	b, c := share(baseline), share(current)
	var out []CodeShare
	for code, cur := range c {
		if cur-b[code] >= minGrowth {
			out = append(out, CodeShare{Code: code, Baseline: round(b[code], 3), Current: round(cur, 3)})
		}
	}
	sort.Slice(out, func(i, j int) bool {
		gi, gj := out[i].Current-out[i].Baseline, out[j].Current-out[j].Baseline
		if gi != gj {
			return gi > gj
		}
		return out[i].Code < out[j].Code
	})
	return out
}
