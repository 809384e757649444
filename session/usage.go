package session

// Usage kinds, as the agents SDKs' session report types them.
const (
	UsageLLM          = "llm_usage"
	UsageTTS          = "tts_usage"
	UsageSTT          = "stt_usage"
	UsageInterruption = "interruption_usage"
	UsageEOT          = "eot_usage"
)

// ModelUsage is one provider and model's usage in a session, as the
// agents SDK's session report lists it (the OTLP log "session report",
// attribute usage; livekit-agents metrics/usage.py, agents-js
// metrics/model_usage.ts). Both SDKs leave zero counts out, so a count the
// report did not send is absent here, never 0. Names are the Python SDK's;
// agents-js's camelCase names map onto them, and its millisecond durations
// become seconds (audioDurationMs → audio_duration_s).
type ModelUsage struct {
	Type     string `json:"type"`
	Provider string `json:"provider"`
	Model    string `json:"model"`

	InputTokens            Opt[int] `json:"input_tokens,omitzero"`
	InputCachedTokens      Opt[int] `json:"input_cached_tokens,omitzero"`
	InputAudioTokens       Opt[int] `json:"input_audio_tokens,omitzero"`
	InputCachedAudioTokens Opt[int] `json:"input_cached_audio_tokens,omitzero"`
	InputTextTokens        Opt[int] `json:"input_text_tokens,omitzero"`
	InputCachedTextTokens  Opt[int] `json:"input_cached_text_tokens,omitzero"`
	InputImageTokens       Opt[int] `json:"input_image_tokens,omitzero"`
	InputCachedImageTokens Opt[int] `json:"input_cached_image_tokens,omitzero"`
	OutputTokens           Opt[int] `json:"output_tokens,omitzero"`
	OutputAudioTokens      Opt[int] `json:"output_audio_tokens,omitzero"`
	OutputTextTokens       Opt[int] `json:"output_text_tokens,omitzero"`
	// CharactersCount is text to speech's characters synthesized.
	CharactersCount Opt[int] `json:"characters_count,omitzero"`
	// AudioDurationS is the audio synthesized (TTS) or transcribed (STT).
	AudioDurationS Opt[float64] `json:"audio_duration_s,omitzero"`
	// SessionDurationS is a realtime model's connection time (session-billed).
	SessionDurationS Opt[float64] `json:"session_duration_s,omitzero"`
	// TotalRequests counts interruption or end-of-turn model requests.
	TotalRequests Opt[int] `json:"total_requests,omitzero"`
}

// Usage is what a session's calls to models used: the SDK's report as sent,
// per provider and model, and the call's totals. A session whose SDK sent
// no report is Reported false and nothing else: not reported, never zeros.
type Usage struct {
	Reported bool         `json:"reported"`
	Models   []ModelUsage `json:"models,omitempty"`
	// Totals over the models: LLM input and output tokens, TTS characters,
	// STT audio seconds (set when reported).
	InputTokens   Opt[int]     `json:"input_tokens,omitzero"`
	OutputTokens  Opt[int]     `json:"output_tokens,omitzero"`
	TTSCharacters Opt[int]     `json:"tts_characters,omitzero"`
	STTAudioS     Opt[float64] `json:"stt_audio_s,omitzero"`
	// TokensPerUserTurn is the LLM's input and output tokens per turn of the
	// caller (absent without a user turn).
	TokensPerUserTurn Opt[float64] `json:"tokens_per_user_turn,omitzero"`
}

// UsageOf is a session's usage block: nil when no signal could have said
// (a recording scored alone), Reported false when the SDK sent no report.
func UsageOf(f *Facts, userTurns int) *Usage {
	if f == nil {
		return nil
	}
	if !f.UsageReported {
		return &Usage{}
	}
	u := &Usage{Reported: true, Models: f.Usage}
	var in, out, chars int
	var stt float64
	for _, m := range f.Usage {
		switch m.Type {
		case UsageLLM:
			in += m.InputTokens.V
			out += m.OutputTokens.V
		case UsageTTS:
			chars += m.CharactersCount.V
		case UsageSTT:
			stt += m.AudioDurationS.V
		}
	}
	u.InputTokens, u.OutputTokens = Opt[int]{V: in, Set: true}, Opt[int]{V: out, Set: true}
	u.TTSCharacters, u.STTAudioS = Opt[int]{V: chars, Set: true}, Opt[float64]{V: stt, Set: true}
	if userTurns > 0 {
		u.TokensPerUserTurn = Opt[float64]{V: float64(in+out) / float64(userTurns), Set: true}
	}
	return u
}

// Cost is what a call cost by the team's price table (scoring.pricing):
// each model's usage priced by the row in force at the call's time.
// A model the table has no price for is listed in Unpriced and counts
// nothing: the total then is a floor, never a silent zero.
type Cost struct {
	Currency string `json:"currency"`
	// Total is the call's cost; PerMinute the same per minute of call.
	Total     float64      `json:"total"`
	PerMinute Opt[float64] `json:"per_minute,omitzero"`
	// Rows are the price rows used, one per model priced.
	Rows []CostRow `json:"rows"`
	// Unpriced are the "<provider>/<model>" of models with no price.
	Unpriced []string `json:"unpriced,omitempty"`
}

// CostRow is one model's cost and the price row that made it.
type CostRow struct {
	Provider  string  `json:"provider"`
	Model     string  `json:"model"`
	Effective string  `json:"effective,omitempty"` // the row's date, YYYY-MM-DD
	Amount    float64 `json:"amount"`
}
