package session

// The scorecard's inner blocks, for Scorecard.AppendJSON.

func (e *cardEncoder) metrics(m *Metrics) {
	ints := func(key string, v int) {
		e.raw(key)
		e.int(int64(v))
	}
	opt := func(key string, v Opt[float64]) {
		e.raw(key)
		e.optFloat(v)
	}
	e.raw(`{"duration_s":`)
	e.float(m.DurationS)
	ints(`,"user_turns":`, m.UserTurns)
	ints(`,"agent_turns":`, m.AgentTurns)
	ints(`,"unanswered_turns":`, m.UnansweredTurns)
	ints(`,"interruptions":`, m.Interruptions)
	e.raw(`,"interruptions_per_min":`)
	e.float(m.InterruptionsPerMin)
	ints(`,"eot_misprediction_count":`, m.EOTMispredictionCount)
	ints(`,"awkward_silence_count":`, m.AwkwardSilenceCount)
	ints(`,"handoff_count":`, m.HandoffCount)
	opt(`,"e2e_latency_ms":`, m.E2ELatencyMs)
	opt(`,"e2e_latency_p50_ms":`, m.E2ELatencyP50Ms)
	opt(`,"e2e_latency_p95_ms":`, m.E2ELatencyP95Ms)
	opt(`,"e2e_latency_p99_ms":`, m.E2ELatencyP99Ms)
	opt(`,"e2e_latency_max_ms":`, m.E2ELatencyMaxMs)
	ints(`,"e2e_latency_over_threshold":`, m.E2ELatencyOver)
	ints(`,"e2e_latency_missing":`, m.E2ELatencyMissing)
	opt(`,"ttft_ms":`, m.TTFTMs)
	opt(`,"ttft_p50_ms":`, m.TTFTP50Ms)
	opt(`,"ttft_p95_ms":`, m.TTFTP95Ms)
	opt(`,"ttft_p99_ms":`, m.TTFTP99Ms)
	opt(`,"ttft_max_ms":`, m.TTFTMaxMs)
	opt(`,"ttfb_ms":`, m.TTFBMs)
	opt(`,"ttfb_p50_ms":`, m.TTFBP50Ms)
	opt(`,"ttfb_p95_ms":`, m.TTFBP95Ms)
	opt(`,"ttfb_p99_ms":`, m.TTFBP99Ms)
	opt(`,"ttfb_max_ms":`, m.TTFBMaxMs)
	opt(`,"stt_delay_ms":`, m.STTDelayMs)
	opt(`,"stt_delay_p50_ms":`, m.STTDelayP50Ms)
	opt(`,"stt_delay_p95_ms":`, m.STTDelayP95Ms)
	opt(`,"stt_delay_p99_ms":`, m.STTDelayP99Ms)
	opt(`,"stt_delay_max_ms":`, m.STTDelayMaxMs)
	opt(`,"end_of_turn_delay_p50_ms":`, m.EndOfTurnDelayP50Ms)
	opt(`,"end_of_turn_delay_p95_ms":`, m.EndOfTurnDelayP95Ms)
	opt(`,"end_of_turn_delay_p99_ms":`, m.EndOfTurnDelayP99Ms)
	opt(`,"end_of_turn_delay_max_ms":`, m.EndOfTurnDelayMaxMs)
	ints(`,"end_of_turn_delay_over_threshold":`, m.EndOfTurnDelayOver)
	opt(`,"transcript_confidence_mean":`, m.TranscriptConfidenceMean)
	opt(`,"transcript_confidence_min":`, m.TranscriptConfidenceMin)
	ints(`,"low_confidence_count":`, m.LowConfidenceCount)
	ints(`,"tool_calls":`, m.ToolCalls)
	ints(`,"tool_errors":`, m.ToolErrors)
	ints(`,"tool_calls_without_output":`, m.ToolCallsWithoutOutput)
	e.b = append(e.b, '}')
}

