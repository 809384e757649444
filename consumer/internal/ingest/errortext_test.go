package ingest

import (
	"testing"

	collogs "go.opentelemetry.io/proto/otlp/collector/logs/v1"
	common "go.opentelemetry.io/proto/otlp/common/v1"
	logspb "go.opentelemetry.io/proto/otlp/logs/v1"
	resourcepb "go.opentelemetry.io/proto/otlp/resource/v1"

	"github.com/lkscore/lkscore/consumer/internal/facts"
	"github.com/lkscore/lkscore/internal/testenv"
)

// errorTexts are the error texts the facts of one logs request hold.
func errorTexts(t *testing.T, req *collogs.ExportLogsServiceRequest, isJSON bool) []string {
	t.Helper()
	var out []string
	for _, u := range logFacts(req, isJSON) {
		for _, o := range u.Observations {
			if o.Field == facts.FieldErrorText {
				out = append(out, o.Value)
			}
		}
	}
	return out
}

// TestErrorTextFromCloseRecords: the SDK's own error for an error close,
// in the forms the SDKs send it: agents-js's pino record (the error event
// merged in, each object as its JSON in a string, "error" through pino's
// err serializer), its "AgentSession closed" with no error, and agents-py's
// logging record with the exception's type and message.
func TestErrorTextFromCloseRecords(t *testing.T) {
	js := func(rec map[string]any) *collogs.ExportLogsServiceRequest {
		var req collogs.ExportLogsServiceRequest
		if err := otlpJSON.Unmarshal(testenv.JSLogs("RM_e", "AJ_e", "agent", rec), &req); err != nil {
			t.Fatal(err)
		}
		return &req
	}
	got := errorTexts(t, js(map[string]any{"msg": "AgentSession is closing due to an unrecoverable error", "type": "llm_error", "label": "openai.LLM",
		"error": `{"type":"APIConnectionError","message":"Connection error.","stack":"APIConnectionError: Connection error.\n    at x"}`, "recoverable": false}), true)
	if len(got) != 1 || got[0] != "APIConnectionError: Connection error." {
		t.Errorf("agents-js unrecoverable error: %q", got)
	}
	if got := errorTexts(t, js(map[string]any{"msg": "AgentSession closed", "reason": "user_initiated", "error": ""}), true); len(got) != 0 {
		t.Errorf("a clean close has error text %q", got)
	}
	py := &collogs.ExportLogsServiceRequest{ResourceLogs: []*logspb.ResourceLogs{{
		Resource: &resourcepb.Resource{Attributes: []*common.KeyValue{testenv.StrKV("room_id", "RM_p"), testenv.StrKV("job_id", "AJ_p")}},
		ScopeLogs: []*logspb.ScopeLogs{{LogRecords: []*logspb.LogRecord{{
			Body: &common.AnyValue{Value: &common.AnyValue_StringValue{StringValue: "AgentSession is closing due to unrecoverable error"}},
			Attributes: []*common.KeyValue{testenv.StrKV("exception.type", "livekit.agents._exceptions.APIStatusError"),
				testenv.StrKV("exception.message", "tts returned 503")},
		}}}},
	}}}
	if got := errorTexts(t, py, false); len(got) != 1 || got[0] != "livekit.agents._exceptions.APIStatusError: tts returned 503" {
		t.Errorf("agents-py unrecoverable error: %q", got)
	}
}
