package scoring

import (
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"math"
)

// Config holds the weights and thresholds of the scoring model. Every
// default is documented in docs/scoring.md with where it comes from. Times
// are milliseconds, as in LiveKit's JobMetrics.
type Config struct {
	Weights    Weights    `yaml:"weights" json:"weights"`
	Verdict    Verdict    `yaml:"verdict" json:"verdict"`
	Turns      Turns      `yaml:"turns" json:"turns"`
	Transcript Transcript `yaml:"transcript" json:"transcript"`
	Tools      Tools      `yaml:"tools" json:"tools"`
	Latency    Latency    `yaml:"latency" json:"latency"`
	// Audio holds the thresholds of findings from the stereo recording.
	Audio AudioConfig `yaml:"audio" json:"audio"`
	// Agents are the agents' own policies (scoring.agents.<name>), each
	// the whole model with the agent's overrides (docs/policies.md).
	Agents map[string]AgentPolicy `yaml:"agents" json:"agents,omitempty"`
	// Rules are the team's own checks, CEL expressions evaluated on every
	// session their when matches (docs/policies.md).
	Rules []Rule `yaml:"rules" json:"rules,omitempty"`
	// Pricing is the team's price table: each scorecard's usage priced
	// (docs/scoring.md, "Cost"); nil: no cost on the cards. It is part of
	// the scoring version: a price change is re-priced by lkscore rescore.
	Pricing *Pricing `yaml:"pricing" json:"pricing,omitempty"`
	// VersionTag is regression.version_tag, the prefix of the tag that
	// names the agent's version (session.Version): policies' match.versions
	// and rules' when.versions read it. Set from the regression section,
	// never its own key, and outside the config's hash (it chooses which
	// policy applies; the policy's own hash says which one did).
	VersionTag string `yaml:"-" json:"-"`
}

// Weights of the four components in the overall score.
type Weights struct {
	TurnHandling        float64 `yaml:"turn_handling" json:"turn_handling"`
	TranscriptIntegrity float64 `yaml:"transcript_integrity" json:"transcript_integrity"`
	ToolReliability     float64 `yaml:"tool_reliability" json:"tool_reliability"`
	ResponseLatency     float64 `yaml:"response_latency" json:"response_latency"`
}

// Verdict thresholds, on 0–100 scores.
type Verdict struct {
	// Pass is the lowest overall score that passes.
	Pass float64 `yaml:"pass" json:"pass"`
	// Warn is the lowest score that warns; below it, fail. It also applies to
	// each component: a failing component caps the overall verdict at warn.
	Warn float64 `yaml:"warn" json:"warn"`
}

// Turns thresholds for turn handling.
type Turns struct {
	OverlapMs           float64 `yaml:"overlap_ms" json:"overlap_ms"`
	LongSilenceMs       float64 `yaml:"long_silence_ms" json:"long_silence_ms"`
	EndOfTurnDelayMs    float64 `yaml:"end_of_turn_delay_ms" json:"end_of_turn_delay_ms"`
	InterruptionsPerMin float64 `yaml:"interruptions_per_min" json:"interruptions_per_min"`
}

// Transcript thresholds for transcript integrity.
type Transcript struct {
	LowConfidence     float64 `yaml:"low_confidence" json:"low_confidence"`
	MeanConfidenceMin float64 `yaml:"mean_confidence_min" json:"mean_confidence_min"`
}

// Tools thresholds for tool reliability.
type Tools struct {
	SlowMs float64 `yaml:"slow_ms" json:"slow_ms"`
}

// Latency thresholds: a percentile at or under Good costs nothing, over Bad
// costs the rule's full deduction, and in between a linear share of half of it.
type Latency struct {
	E2EGoodMs      float64 `yaml:"e2e_good_ms" json:"e2e_good_ms"`
	E2EBadMs       float64 `yaml:"e2e_bad_ms" json:"e2e_bad_ms"`
	E2ETurnMs      float64 `yaml:"e2e_turn_ms" json:"e2e_turn_ms"`
	TTFTGoodMs     float64 `yaml:"ttft_good_ms" json:"ttft_good_ms"`
	TTFTBadMs      float64 `yaml:"ttft_bad_ms" json:"ttft_bad_ms"`
	TTFBGoodMs     float64 `yaml:"ttfb_good_ms" json:"ttfb_good_ms"`
	TTFBBadMs      float64 `yaml:"ttfb_bad_ms" json:"ttfb_bad_ms"`
	STTDelayGoodMs float64 `yaml:"stt_delay_good_ms" json:"stt_delay_good_ms"`
	STTDelayBadMs  float64 `yaml:"stt_delay_bad_ms" json:"stt_delay_bad_ms"`
}