func (e *cardEncoder) spans(s *SpanMetrics) {
	e.raw(`{"agent_turns":`)
	e.int(int64(s.AgentTurns))
	e.raw(`,"user_turns":`)
	e.int(int64(s.UserTurns))
	e.raw(`,"tool_calls":`)
	e.int(int64(s.ToolCalls))
	e.raw(`,"tool_errors":`)
	e.int(int64(s.ToolErrors))
	e.raw(`,"provider_errors":`)
	e.int(int64(s.ProviderErrors))
	e.raw(`,"e2e_latency_p50_ms":`)
	e.optFloat(s.E2ELatencyP50)
	e.raw(`,"e2e_latency_p95_ms":`)
	e.optFloat(s.E2ELatencyP95)
	e.raw(`,"ttft_p50_ms":`)
	e.optFloat(s.TTFTP50Ms)
	e.raw(`,"ttft_p95_ms":`)
	e.optFloat(s.TTFTP95Ms)
	e.raw(`,"ttfb_p50_ms":`)
	e.optFloat(s.TTFBP50Ms)
	e.raw(`,"ttfb_p95_ms":`)
	e.optFloat(s.TTFBP95Ms)
	e.b = append(e.b, '}')
}

func (e *cardEncoder) audio(a *Audio) {
	first := true
	e.b = append(e.b, '{')
	e.optStr(&first, "refused", a.Refused)
	e.optStr(&first, "reason", a.Reason)
	e.segments(&first, "user_segments", a.UserSegments)
	e.segments(&first, "agent_segments", a.AgentSegments)
	e.segments(&first, "awkward_silences", a.Silences)
	if len(a.Turns) > 0 {
		e.field(&first, "turns")
		array(e, a.Turns, func(t *AudioTurn) {
			e.raw(`{"user_start_ms":`)
			e.int(t.UserStartMs)
			e.raw(`,"user_end_ms":`)
			e.int(t.UserEndMs)
			e.raw(`,"agent_start_ms":`)
			e.int(t.AgentStartMs)
			e.raw(`,"heard_latency_ms":`)
			e.int(t.HeardLatencyMs)
			if t.BargeIn {
				e.raw(`,"barge_in":true`)
			}
			if t.YieldMs != 0 {
				e.raw(`,"yield_ms":`)
				e.int(t.YieldMs)
			}
			e.b = append(e.b, '}')
		})
	}
	e.field(&first, "metrics")
	m := &a.Metrics
	e.raw(`{"heard_latency_p50_ms":`)
	e.int(m.HeardLatencyP50Ms)
	e.raw(`,"heard_latency_p95_ms":`)
	e.int(m.HeardLatencyP95Ms)
	e.raw(`,"heard_latency_p99_ms":`)
	e.int(m.HeardLatencyP99Ms)
	e.raw(`,"talk_over_count":`)
	e.int(int64(m.TalkOverCount))
	e.raw(`,"barge_in_count":`)
	e.int(int64(m.BargeInCount))
	e.raw(`,"time_to_yield_p50_ms":`)
	e.int(m.YieldP50Ms)
	e.raw(`,"awkward_silence_count":`)
	e.int(int64(m.AwkwardSilenceCount))
	e.raw(`,"backchannel_count":`)
	e.int(int64(m.BackchannelCount))
	e.raw(`,"overlap_ratio":`)
	e.float(m.OverlapRatio)
	e.raw(`,"user_speech_share":`)
	e.float(m.UserSpeechShare)
	e.raw(`,"agent_speech_share":`)
	e.float(m.AgentSpeechShare)
	e.raw(`,"channel_separation_db":`)
	e.float(m.SeparationDB)
	if m.UserSNRDB != 0 {
		e.raw(`,"user_snr_db":`)
		e.float(m.UserSNRDB)
	}
	e.raw(`}}`)
}

// segments writes an omitempty list of audio segments.
func (e *cardEncoder) segments(first *bool, key string, segs []AudioSegment) {
	if len(segs) == 0 {
		return
	}
	e.field(first, key)
	array(e, segs, func(s *AudioSegment) {
		e.raw(`{"start_ms":`)
		e.int(s.StartMs)
		e.raw(`,"end_ms":`)
		e.int(s.EndMs)
		e.b = append(e.b, '}')
	})
}

