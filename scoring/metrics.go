package scoring

import "math"

func (a *analysis) metrics(cfg Config) Metrics {
	items := a.s.Items
	m := Metrics{DurationS: round(a.duration), UserTurns: len(a.users), AgentTurns: len(a.agents)}
	for _, i := range a.users {
		if !a.answered[i] {
			m.UnansweredTurns++
		}
	}
	for _, i := range a.agents {
		it := &items[i]
		if it.Interrupted {
			m.Interruptions++
		}
		if u := a.prevUser[i]; u >= 0 && it.StartedSpeakingAt != nil && items[u].StoppedSpeakingAt != nil {
			gap := ms(*it.StartedSpeakingAt - *items[u].StoppedSpeakingAt)
			if -gap > cfg.Turns.OverlapMs {
				m.EOTMispredictionCount++
			} else if gap > cfg.Turns.LongSilenceMs {
				m.AwkwardSilenceCount++
			}
		}
	}
	m.InterruptionsPerMin = round(perMinute(m.Interruptions, a.duration))

	e2e := a.e2e
	m.E2ELatencyMs, m.E2ELatencyP50Ms, m.E2ELatencyP95Ms, m.E2ELatencyP99Ms, m.E2ELatencyMaxMs = e2e.mean(), e2e.stat(50), e2e.stat(95),
		e2e.stat(99), e2e.stat(100)
	m.E2ELatencyOver = e2e.over(cfg.Latency.E2ETurnMs)
	for _, i := range a.agents {
		if items[i].E2ELatency == nil && a.prevUser[i] >= 0 {
			m.E2ELatencyMissing++
		}
	}
	ttft := a.ttft
	m.TTFTMs, m.TTFTP50Ms, m.TTFTP95Ms, m.TTFTP99Ms, m.TTFTMaxMs = ttft.mean(), ttft.stat(50), ttft.stat(95), ttft.stat(99), ttft.stat(100)
	ttfb := a.ttfb
	m.TTFBMs, m.TTFBP50Ms, m.TTFBP95Ms, m.TTFBP99Ms, m.TTFBMaxMs = ttfb.mean(), ttfb.stat(50), ttfb.stat(95), ttfb.stat(99), ttfb.stat(100)
	stt := a.stt
	m.STTDelayMs, m.STTDelayP50Ms, m.STTDelayP95Ms, m.STTDelayP99Ms, m.STTDelayMaxMs = stt.mean(), stt.stat(50), stt.stat(95), stt.stat(99),
		stt.stat(100)
	eot := a.eot
	m.EndOfTurnDelayP50Ms, m.EndOfTurnDelayP95Ms, m.EndOfTurnDelayP99Ms, m.EndOfTurnDelayMaxMs = eot.stat(50), eot.stat(95), eot.stat(99),
		eot.stat(100)
	m.EndOfTurnDelayOver = eot.over(cfg.Turns.EndOfTurnDelayMs)

	var confSum float64
	confMin := math.Inf(1)
	var confN int
	for _, i := range a.users {
		if c := items[i].TranscriptConfidence; c != nil {
			confSum, confN, confMin = confSum+*c, confN+1, math.Min(confMin, *c)
			if *c < cfg.Transcript.LowConfidence {
				m.LowConfidenceCount++
			}
		}
	}
	if confN > 0 {
		m.TranscriptConfidenceMean, m.TranscriptConfidenceMin = some(round(confSum/float64(confN))), some(round(confMin))
	}

	for i := range items {
		it := &items[i]
		switch it.Type {
		case TypeFunctionCallOutput:
			if it.IsError {
				m.ToolErrors++
			}
		case TypeAgentHandoff:
			m.HandoffCount++
		case TypeFunctionCall:
			m.ToolCalls++
			if c := a.tools[it.CallID]; c.output < 0 && int(c.call) == i {
				m.ToolCallsWithoutOutput++
			}
		}
	}
	return m
}