// DefaultConfig returns the documented defaults (docs/scoring.md).
func DefaultConfig() Config {
	return Config{
		Weights: Weights{TurnHandling: 0.25, TranscriptIntegrity: 0.25, ToolReliability: 0.25, ResponseLatency: 0.25},
		Verdict: Verdict{Pass: 80, Warn: 60},
		Turns: Turns{
			OverlapMs:           300,  // overlaps of a few hundred ms are normal in human talk
			LongSilenceMs:       3000, // ~15× the ~200 ms human gap (Stivers et al. 2009)
			EndOfTurnDelayMs:    1500,
			InterruptionsPerMin: 2,
		},
		Transcript: Transcript{LowConfidence: 0.6, MeanConfidenceMin: 0.8},
		Tools:      Tools{SlowMs: 5000},
		Latency: Latency{
			E2EGoodMs: 1500, E2EBadMs: 2500, E2ETurnMs: 2500,
			TTFTGoodMs: 800, TTFTBadMs: 1500,
			TTFBGoodMs: 300, TTFBBadMs: 700,
			STTDelayGoodMs: 500, STTDelayBadMs: 1000,
		},
		Audio: AudioConfig{HeardLatencyMs: 2500, YieldMs: 1000, DisagreementMs: 1000, AwkwardSilenceMs: 2000},
	}
}

// Validate reports every problem at once, each naming its key (relative to
// the scoring section): the model's, every policy's and what scoring reads
// of every rule. The rules' expressions are the engine's to check
// (rules.Validate checks both).
func (c Config) Validate() error {
	return errors.Join(c.validateModel(), c.validatePolicies(), validateRules(c.Rules), c.Pricing.validate())
}

// validateModel checks the weights and thresholds.
func (c Config) validateModel() error {
	var errs []error
	add := func(format string, a ...any) { errs = append(errs, fmt.Errorf(format, a...)) }
	nonneg := func(key string, v float64) {
		if v < 0 || math.IsNaN(v) || math.IsInf(v, 0) {
			add("scoring.%s: must be a finite number >= 0, got %v", key, v)
		}
	}
	w := c.Weights
	for key, v := range map[string]float64{"weights.turn_handling": w.TurnHandling, "weights.transcript_integrity": w.TranscriptIntegrity,
		"weights.tool_reliability": w.ToolReliability, "weights.response_latency": w.ResponseLatency} {
		nonneg(key, v)
	}
	if w.TurnHandling+w.TranscriptIntegrity+w.ToolReliability+w.ResponseLatency <= 0 {
		add("scoring.weights: at least one weight must be positive")
	}
	if c.Verdict.Pass > 100 || c.Verdict.Warn < 0 || c.Verdict.Warn > c.Verdict.Pass {
		add("scoring.verdict: want 0 <= warn (%v) <= pass (%v) <= 100", c.Verdict.Warn, c.Verdict.Pass)
	}
	for key, v := range map[string]float64{"turns.overlap_ms": c.Turns.OverlapMs, "turns.long_silence_ms": c.Turns.LongSilenceMs,
		"turns.end_of_turn_delay_ms": c.Turns.EndOfTurnDelayMs, "turns.interruptions_per_min": c.Turns.InterruptionsPerMin,
		"tools.slow_ms": c.Tools.SlowMs, "latency.e2e_turn_ms": c.Latency.E2ETurnMs, "audio.heard_latency_ms": c.Audio.HeardLatencyMs,
		"audio.yield_ms": c.Audio.YieldMs, "audio.disagreement_ms": c.Audio.DisagreementMs, "audio.awkward_silence_ms": c.Audio.AwkwardSilenceMs} {
		nonneg(key, v)
	}
	for key, v := range map[string]float64{"transcript.low_confidence": c.Transcript.LowConfidence,
		"transcript.mean_confidence_min": c.Transcript.MeanConfidenceMin} {
		if v < 0 || v > 1 || math.IsNaN(v) {
			add("scoring.%s: must be within 0..1, got %v", key, v)
		}
	}
	l := c.Latency
	for _, p := range []struct {
		name      string
		good, bad float64
	}{{"e2e", l.E2EGoodMs, l.E2EBadMs}, {"ttft", l.TTFTGoodMs, l.TTFTBadMs}, {"ttfb", l.TTFBGoodMs, l.TTFBBadMs}, {"stt_delay",
		l.STTDelayGoodMs, l.STTDelayBadMs}} {
		nonneg("latency."+p.name+"_good_ms", p.good)
		if !(p.bad > p.good) {
			add("scoring.latency.%s_bad_ms: must be above %s_good_ms (%v), got %v", p.name, p.name, p.good, p.bad)
		}
	}
	return errors.Join(errs...)
}

// Version returns the scoring version: the model version plus a hash of the
// config, because a changed weight or threshold can change a score.
func (c Config) Version() string {
	b, _ := json.Marshal(c) // struct fields marshal in a fixed order
	h := fnv.New32a()
	_, _ = h.Write(b)
	return fmt.Sprintf("%s+c%08x", ModelVersion, h.Sum32())
}
