package session

// Metrics are the measured numbers, named and in the units of LiveKit's
// JobMetrics (livekit_agent_simulation.proto) where they overlap, so the
// two can be put side by side. Latencies are milliseconds; null means not
// measured (no turn reported it).
type Metrics struct {
	DurationS             float64 `json:"duration_s"`
	UserTurns             int     `json:"user_turns"`
	AgentTurns            int     `json:"agent_turns"`
	UnansweredTurns       int     `json:"unanswered_turns"` // JobMetrics.Conversation.unanswered_turns
	Interruptions         int     `json:"interruptions"`    // agent replies the user interrupted
	InterruptionsPerMin   float64 `json:"interruptions_per_min"`
	EOTMispredictionCount int     `json:"eot_misprediction_count"` // JobMetrics: agent started before the user's turn ended
	AwkwardSilenceCount   int     `json:"awkward_silence_count"`   // JobMetrics: gaps past the long-silence threshold
	HandoffCount          int     `json:"handoff_count"`

	E2ELatencyMs      Opt[float64] `json:"e2e_latency_ms"` // mean; JobMetrics.Conversation.e2e_latency_ms
	E2ELatencyP50Ms   Opt[float64] `json:"e2e_latency_p50_ms"`
	E2ELatencyP95Ms   Opt[float64] `json:"e2e_latency_p95_ms"`
	E2ELatencyP99Ms   Opt[float64] `json:"e2e_latency_p99_ms"`
	E2ELatencyMaxMs   Opt[float64] `json:"e2e_latency_max_ms"`
	E2ELatencyOver    int          `json:"e2e_latency_over_threshold"`
	E2ELatencyMissing int          `json:"e2e_latency_missing"`

	TTFTMs    Opt[float64] `json:"ttft_ms"` // mean; JobMetrics.LLM.ttft_ms
	TTFTP50Ms Opt[float64] `json:"ttft_p50_ms"`
	TTFTP95Ms Opt[float64] `json:"ttft_p95_ms"`
	TTFTP99Ms Opt[float64] `json:"ttft_p99_ms"`
	TTFTMaxMs Opt[float64] `json:"ttft_max_ms"`

	TTFBMs    Opt[float64] `json:"ttfb_ms"` // mean; JobMetrics.TTS.ttfb_ms
	TTFBP50Ms Opt[float64] `json:"ttfb_p50_ms"`
	TTFBP95Ms Opt[float64] `json:"ttfb_p95_ms"`
	TTFBP99Ms Opt[float64] `json:"ttfb_p99_ms"`
	TTFBMaxMs Opt[float64] `json:"ttfb_max_ms"`

	STTDelayMs    Opt[float64] `json:"stt_delay_ms"` // mean transcription_delay; JobMetrics.STT.stt_delay_ms
	STTDelayP50Ms Opt[float64] `json:"stt_delay_p50_ms"`
	STTDelayP95Ms Opt[float64] `json:"stt_delay_p95_ms"`
	STTDelayP99Ms Opt[float64] `json:"stt_delay_p99_ms"`
	STTDelayMaxMs Opt[float64] `json:"stt_delay_max_ms"`

	EndOfTurnDelayP50Ms Opt[float64] `json:"end_of_turn_delay_p50_ms"`
	EndOfTurnDelayP95Ms Opt[float64] `json:"end_of_turn_delay_p95_ms"`
	EndOfTurnDelayP99Ms Opt[float64] `json:"end_of_turn_delay_p99_ms"`
	EndOfTurnDelayMaxMs Opt[float64] `json:"end_of_turn_delay_max_ms"`
	EndOfTurnDelayOver  int          `json:"end_of_turn_delay_over_threshold"`

	TranscriptConfidenceMean Opt[float64] `json:"transcript_confidence_mean"`
	TranscriptConfidenceMin  Opt[float64] `json:"transcript_confidence_min"`
	LowConfidenceCount       int          `json:"low_confidence_count"`

	ToolCalls              int `json:"tool_calls"`
	ToolErrors             int `json:"tool_errors"`
	ToolCallsWithoutOutput int `json:"tool_calls_without_output"`
}

