package ingest

import (
	"bytes"
	"testing"

	coltrace "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	common "go.opentelemetry.io/proto/otlp/common/v1"
	resourcepb "go.opentelemetry.io/proto/otlp/resource/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"

	"github.com/lkscore/lkscore/scoring"
)

// pySpanRequest is an OTLP traces request as livekit/agents (Python) sends
// it: its span names and attributes (telemetry/trace_types.py), delays in
// seconds (audio_recognition.py, time.time() differences), the resource
// the SDK's tracer sets (room_id, job_id, telemetry.sdk.language python).
func pySpanRequest(lang string, eot float64) *coltrace.ExportTraceServiceRequest {
	str := func(k, v string) *common.KeyValue {
		return &common.KeyValue{Key: k, Value: &common.AnyValue{Value: &common.AnyValue_StringValue{StringValue: v}}}
	}
	dbl := func(k string, v float64) *common.KeyValue {
		return &common.KeyValue{Key: k, Value: &common.AnyValue{Value: &common.AnyValue_DoubleValue{DoubleValue: v}}}
	}
	boolean := func(k string, v bool) *common.KeyValue {
		return &common.KeyValue{Key: k, Value: &common.AnyValue{Value: &common.AnyValue_BoolValue{BoolValue: v}}}
	}
	sp := func(id, parent byte, name string, start, end float64, attrs ...*common.KeyValue) *tracepb.Span {
		s := &tracepb.Span{TraceId: bytes.Repeat([]byte{7}, 16), SpanId: []byte{0, 0, 0, 0, 0, 0, 0, id}, Name: name,
			StartTimeUnixNano: uint64(start * 1e9), EndTimeUnixNano: uint64(end * 1e9), Attributes: attrs}
		if parent != 0 {
			s.ParentSpanId = []byte{0, 0, 0, 0, 0, 0, 0, parent}
		}
		return s
	}
	const t0 = 1764699269.087637
	spans := []*tracepb.Span{
		sp(1, 0, "agent_session", t0, t0+30),
		sp(2, 1, "user_turn", t0+1, t0+3, dbl("lk.transcript_confidence", 0.8731), dbl("lk.transcription_delay", eot/2), dbl("lk.end_of_turn_delay", eot)),
		sp(3, 1, "agent_turn", t0+3.5, t0+6, dbl("lk.e2e_latency", 0.6231881753028994), boolean("lk.interrupted", false)),
		sp(4, 3, "llm_node", t0+3.5, t0+4, dbl("lk.response.ttft", 0.2130000591278076)),
		sp(5, 3, "function_tool", t0+4, t0+4.2, str("lk.function_tool.name", "get_weather"), boolean("lk.function_tool.is_error", true)),
		sp(6, 3, "tts_request", t0+4.3, t0+4.4),
		sp(7, 1, "llm_request", t0+5, t0+5.1), // not kept: no error
	}
	spans[5].Status = &tracepb.Status{Code: tracepb.Status_STATUS_CODE_ERROR, Message: "APIStatusError: 429 Too Many Requests"}
	return &coltrace.ExportTraceServiceRequest{ResourceSpans: []*tracepb.ResourceSpans{{
		Resource: &resourcepb.Resource{Attributes: []*common.KeyValue{str("service.name", "livekit-agents"), str("room_id", "RM_py"),
			str("job_id", "AJ_py"), str("telemetry.sdk.language", lang)}},
		ScopeSpans: []*tracepb.ScopeSpans{{Spans: spans}},
	}}}
}

// TestSpanFactsBothSDKs: the spans are read in both SDKs' forms, each
// delay in its SDK's unit, only the spans scoring uses kept, and a
// provider's failed request kept with its error.
func TestSpanFactsBothSDKs(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		lang string
		eot  float64 // as the SDK writes it
	}{{"python", 0.502}, {"nodejs", 502}} {
		ups := traceFacts(pySpanRequest(tc.lang, tc.eot))
		u := ups[sessionID{"RM_py", "AJ_py"}]
		if u == nil {
			t.Fatalf("%s: no update for the session: %v", tc.lang, ups)
		}
		names := map[string]scoring.Span{}
		for _, s := range u.Spans {
			names[s.Name] = s
		}
		if len(u.Spans) != 6 || names["llm_request"].ID != "" {
			t.Errorf("%s: kept %d spans %v, want 6 without the healthy llm_request", tc.lang, len(u.Spans), names)
		}
		ut := names["user_turn"]
		if ut.EndOfTurnDelay == nil || *ut.EndOfTurnDelay != 0.502 || ut.TranscriptionDelay == nil || *ut.TranscriptionDelay != 0.251 {
			t.Errorf("%s: user turn delays %v %v, want 0.502 and 0.251 s", tc.lang, ut.EndOfTurnDelay, ut.TranscriptionDelay)
		}
		if at := names["agent_turn"]; at.E2ELatency == nil || *at.E2ELatency != 0.6231881753028994 || at.Parent != "0000000000000001" {
			t.Errorf("%s: agent turn %+v", tc.lang, at)
		}
		if ft := names["function_tool"]; ft.Tool != "get_weather" || !ft.ToolError {
			t.Errorf("%s: function tool %+v", tc.lang, ft)
		}
		if tr := names["tts_request"]; tr.Error != "APIStatusError: 429 Too Many Requests" {
			t.Errorf("%s: failed tts_request %+v", tc.lang, tr)
		}
	}
}
