package ingest

import (
	"encoding/json"
	"math"
	"strconv"
	"strings"

	common "go.opentelemetry.io/proto/otlp/common/v1"

	"github.com/lkscore/lkscore/consumer/internal/facts"
	"github.com/lkscore/lkscore/session"
)

// maxUsageModels bounds the models one session report's usage lists: a
// session uses a handful (an LLM, a TTS, an STT, turn detection). With the
// bounded names, a report's fact stays under 5 KB.
const maxUsageModels = 8

// usageCounts maps the usage entries' count names, in both SDKs' forms
// (livekit-agents metrics/usage.py snake_case; agents-js
// metrics/model_usage.ts camelCase), to where they land.
var usageCounts = func() map[string]func(*session.ModelUsage) *session.Opt[int] {
	m := map[string]func(*session.ModelUsage) *session.Opt[int]{
		"input_tokens":              func(u *session.ModelUsage) *session.Opt[int] { return &u.InputTokens },
		"input_cached_tokens":       func(u *session.ModelUsage) *session.Opt[int] { return &u.InputCachedTokens },
		"input_audio_tokens":        func(u *session.ModelUsage) *session.Opt[int] { return &u.InputAudioTokens },
		"input_cached_audio_tokens": func(u *session.ModelUsage) *session.Opt[int] { return &u.InputCachedAudioTokens },
		"input_text_tokens":         func(u *session.ModelUsage) *session.Opt[int] { return &u.InputTextTokens },
		"input_cached_text_tokens":  func(u *session.ModelUsage) *session.Opt[int] { return &u.InputCachedTextTokens },
		"input_image_tokens":        func(u *session.ModelUsage) *session.Opt[int] { return &u.InputImageTokens },
		"input_cached_image_tokens": func(u *session.ModelUsage) *session.Opt[int] { return &u.InputCachedImageTokens },
		"output_tokens":             func(u *session.ModelUsage) *session.Opt[int] { return &u.OutputTokens },
		"output_audio_tokens":       func(u *session.ModelUsage) *session.Opt[int] { return &u.OutputAudioTokens },
		"output_text_tokens":        func(u *session.ModelUsage) *session.Opt[int] { return &u.OutputTextTokens },
		"characters_count":          func(u *session.ModelUsage) *session.Opt[int] { return &u.CharactersCount },
		"total_requests":            func(u *session.ModelUsage) *session.Opt[int] { return &u.TotalRequests },
	}
	for k, f := range m {
		m[camel(k)] = f
	}
	return m
}()

// usageDurations are the durations and their units per second: the Python
// SDK sends seconds, agents-js milliseconds (divided, not multiplied by
// 0.001, so 10040 ms is 10.04 s to the last digit).
var usageDurations = map[string]struct {
	of  func(*session.ModelUsage) *session.Opt[float64]
	per float64 // units per second
}{
	"audio_duration":    {func(u *session.ModelUsage) *session.Opt[float64] { return &u.AudioDurationS }, 1},
	"audioDurationMs":   {func(u *session.ModelUsage) *session.Opt[float64] { return &u.AudioDurationS }, 1000},
	"session_duration":  {func(u *session.ModelUsage) *session.Opt[float64] { return &u.SessionDurationS }, 1},
	"sessionDurationMs": {func(u *session.ModelUsage) *session.Opt[float64] { return &u.SessionDurationS }, 1000},
}

func camel(snake string) string {
	parts := strings.Split(snake, "_")
	for i := 1; i < len(parts); i++ {
		parts[i] = strings.ToUpper(parts[i][:1]) + parts[i][1:]
	}
	return strings.Join(parts, "")
}

// usageOf reads a session report's usage attribute: an array of key-value
// lists, one per provider and model. ok is false when the attribute is not
// such an array (the SDK sent none: null, or an older SDK).
func usageOf(v *common.AnyValue) (out []session.ModelUsage, ok bool) {
	arr := v.GetArrayValue()
	if arr == nil {
		return nil, false
	}
	out = []session.ModelUsage{}
	for _, e := range arr.GetValues() {
		kvs := e.GetKvlistValue()
		if kvs == nil || len(out) >= maxUsageModels {
			continue
		}
		u := session.ModelUsage{}
		for _, kv := range kvs.GetValues() {
			key, val := kv.GetKey(), kv.GetValue()
			switch key {
			case "type":
				u.Type = facts.Bounded(anyString(val), 32)
			case "provider":
				u.Provider = facts.Bounded(anyString(val), 64)
			case "model":
				u.Model = facts.Bounded(anyString(val), 128)
			default:
				n, isNum := number(val)
				if !isNum || n < 0 {
					continue
				}
				if f, ok := usageCounts[key]; ok && n <= math.MaxInt32*1024.0 {
					*f(&u) = session.Opt[int]{V: int(n), Set: true}
				} else if d, ok := usageDurations[key]; ok {
					*d.of(&u) = session.Opt[float64]{V: n / d.per, Set: true}
				}
			}
		}
		if u.Type != "" {
			out = append(out, u)
		}
	}
	return out, true
}

// number reads an OTLP value as a number: an int, a double, or a string
// holding one (OTLP/JSON sends 64-bit ints as strings).
func number(v *common.AnyValue) (float64, bool) {
	switch x := v.GetValue().(type) {
	case *common.AnyValue_IntValue:
		return float64(x.IntValue), true
	case *common.AnyValue_DoubleValue:
		return x.DoubleValue, !math.IsNaN(x.DoubleValue) && !math.IsInf(x.DoubleValue, 0)
	case *common.AnyValue_StringValue:
		f, err := strconv.ParseFloat(x.StringValue, 64)
		return f, err == nil && !math.IsNaN(f) && !math.IsInf(f, 0)
	}
	return 0, false
}

// usageObservation is a report's usage as one fact.
func usageObservation(models []session.ModelUsage) facts.Observation {
	b, _ := json.Marshal(models) // plain strings and numbers: cannot fail
	return facts.Observation{Field: facts.FieldUsage, Value: string(b), Source: facts.SourceOTLP, Evidence: "session report usage"}
}
