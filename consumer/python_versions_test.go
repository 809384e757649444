package consumer

import (
	"context"
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/livekit/protocol/livekit"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlplog/otlploghttp"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	otellog "go.opentelemetry.io/otel/log"
	sdklog "go.opentelemetry.io/otel/sdk/log"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	semconv "go.opentelemetry.io/otel/semconv/v1.26.0"
	"go.opentelemetry.io/otel/trace"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/lkscore/lkscore/internal/testenv"
	"github.com/lkscore/lkscore/scoring"
)

// pyRelease is one release's fixture (testdata/agents-py/release_<v>.json):
// what livekit-agents writes for a call at that release, read from its
// sources (the file names its commit and the source of each part).
type pyRelease struct {
	Release string            `json:"release"`
	Commit  string            `json:"commit"`
	Sources map[string]string `json:"sources"`
	Header  struct {
		RoomID    bool `json:"room_id"`
		JobID     bool `json:"job_id"`
		Simulated bool `json:"simulated"`
	} `json:"header"`
	Resource         map[string]any `json:"resource"`
	RecordAttributes map[string]any `json:"record_attributes"`
	SessionReport    map[string]any `json:"session_report"`
	CloseLog         struct {
		Body       string         `json:"body"`
		Scope      string         `json:"scope"`
		Attributes map[string]any `json:"attributes"`
	} `json:"close_log"`
	Spans []pySpan `json:"spans"`
}

type pySpan struct {
	Name       string         `json:"name"`
	Start      float64        `json:"start"`
	End        float64        `json:"end"`
	Attributes map[string]any `json:"attributes"`
	Children   []pySpan       `json:"children"`
}

// TestAgentsPyVersions: the Python SDK as three releases write a call (the
// recording upload, the session report and close log over OTLP/protobuf,
// the voice pipeline's spans), with LiveKit's agent_job_ended: each is
// scored once, with the close reason the SDK's log implies, the agent's
// name, the SDK's language and that release's version, its spans and its
// recording, whatever the header lacks (1.5.17 sends no job id) and
// whatever the spans' content attributes are called (lk.pii.* since 1.7.0).
func TestAgentsPyVersions(t *testing.T) {
	t.Parallel()
	ns := startNATS(t)
	d, reg := startDaemon(t, pipelineConfig(t, ns.URL()))
	releases := []string{"1.5.17", "1.6.10", "1.7.0"}
	var rooms []string
	for _, rel := range releases {
		var fx pyRelease
		if err := json.Unmarshal(mustReadFile(t, filepath.Join("testdata", "agents-py", "release_"+rel+".json")), &fx); err != nil {
			t.Fatal(err)
		}
		if fx.Release != rel || len(fx.Commit) != 40 || fx.Sources["header"] == "" || fx.Sources["spans"] == "" {
			t.Fatalf("fixture %s does not say where it was read: %+v", rel, fx.Sources)
		}
		id := strings.ReplaceAll(rel, ".", "")
		room, job := "RM_Py"+id, "AJ_Py"+id
		rooms = append(rooms, room)
		sendPyRelease(t, d, fx, room, job, "py-agent", mustReadFile(t, filepath.Join("testdata", "agents-py", "chat_history_"+rel+".json")))
		sendWebhook(t, d, jobEnded("EV_py"+id, room, job, "py-agent", livekit.JobStatus_JS_SUCCESS))
	}
	cards := oneCardEach(t, ns.URL(), rooms...)
	for i, rel := range releases {
		c := cards[rooms[i]]
		if got := c.Completion.CloseReason + " " + c.Completion.CloseReasonSource; got != "CR_PARTICIPANT_DISCONNECTED otlp_log_implied" {
			t.Errorf("%s: close reason %s", rel, got)
		}
		if c.Session.AgentName != "py-agent" || c.Session.SDK == nil || c.Session.SDK.Language != "python" || c.Session.SDK.Version != rel {
			t.Errorf("%s: session %+v sdk %+v", rel, c.Session, c.Session.SDK)
		}
		if got := strings.Join(c.Inputs, ","); got != "recording,logs,traces" {
			t.Errorf("%s: inputs %q, want recording,logs,traces", rel, got)
		}
		if c.Spans == nil || !c.Spans.TTFTP50Ms.Set || c.Spans.TTFTP50Ms.V < 398 || c.Spans.TTFTP50Ms.V > 412 ||
			c.Metrics.UserTurns != 2 || c.Metrics.ToolCalls != 1 || c.Overall.Verdict == "" {
			t.Errorf("%s: spans %+v, user turns %d, tool calls %d, verdict %q", rel, c.Spans, c.Metrics.UserTurns, c.Metrics.ToolCalls, c.Overall.Verdict)
		}
	}
	checkCoverage(t, d, reg, "python", releases, "otlp_log_implied",
		scoring.SignalRecording, scoring.SignalLogs, scoring.SignalTraces, scoring.SignalCloseReason)
}