// Scorecard inputs.
const (
	InputRecording = "recording"
	InputTraces    = "traces"
	InputLogs      = "logs"
)

// SpanMetrics are the latency breakdown and errors the spans report
// (milliseconds), beside the chat history's.
type SpanMetrics struct {
	AgentTurns     int          `json:"agent_turns"`
	UserTurns      int          `json:"user_turns"`
	ToolCalls      int          `json:"tool_calls"`
	ToolErrors     int          `json:"tool_errors"`
	ProviderErrors int          `json:"provider_errors"`
	E2ELatencyP50  Opt[float64] `json:"e2e_latency_p50_ms"`
	E2ELatencyP95  Opt[float64] `json:"e2e_latency_p95_ms"`
	TTFTP50Ms      Opt[float64] `json:"ttft_p50_ms"`
	TTFTP95Ms      Opt[float64] `json:"ttft_p95_ms"`
	TTFBP50Ms      Opt[float64] `json:"ttfb_p50_ms"`
	TTFBP95Ms      Opt[float64] `json:"ttfb_p95_ms"`
}

// Audio is what was measured in the session's stereo recording (package
// audio), or why it could not be. Nil when the session has no recording.
type Audio struct {
	Refused string `json:"refused,omitempty"`
	Reason  string `json:"reason,omitempty"`
	// Speech per channel, in ms from the start of the recording.
	UserSegments  []AudioSegment `json:"user_segments,omitempty"`
	AgentSegments []AudioSegment `json:"agent_segments,omitempty"`
	// Silences are the awkward silences heard (nobody speaking).
	Silences []AudioSegment `json:"awkward_silences,omitempty"`
	// Turns are the heard turns, in order.
	Turns   []AudioTurn  `json:"turns,omitempty"`
	Metrics AudioMetrics `json:"metrics"`
}

// AudioSegment is speech on one channel.
type AudioSegment struct {
	StartMs int64 `json:"start_ms"`
	EndMs   int64 `json:"end_ms"`
}

// AudioTurn is one heard turn: a user utterance and the agent's answer as
// the caller heard it. HeardLatencyMs is AgentStartMs − UserEndMs, negative
// when the agent talked over the user; YieldMs, for a barge-in (the user
// started while the agent spoke), is how long the agent kept talking.
type AudioTurn struct {
	UserStartMs    int64 `json:"user_start_ms"`
	UserEndMs      int64 `json:"user_end_ms"`
	AgentStartMs   int64 `json:"agent_start_ms"`
	HeardLatencyMs int64 `json:"heard_latency_ms"`
	BargeIn        bool  `json:"barge_in,omitempty"`
	YieldMs        int64 `json:"yield_ms,omitempty"`
}

// AudioMetrics summarize the heard call (named as LiveKit's conversation
// metrics where they exist).
type AudioMetrics struct {
	HeardLatencyP50Ms   int64   `json:"heard_latency_p50_ms"`
	HeardLatencyP95Ms   int64   `json:"heard_latency_p95_ms"`
	HeardLatencyP99Ms   int64   `json:"heard_latency_p99_ms"`
	TalkOverCount       int     `json:"talk_over_count"`
	BargeInCount        int     `json:"barge_in_count"`
	YieldP50Ms          int64   `json:"time_to_yield_p50_ms"`
	AwkwardSilenceCount int     `json:"awkward_silence_count"`
	BackchannelCount    int     `json:"backchannel_count"`
	OverlapRatio        float64 `json:"overlap_ratio"`
	UserSpeechShare     float64 `json:"user_speech_share"`
	AgentSpeechShare    float64 `json:"agent_speech_share"`
	SeparationDB        float64 `json:"channel_separation_db"`
	UserSNRDB           float64 `json:"user_snr_db,omitempty"`
}
