package ingest

import (
	"encoding/hex"
	"strings"

	common "go.opentelemetry.io/proto/otlp/common/v1"
	trace "go.opentelemetry.io/proto/otlp/trace/v1"

	"github.com/lkscore/lkscore/consumer/internal/facts"
	"github.com/lkscore/lkscore/scoring"
)

// Span facts: the voice pipeline's spans both SDKs export (agents-js
// telemetry/trace_types.ts, livekit/agents telemetry/trace_types.py), kept
// per session in its facts entry as scoring.Span values, so a session that
// uploads no recording is scored from them. docs/formats.md, "Spans", has
// the mapping and the units.

// keptSpans are the span names kept; any other span is kept only when it
// ended with an error (a provider's request, an STT stream…).
var keptSpans = map[string]bool{
	scoring.SpanAgentSession: true, scoring.SpanAgentTurn: true, scoring.SpanUserTurn: true,
	scoring.SpanFunctionTool: true, scoring.SpanLLMNode: true, scoring.SpanTTSNode: true,
}

// Span attributes read (the SDKs' trace_types constants).
const (
	attrE2ELatency         = "lk.e2e_latency"           // seconds, agent_turn
	attrInterrupted        = "lk.interrupted"           // agent_turn
	attrTTFT               = "lk.response.ttft"         // seconds, llm_node
	attrTTFB               = "lk.response.ttfb"         // seconds, tts_node
	attrConfidence         = "lk.transcript_confidence" // user_turn
	attrTranscriptionDelay = "lk.transcription_delay"   // user_turn: ms in agents-js, s in agents-py
	attrEndOfTurnDelay     = "lk.end_of_turn_delay"     // user_turn: ms in agents-js, s in agents-py
	attrToolName           = "lk.function_tool.name"
	attrToolIsError        = "lk.function_tool.is_error"
	attrErrorType          = "error.type"
)

// spanOf reads one span, or reports false for a span lkscore does not keep.
// lang is the resource's telemetry.sdk.language: agents-js measures the
// user turn's delays with Date.now() differences, in milliseconds.
func spanOf(sp *trace.Span, lang string) (scoring.Span, bool) {
	failed := sp.GetStatus().GetCode() == trace.Status_STATUS_CODE_ERROR
	if !keptSpans[sp.GetName()] && !failed {
		return scoring.Span{}, false
	}
	if n := len(sp.GetSpanId()); n == 0 || n > 16 { // OTLP span ids are 8 bytes
		return scoring.Span{}, false
	}
	parent := sp.GetParentSpanId()
	if len(parent) > 16 {
		parent = nil
	}
	a := attrs{sp.GetAttributes()}
	s := scoring.Span{
		ID: hex.EncodeToString(sp.GetSpanId()), Parent: hex.EncodeToString(parent),
		Name: facts.Bounded(sp.GetName(), 64), Start: float64(sp.GetStartTimeUnixNano()) / 1e9, End: float64(sp.GetEndTimeUnixNano()) / 1e9,
		E2ELatency: a.num(attrE2ELatency), TTFT: a.num(attrTTFT), TTFB: a.num(attrTTFB),
		TranscriptConfidence: a.num(attrConfidence),
		TranscriptionDelay:   a.num(attrTranscriptionDelay), EndOfTurnDelay: a.num(attrEndOfTurnDelay),
		Interrupted: a.boolean(attrInterrupted),
	}
	if lang == "nodejs" {
		for _, p := range []**float64{&s.TranscriptionDelay, &s.EndOfTurnDelay} {
			if *p != nil {
				v := **p / 1000
				*p = &v
			}
		}
	}
	if s.Name == scoring.SpanFunctionTool {
		s.Tool = facts.Bounded(a.str(attrToolName), 64)
		s.ToolError = a.boolean(attrToolIsError)
	}
	if failed {
		s.Error = cmpOr(facts.Bounded(sp.GetStatus().GetMessage(), 160), facts.Bounded(a.str(attrErrorType), 64), "error")
	} else if t := a.str(attrErrorType); t != "" && s.Name != scoring.SpanFunctionTool {
		s.Error = facts.Bounded(t, 64)
	}
	return s, true
}

func cmpOr(vals ...string) string {
	for _, v := range vals {
		if v != "" {
			return v
		}
	}
	return ""
}

// num reads a numeric attribute (double or int), nil when absent or not a number.
func (a attrs) num(key string) *float64 {
	v, ok := a.get(key)
	if !ok {
		return nil
	}
	var f float64
	switch x := v.GetValue().(type) {
	case *common.AnyValue_DoubleValue:
		f = x.DoubleValue
	case *common.AnyValue_IntValue:
		f = float64(x.IntValue)
	default:
		return nil
	}
	return &f
}

func (a attrs) boolean(key string) bool {
	v, ok := a.get(key)
	if !ok {
		return false
	}
	if b, isBool := v.GetValue().(*common.AnyValue_BoolValue); isBool {
		return b.BoolValue
	}
	return strings.EqualFold(anyString(v), "true")
}

// recordingOptions reads the session report's recording options
// (session.options: agents-js recordingOptions, agents-py
// recording_options) and says whether a recording upload will follow:
// the SDKs upload one only with the transcript or the audio on.
func recordingOptions(a attrs) (expected, known bool) {
	v, ok := a.get("session.options")
	if !ok || v.GetKvlistValue() == nil {
		return false, false
	}
	opts := v.GetKvlistValue().GetValues()
	ro := kvGet(opts, "recordingOptions")
	if ro == nil {
		ro = kvGet(opts, "recording_options")
	}
	if ro == nil || ro.GetKvlistValue() == nil {
		return false, false
	}
	kv := ro.GetKvlistValue().GetValues()
	on := func(k string) bool {
		x := kvGet(kv, k)
		if b, isBool := x.GetValue().(*common.AnyValue_BoolValue); isBool {
			return b.BoolValue
		}
		return strings.EqualFold(anyString(x), "true")
	}
	return on("transcript") || on("audio"), true
}