// sendPyRelease sends what fx's release sends for one call.
func sendPyRelease(t *testing.T, d *Daemon, fx pyRelease, room, job, agent string, chat []byte) {
	t.Helper()
	ctx := context.Background()
	fill := func(v any) any {
		if s, ok := v.(string); ok {
			return strings.NewReplacer("{room_id}", room, "{job_id}", job, "{agent_name}", agent).Replace(s)
		}
		return v
	}
	attrs := func(m map[string]any) []attribute.KeyValue {
		var kv []attribute.KeyValue
		for k, v := range m {
			switch v := fill(v).(type) {
			case string:
				kv = append(kv, attribute.String(k, v))
			case float64:
				kv = append(kv, attribute.Float64(k, v))
			case bool:
				kv = append(kv, attribute.Bool(k, v))
			default:
				t.Fatalf("attribute %s: %T", k, v)
			}
		}
		return kv
	}

	// The upload: the release's header fields, its chat history.
	h := &livekit.MetricsRecordingHeader{StartTime: timestamppb.New(time.Unix(1764417600, 0))}
	if fx.Header.RoomID {
		h.RoomId = room
	}
	if fx.Header.JobID {
		h.JobId = job
	}
	header, err := proto.Marshal(h)
	if err != nil {
		t.Fatal(err)
	}
	body, ct := testenv.PythonUpload(t, testenv.FullParts(header, chat, nil)[:2])
	if resp, msg := post(t, "http://"+d.IngestAddr()+"/observability/recordings/v0", testenv.Bearer(testenv.PythonToken(t, testenv.Key, testenv.Secret, true)),
		ct, strings.NewReader(string(body))); resp.StatusCode != 200 {
		t.Fatalf("%s upload: %d %s", fx.Release, resp.StatusCode, msg)
	}

	// OTLP, as the Python SDK's exporters send it: protobuf, gzip.
	headers := map[string]string{"Authorization": testenv.Bearer(testenv.PythonToken(t, testenv.Key, testenv.Secret, true))}
	res := resource.NewWithAttributes(semconv.SchemaURL, append(attrs(fx.Resource), semconv.TelemetrySDKLanguagePython)...)
	logExp, err := otlploghttp.New(ctx, otlploghttp.WithEndpointURL("http://"+d.IngestAddr()+"/observability/logs/otlp/v0"),
		otlploghttp.WithCompression(otlploghttp.GzipCompression), otlploghttp.WithHeaders(headers))
	if err != nil {
		t.Fatal(err)
	}
	lp := sdklog.NewLoggerProvider(sdklog.WithResource(res), sdklog.WithProcessor(sdklog.NewSimpleProcessor(logExp)))
	emit := func(scope, body string, m map[string]any) {
		var r otellog.Record
		r.SetBody(attribute.StringValue(body))
		r.SetSeverity(otellog.SeverityInfo)
		r.AddAttributes(append(attrs(fx.RecordAttributes), attrs(m)...)...)
		lp.Logger(scope).Emit(ctx, r)
	}
	emit("chat_history", "session report", fx.SessionReport)
	emit(fx.CloseLog.Scope, fx.CloseLog.Body, fx.CloseLog.Attributes)
	if err := lp.Shutdown(ctx); err != nil {
		t.Fatalf("%s logs: %v", fx.Release, err)
	}

	traceExp, err := otlptracehttp.New(ctx, otlptracehttp.WithEndpointURL("http://"+d.IngestAddr()+"/observability/traces/otlp/v0"),
		otlptracehttp.WithCompression(otlptracehttp.GzipCompression), otlptracehttp.WithHeaders(headers))
	if err != nil {
		t.Fatal(err)
	}
	tp := sdktrace.NewTracerProvider(sdktrace.WithResource(res), sdktrace.WithSyncer(traceExp))
	tracer := tp.Tracer("livekit-agents")
	t0 := time.Unix(1764417600, 0)
	at := func(s float64) time.Time { return t0.Add(time.Duration(s * float64(time.Second))) }
	var start func(ctx context.Context, s pySpan)
	start = func(ctx context.Context, s pySpan) {
		cctx, span := tracer.Start(ctx, s.Name, trace.WithTimestamp(at(s.Start)),
			trace.WithAttributes(append(attrs(fx.RecordAttributes), attrs(s.Attributes)...)...))
		for _, c := range s.Children {
			start(cctx, c)
		}
		span.End(trace.WithTimestamp(at(s.End)))
	}
	for _, s := range fx.Spans {
		start(ctx, s)
	}
	if err := tp.Shutdown(ctx); err != nil {
		t.Fatalf("%s traces: %v", fx.Release, err)
	}
}