func (e *cardEncoder) rules(rs []RuleResult) {
	array(e, rs, func(r *RuleResult) {
		e.raw(`{"name":`)
		e.str(r.Name)
		e.raw(`,"severity":`)
		e.str(r.Severity)
		e.raw(`,"status":`)
		e.str(r.Status)
		first := false
		e.optStr(&first, "component", r.Component)
		e.raw(`,"deduction":`)
		e.float(r.Deduction)
		e.raw(`,"values":`)
		array(e, r.Values, func(v *RuleValue) {
			e.raw(`{"name":`)
			e.str(v.Name)
			e.raw(`,"value":`)
			e.str(v.Value)
			e.b = append(e.b, '}')
		})
		e.optStr(&first, "error", r.Error)
		e.b = append(e.b, '}')
	})
}

func (e *cardEncoder) usage(u *Usage) {
	e.raw(`{"reported":`)
	e.bool(u.Reported)
	if len(u.Models) > 0 {
		e.raw(`,"models":`)
		array(e, u.Models, e.modelUsage)
	}
	first := false
	e.optIntField(&first, "input_tokens", u.InputTokens)
	e.optIntField(&first, "output_tokens", u.OutputTokens)
	e.optIntField(&first, "tts_characters", u.TTSCharacters)
	e.optFloatField(&first, "stt_audio_s", u.STTAudioS)
	e.optFloatField(&first, "tokens_per_user_turn", u.TokensPerUserTurn)
	e.b = append(e.b, '}')
}

func (e *cardEncoder) modelUsage(m *ModelUsage) {
	e.raw(`{"type":`)
	e.str(m.Type)
	e.raw(`,"provider":`)
	e.str(m.Provider)
	e.raw(`,"model":`)
	e.str(m.Model)
	first := false
	e.optIntField(&first, "input_tokens", m.InputTokens)
	e.optIntField(&first, "input_cached_tokens", m.InputCachedTokens)
	e.optIntField(&first, "input_audio_tokens", m.InputAudioTokens)
	e.optIntField(&first, "input_cached_audio_tokens", m.InputCachedAudioTokens)
	e.optIntField(&first, "input_text_tokens", m.InputTextTokens)
	e.optIntField(&first, "input_cached_text_tokens", m.InputCachedTextTokens)
	e.optIntField(&first, "input_image_tokens", m.InputImageTokens)
	e.optIntField(&first, "input_cached_image_tokens", m.InputCachedImageTokens)
	e.optIntField(&first, "output_tokens", m.OutputTokens)
	e.optIntField(&first, "output_audio_tokens", m.OutputAudioTokens)
	e.optIntField(&first, "output_text_tokens", m.OutputTextTokens)
	e.optIntField(&first, "characters_count", m.CharactersCount)
	e.optFloatField(&first, "audio_duration_s", m.AudioDurationS)
	e.optFloatField(&first, "session_duration_s", m.SessionDurationS)
	e.optIntField(&first, "total_requests", m.TotalRequests)
	e.b = append(e.b, '}')
}

// optIntField and optFloatField write an omitzero Opt field.
func (e *cardEncoder) optIntField(first *bool, key string, o Opt[int]) {
	if o.Set {
		e.field(first, key)
		e.int(int64(o.V))
	}
}

func (e *cardEncoder) optFloatField(first *bool, key string, o Opt[float64]) {
	if o.Set {
		e.field(first, key)
		e.float(o.V)
	}
}

func (e *cardEncoder) cost(c *Cost) {
	e.raw(`{"currency":`)
	e.str(c.Currency)
	e.raw(`,"total":`)
	e.float(c.Total)
	first := false
	e.optFloatField(&first, "per_minute", c.PerMinute)
	e.raw(`,"rows":`)
	array(e, c.Rows, func(r *CostRow) {
		e.raw(`{"provider":`)
		e.str(r.Provider)
		e.raw(`,"model":`)
		e.str(r.Model)
		e.optStr(&first, "effective", r.Effective)
		e.raw(`,"amount":`)
		e.float(r.Amount)
		e.b = append(e.b, '}')
	})
	if len(c.Unpriced) > 0 {
		e.raw(`,"unpriced":`)
		e.strs(c.Unpriced)
	}
	e.b = append(e.b, '}')
}
