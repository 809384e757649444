package ingest

import (
	"encoding/json"
	"strings"
	"testing"

	collogs "go.opentelemetry.io/proto/otlp/collector/logs/v1"
	common "go.opentelemetry.io/proto/otlp/common/v1"
	logspb "go.opentelemetry.io/proto/otlp/logs/v1"
	resourcepb "go.opentelemetry.io/proto/otlp/resource/v1"

	"github.com/lkscore/lkscore/consumer/internal/facts"
	"github.com/lkscore/lkscore/internal/testenv"
	"github.com/lkscore/lkscore/session"
)

func kvlist(kvs ...*common.KeyValue) *common.AnyValue {
	return &common.AnyValue{Value: &common.AnyValue_KvlistValue{KvlistValue: &common.KeyValueList{Values: kvs}}}
}

func dblKV(k string, v float64) *common.KeyValue {
	return &common.KeyValue{Key: k, Value: &common.AnyValue{Value: &common.AnyValue_DoubleValue{DoubleValue: v}}}
}

// pythonSessionReport is the session report record agents-py sends, in the
// form its sources show: livekit-agents telemetry (the "session report"
// log's attribute "usage" is `[{k: v for k, v in u.model_dump().items() if
// v != 0 and v != 0.0} for u in report.model_usage]`, metrics/usage.py's
// LLMModelUsage, TTSModelUsage, STTModelUsage, EOTModelUsage: snake_case,
// zeros left out, durations in float seconds), exported by the Python
// OpenTelemetry SDK as OTLP/protobuf (a dict is a kvlist, a list an
// array, an int an intValue, a float a doubleValue). The counts are made
// up, with full-precision floats.
func pythonSessionReport(usage *common.AnyValue) *collogs.ExportLogsServiceRequest {
	attrs := []*common.KeyValue{testenv.StrKV("agent_name", "booking"), testenv.StrKV("sdk_version", "1.7.3")}
	if usage != nil {
		attrs = append(attrs, &common.KeyValue{Key: "usage", Value: usage})
	}
	return &collogs.ExportLogsServiceRequest{ResourceLogs: []*logspb.ResourceLogs{{
		Resource: &resourcepb.Resource{Attributes: []*common.KeyValue{testenv.StrKV("room_id", "RM_usage"), testenv.StrKV("job_id", "AJ_usage")}},
		ScopeLogs: []*logspb.ScopeLogs{{LogRecords: []*logspb.LogRecord{{
			Body:       &common.AnyValue{Value: &common.AnyValue_StringValue{StringValue: "session report"}},
			Attributes: attrs,
		}}}},
	}}}
}

// resolvedUsage runs a logs request through the facts: what a card gets.
func resolvedUsage(t *testing.T, req *collogs.ExportLogsServiceRequest, isJSON bool) *session.Usage {
	t.Helper()
	var obs []facts.Observation
	for _, u := range logFacts(req, isJSON) {
		obs = append(obs, u.Observations...)
	}
	r := facts.Resolve(obs)
	return session.UsageOf(&r.Facts, 4)
}

// TestUsageInThePythonSDKsForm: every count the Python SDK's report sent
// is on the card as sent, what it left out is absent (not 0), and the
// totals are the sums; a report with no usage is "not reported".
func TestUsageInThePythonSDKsForm(t *testing.T) {
	usage := &common.AnyValue{Value: &common.AnyValue_ArrayValue{ArrayValue: &common.ArrayValue{Values: []*common.AnyValue{
		kvlist(testenv.StrKV("type", "llm_usage"), testenv.StrKV("provider", "openai"), testenv.StrKV("model", "gpt-4o-mini"),
			testenv.IntKV("input_tokens", 15231), testenv.IntKV("input_cached_tokens", 5120), testenv.IntKV("output_tokens", 2017)),
		kvlist(testenv.StrKV("type", "llm_usage"), testenv.StrKV("provider", "openai"), testenv.StrKV("model", "gpt-realtime"),
			testenv.IntKV("input_tokens", 900), testenv.IntKV("input_audio_tokens", 700), testenv.IntKV("input_text_tokens", 200),
			testenv.IntKV("output_tokens", 300), testenv.IntKV("output_audio_tokens", 250), testenv.IntKV("output_text_tokens", 50),
			dblKV("session_duration", 61.483920001983643)),
		kvlist(testenv.StrKV("type", "tts_usage"), testenv.StrKV("provider", "cartesia"), testenv.StrKV("model", "sonic-2"),
			testenv.IntKV("characters_count", 1844), dblKV("audio_duration", 41.229999999999997)),
		kvlist(testenv.StrKV("type", "stt_usage"), testenv.StrKV("provider", "deepgram"), testenv.StrKV("model", "nova-3"),
			dblKV("audio_duration", 52.700000762939453)),
		kvlist(testenv.StrKV("type", "eot_usage"), testenv.StrKV("provider", "livekit"), testenv.StrKV("model", "turn-detector"),
			testenv.IntKV("total_requests", 9)),
	}}}}
	u := resolvedUsage(t, pythonSessionReport(usage), false)
	got, _ := json.Marshal(u)
	want := `{"reported":true,"models":[` +
		`{"type":"llm_usage","provider":"openai","model":"gpt-4o-mini","input_tokens":15231,"input_cached_tokens":5120,"output_tokens":2017},` +
		`{"type":"llm_usage","provider":"openai","model":"gpt-realtime","input_tokens":900,"input_audio_tokens":700,"input_text_tokens":200,` +
		`"output_tokens":300,"output_audio_tokens":250,"output_text_tokens":50,"session_duration_s":61.48392000198364},` +
		`{"type":"tts_usage","provider":"cartesia","model":"sonic-2","characters_count":1844,"audio_duration_s":41.23},` +
		`{"type":"stt_usage","provider":"deepgram","model":"nova-3","audio_duration_s":52.70000076293945},` +
		`{"type":"eot_usage","provider":"livekit","model":"turn-detector","total_requests":9}],` +
		`"input_tokens":16131,"output_tokens":2317,"tts_characters":1844,"stt_audio_s":52.70000076293945,"tokens_per_user_turn":4612}`
	if string(got) != want {
		t.Errorf("usage\n got %s\nwant %s", got, want)
	}
	// A report with no usage (model_usage empty: the attribute is None),
	// and no report at all: not reported, never zeros.
	for name, req := range map[string]*collogs.ExportLogsServiceRequest{"usage None": pythonSessionReport(nil)} {
		if u := resolvedUsage(t, req, false); u == nil || u.Reported || u.InputTokens.Set {
			t.Errorf("%s: %+v, want not reported", name, u)
		}
	}
	// Bounded: a report listing 1,000 models keeps 16; negative or
	// non-numeric counts are left out.
	many := &common.ArrayValue{}
	for range 1000 {
		many.Values = append(many.Values, kvlist(testenv.StrKV("type", "llm_usage"), testenv.StrKV("provider", strings.Repeat("p", 500)),
			testenv.IntKV("input_tokens", -5), testenv.StrKV("output_tokens", "lots")))
	}
	u = resolvedUsage(t, pythonSessionReport(&common.AnyValue{Value: &common.AnyValue_ArrayValue{ArrayValue: many}}), false)
	if len(u.Models) != maxUsageModels || len(u.Models[0].Provider) > 64 || u.Models[0].InputTokens.Set || u.Models[0].OutputTokens.Set {
		t.Errorf("1,000 hostile models: %d kept, first %+v", len(u.Models), u.Models[0])
	}
}
