package scoring

import "fmt"

// Finding codes from the stereo recording (heard turn-taking, docs/audio.md).
const (
	CodeHeardTalkOver         = "heard_talk_over"
	CodeHeardSilence          = "heard_awkward_silence"
	CodeHeardSlowYield        = "heard_slow_yield"
	CodeHeardSlowResponse     = "heard_slow_response"
	CodeHeardLatencyDisagrees = "heard_latency_disagrees"
	CodeAudioNotMeasured      = "audio_not_measured"
)

// AudioConfig holds the thresholds of the heard findings.
type AudioConfig struct {
	// HeardLatencyMs: a heard answer slower than this is a finding.
	HeardLatencyMs float64 `yaml:"heard_latency_ms" json:"heard_latency_ms"`
	// YieldMs: an agent that keeps talking this long after a barge-in.
	YieldMs float64 `yaml:"yield_ms" json:"yield_ms"`
	// DisagreementMs: heard p50 latency this much above the agent's own
	// e2e p50 points at playout or network trouble.
	DisagreementMs float64 `yaml:"disagreement_ms" json:"disagreement_ms"`
	// AwkwardSilenceMs: a silence with nobody speaking longer than this
	// (the audio measurement uses it, so it is part of the scoring version).
	AwkwardSilenceMs float64 `yaml:"awkward_silence_ms" json:"awkward_silence_ms"`
}

// audioTurnFindings are the heard findings of turn handling.
func audioTurnFindings(au *Audio, cfg Config) []Finding {
	if au == nil {
		return nil
	}
	if au.Refused != "" {
		return []Finding{{Code: CodeAudioNotMeasured, Severity: Info,
			Message: fmt.Sprintf("the recording could not be measured (%s): %s", au.Refused, au.Reason)}}
	}
	var out []Finding
	over := budget{per: 5, cap: 20}
	yield := budget{per: 5, cap: 15}
	for i, t := range au.Turns {
		if float64(-t.HeardLatencyMs) > cfg.Turns.OverlapMs {
			out = append(out, Finding{Code: CodeHeardTalkOver, Severity: Warning, Turn: some(i), Value: some(float64(t.HeardLatencyMs)),
				Threshold: some(-cfg.Turns.OverlapMs), Deduction: over.take(),
				Message: fmt.Sprintf("heard turn %d: the agent started %d ms before the user stopped (at %d ms)", i, -t.HeardLatencyMs, t.UserEndMs)})
		}
		if t.BargeIn && float64(t.YieldMs) > cfg.Audio.YieldMs {
			out = append(out, Finding{Code: CodeHeardSlowYield, Severity: Warning, Turn: some(i), Value: some(float64(t.YieldMs)),
				Threshold: some(cfg.Audio.YieldMs), Deduction: yield.take(),
				Message: fmt.Sprintf("heard turn %d: the agent kept talking %d ms after the user barged in", i, t.YieldMs)})
		}
	}
	silence := budget{per: 3, cap: 15}
	for _, g := range au.Silences {
		f := Finding{Code: CodeHeardSilence, Severity: Warning, Value: some(float64(g.EndMs - g.StartMs)),
			Threshold: some(cfg.Audio.AwkwardSilenceMs), Deduction: silence.take(),
			Message: fmt.Sprintf("%d ms with nobody speaking, from %d ms", g.EndMs-g.StartMs, g.StartMs)}
		// The turn it belongs to: the one waiting for the agent's answer.
		for i, t := range au.Turns {
			if g.StartMs >= t.UserEndMs && g.EndMs <= t.AgentStartMs {
				f.Turn = some(i)
				f.Message = fmt.Sprintf("heard turn %d: %s", i, f.Message)
			}
		}
		out = append(out, f)
	}
	return out
}

// audioLatencyFindings are the heard findings of response latency.
func audioLatencyFindings(au *Audio, a *analysis, cfg Config) []Finding {
	if au == nil || au.Refused != "" {
		return nil
	}
	var out []Finding
	slow := budget{per: 2, cap: 20}
	for i, t := range au.Turns {
		if float64(t.HeardLatencyMs) > cfg.Audio.HeardLatencyMs {
			out = append(out, Finding{Code: CodeHeardSlowResponse, Severity: Warning, Turn: some(i), Value: some(float64(t.HeardLatencyMs)),
				Threshold: some(cfg.Audio.HeardLatencyMs), Deduction: slow.take(),
				Message: fmt.Sprintf("heard turn %d: the caller waited %d ms after they stopped (at %d ms)", i, t.HeardLatencyMs, t.UserEndMs)})
		}
	}
	if p50 := a.e2e.stat(50); p50.Set && len(au.Turns) > 0 {
		if gap := float64(au.Metrics.HeardLatencyP50Ms) - p50.V; gap > cfg.Audio.DisagreementMs {
			out = append(out, Finding{Code: CodeHeardLatencyDisagrees, Severity: Warning, Value: some(float64(au.Metrics.HeardLatencyP50Ms)),
				Threshold: some(p50.V + cfg.Audio.DisagreementMs),
				Message: fmt.Sprintf("the caller heard a median answer time of %d ms; the agent's own e2e_latency says %s ms: "+
					"playout or the network adds time the agent cannot see", au.Metrics.HeardLatencyP50Ms, num(p50.V))})
		}
	}
	return out
}
