package consumer

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
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
	coltrace "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	common "go.opentelemetry.io/proto/otlp/common/v1"
	resourcepb "go.opentelemetry.io/proto/otlp/resource/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/protobuf/proto"

	"github.com/lkscore/lkscore/consumer/internal/facts"
	"github.com/lkscore/lkscore/internal/testenv"
	"github.com/lkscore/lkscore/session"
)

func postOTLP(t *testing.T, d *Daemon, signal, contentType string, body []byte, headers map[string]string) (*http.Response, string) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, "http://"+d.IngestAddr()+"/observability/"+signal+"/otlp/v0", bytes.NewReader(body))
	req.Header.Set("Authorization", testenv.Bearer(testenv.PythonToken(t, testenv.Key, testenv.Secret, true)))
	req.Header.Set("Content-Type", contentType)
	for k, v := range headers {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	msg, _ := io.ReadAll(resp.Body)
	return resp, string(msg)
}

func readFacts(t *testing.T, url, roomID, jobID string) *facts.SessionFacts {
	t.Helper()
	js := testenv.JetStream(t, url)
	kv, err := js.KeyValue(context.Background(), "LKSCORE_SESSION_FACTS")
	if err != nil {
		t.Fatal(err)
	}
	e, err := kv.Get(context.Background(), facts.Key(roomID, jobID))
	if err != nil {
		return nil
	}
	var f facts.SessionFacts
	if err := json.Unmarshal(e.Value(), &f); err != nil {
		t.Fatal(err)
	}
	return &f
}

// TestOTLPFromGoExporters: the official OpenTelemetry Go OTLP/HTTP exporters
// (protobuf, gzip, as the Python SDK sends) deliver logs and spans whose
// facts land in the session's entry.
func TestOTLPFromGoExporters(t *testing.T) {
	t.Parallel()
	ns := testenv.StartNATS(t)
	d, reg := startDaemon(t, pipelineConfig(t, ns.URL()))
	ctx := context.Background()
	headers := map[string]string{"Authorization": testenv.Bearer(testenv.PythonToken(t, testenv.Key, testenv.Secret, true))}
	res := resource.NewWithAttributes(semconv.SchemaURL, semconv.ServiceName("livekit-agents"),
		semconv.TelemetrySDKLanguagePython, attribute.String("room_id", "RM_Otel"), attribute.String("job_id", "AJ_Otel"))

	logExp, err := otlploghttp.New(ctx, otlploghttp.WithEndpointURL("http://"+d.IngestAddr()+"/observability/logs/otlp/v0"),
		otlploghttp.WithCompression(otlploghttp.GzipCompression), otlploghttp.WithHeaders(headers))
	if err != nil {
		t.Fatal(err)
	}
	lp := sdklog.NewLoggerProvider(sdklog.WithResource(res), sdklog.WithProcessor(sdklog.NewSimpleProcessor(logExp)))
	logger := lp.Logger("chat_history")
	emit := func(body string, kv ...attribute.KeyValue) {
		var r otellog.Record
		r.SetBody(attribute.StringValue(body))
		r.SetSeverity(otellog.SeverityInfo)
		r.AddAttributes(append(kv, attribute.String("room_id", "RM_Otel"), attribute.String("job_id", "AJ_Otel"))...)
		logger.Emit(ctx, r)
	}
	emit("session report", attribute.String("agent_name", "booking-agent"), attribute.String("sdk_version", "1.7.2"),
		attribute.StringSlice("session.tags", []string{"version:1.4.2", "beta"}),
		attribute.String("lk.deployment_id", "DP_1"))
	emit("closing agent session due to participant disconnect (disable via `RoomInputOptions.close_on_disconnect=False`)")
	if err := lp.Shutdown(ctx); err != nil {
		t.Fatalf("log export: %v", err)
	}

	traceExp, err := otlptracehttp.New(ctx, otlptracehttp.WithEndpointURL("http://"+d.IngestAddr()+"/observability/traces/otlp/v0"),
		otlptracehttp.WithCompression(otlptracehttp.GzipCompression), otlptracehttp.WithHeaders(headers))
	if err != nil {
		t.Fatal(err)
	}
	tp := sdktrace.NewTracerProvider(sdktrace.WithResource(res), sdktrace.WithSyncer(traceExp))
	_, span := tp.Tracer("livekit-agents").Start(ctx, "session_close")
	span.SetAttributes(attribute.String("lk.close_reason", "user_initiated"), attribute.String("lk.agent_name", "booking-agent"))
	span.End()
	if err := tp.Shutdown(ctx); err != nil {
		t.Fatalf("trace export: %v", err)
	}

	f := readFacts(t, ns.URL(), "RM_Otel", "AJ_Otel")
	if f == nil {
		t.Fatal("no facts stored")
	}
	r := facts.Resolve(f.Observations)
	if r.CloseReason != "CR_USER_INITIATED" || r.CloseReasonSource != facts.SourceOTLPSpan ||
		r.CloseReasonEvidence != "otlp_span: span session_close lk.close_reason=user_initiated" {
		t.Errorf("close reason %s from %s (%q): the span must beat the implied log", r.CloseReason, r.CloseReasonSource, r.CloseReasonEvidence)
	}
	if r.AgentName != "booking-agent" || r.SDKLanguage != "python" || r.SDKVersion != "1.7.2" || r.DeploymentID != "DP_1" ||
		strings.Join(r.Tags, ",") != "beta,version:1.4.2" {
		t.Errorf("resolved %+v", r)
	}
	if v := counter(t, reg, "lkscore_otlp_facts_total", map[string]string{"signal": "logs"}); v == 0 {
		t.Error("no log facts counted")
	}

	// The upload and the webhook complete the session: its scorecard carries
	// what the exporters said.
	dir := t.TempDir()
	writeScenarioCopy(t, dir, "1_clean_call", "RM_Otel", "AJ_Otel", "")
	uploadDir(t, d, dir)
	sendWebhook(t, d, jobEnded("EV_otel", "RM_Otel", "AJ_Otel", "booking-agent", livekit.JobStatus_JS_SUCCESS))
	testenv.WaitFor(t, settleWait, "a scorecard", func() bool { return len(streamMsgs(t, ns.URL(), "LKSCORE_RESULTS")) == 1 })
	c := results(t, ns.URL())[0]
	if c.Completion.CloseReason != "CR_USER_INITIATED" || c.Completion.CloseReasonSource != facts.SourceOTLPSpan || c.Session.SDK == nil ||
		*c.Session.SDK != (session.SDKRef{Language: "python", Version: "1.7.2"}) || strings.Join(c.Session.Tags, ",") != "beta,version:1.4.2" ||
		c.Session.DeploymentID != "DP_1" || c.Session.AgentName != "booking-agent" {
		t.Errorf("scorecard session %+v, completion %+v", c.Session, c.Completion)
	}
}

// TestSessionFactsArrivalOrders: every order of upload, agent_job_ended and
// the agents-js close log (also the log arriving last, within the settle
// window) gives exactly one scorecard with the agent name from the webhook
// and the close reason from the log.
func TestSessionFactsArrivalOrders(t *testing.T) {
	orders := [][]string{
		{"upload", "job", "otlp"}, {"upload", "otlp", "job"}, {"job", "upload", "otlp"},
		{"job", "otlp", "upload"}, {"otlp", "upload", "job"}, {"otlp", "job", "upload"},
	}
	ns := testenv.StartNATS(t)
	cfg := pipelineConfig(t, ns.URL())
	cfg.Pipeline.SettleWindow = 5 * time.Second // OTLP last must still count
	d, _ := startDaemon(t, cfg)
	for i, order := range orders {
		room, job := fmt.Sprintf("RM_Order%d", i), fmt.Sprintf("AJ_Order%d", i)
		dir := t.TempDir()
		writeScenarioCopy(t, dir, "1_clean_call", room, job, "") // real SDKs write no summary
		for _, step := range order {
			switch step {
			case "upload":
				uploadDir(t, d, dir)
			case "job":
				sendWebhook(t, d, jobEnded("EV_"+job, room, job, "agent-js", livekit.JobStatus_JS_SUCCESS))
			case "otlp":
				body := testenv.JSLogs(room, job, "agent-js",
					map[string]any{"msg": "closing agent session due to participant disconnect (disable via `inputOptions.closeOnDisconnect`)"},
					map[string]any{"msg": "AgentSession closed", "reason": "user_initiated", "error": "null"})
				if resp, msg := postOTLP(t, d, "logs", "application/json", body, nil); resp.StatusCode != 200 {
					t.Fatalf("otlp: %d %s", resp.StatusCode, msg)
				}
			}
		}
	}
	start := time.Now()
	testenv.WaitFor(t, settleWait, "six scorecards", func() bool { return len(streamMsgs(t, ns.URL(), "LKSCORE_RESULTS")) == len(orders) })
	if waited := time.Since(start); waited > 3*time.Second {
		t.Errorf("complete sessions waited %s: they must not wait for the settle window", waited)
	}
	quiesce(t, ns.URL(), defaultConsumers)
	cards := results(t, ns.URL())
	if len(cards) != len(orders) {
		t.Fatalf("%d scorecards for %d sessions", len(cards), len(orders))
	}
	for _, c := range cards {
		s := c.Session
		if s.AgentName != "agent-js" || c.Completion.CloseReason != "CR_USER_INITIATED" || c.Completion.CloseReasonSource != facts.SourceOTLPLog ||
			c.Completion.CloseReasonEvidence != "otlp_log: AgentSession closed reason=user_initiated" ||
			s.CloseReason != "CR_USER_INITIATED" || s.JobStatus != "JS_SUCCESS" || s.SDK == nil || s.SDK.Language != "nodejs" ||
			s.Provenance[facts.FieldAgentName] != facts.SourceWebhook {
			t.Errorf("%s: agent %q, close %s from %s (%q), session %+v", s.Key, s.AgentName, c.Completion.CloseReason,
				c.Completion.CloseReasonSource, c.Completion.CloseReasonEvidence, s)
		}
	}
}

// TestOTLPHostile: hostile bodies get a clear 4xx, never a 401 that could
// switch the SDK off, and never a panic.
func TestOTLPHostile(t *testing.T) {
	t.Parallel()
	ns := testenv.StartNATS(t)
	cfg := testConfig(t, ns.URL())
	cfg.Limits.OTLPBytes = 1 << 20
	d, _ := startDaemon(t, cfg)

	var bomb bytes.Buffer
	zw := gzip.NewWriter(&bomb)
	_, _ = zw.Write(make([]byte, 64<<20)) // 64 MiB of zeros, ~64 KiB compressed
	_ = zw.Close()
	deep := `{"resourceLogs":[{"scopeLogs":[{"logRecords":[{"body":` + strings.Repeat(`{"kvlistValue":{"values":[{"key":"k","value":`, 200) +
		`{"stringValue":"x"}` + strings.Repeat(`}]}}`, 200) + `}]}]}]}`
	huge := testenv.JSLogs("RM_Huge", "AJ_Huge", strings.Repeat("a", 600<<10), map[string]any{"msg": "AgentSession closed", "reason": strings.Repeat("r", 300<<10)})

	for _, tc := range []struct {
		name, signal, contentType, encoding string
		body                                []byte
		want                                int
	}{
		{"gzip bomb", "logs", "application/x-protobuf", "gzip", bomb.Bytes(), http.StatusRequestEntityTooLarge},
		{"too large", "traces", "application/x-protobuf", "", make([]byte, 2<<20), http.StatusRequestEntityTooLarge},
		{"deep nesting", "logs", "application/json", "", []byte(deep), http.StatusBadRequest},
		{"wrong content type", "logs", "text/plain", "", []byte("hello"), http.StatusUnsupportedMediaType},
		{"unknown encoding", "logs", "application/json", "br", []byte("{}"), http.StatusUnsupportedMediaType},
		{"bad JSON", "logs", "application/json", "", []byte(`{"resourceLogs":[{`), http.StatusBadRequest},
		{"bad protobuf", "traces", "application/x-protobuf", "", []byte{0x0a, 0xff, 0xff, 0xff, 0xff, 0x0f}, http.StatusBadRequest},
		{"bad gzip", "logs", "application/x-protobuf", "gzip", []byte("not gzip"), http.StatusBadRequest},
		{"huge attributes", "logs", "application/json", "", huge, http.StatusOK},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := map[string]string{}
			if tc.encoding != "" {
				h["Content-Encoding"] = tc.encoding
			}
			resp, msg := postOTLP(t, d, tc.signal, tc.contentType, tc.body, h)
			if resp.StatusCode != tc.want || strings.Contains(strings.ToLower(msg), "disabled") {
				t.Errorf("status %d (%q), want %d", resp.StatusCode, msg, tc.want)
			}
		})
	}
	if f := readFacts(t, ns.URL(), "RM_Huge", "AJ_Huge"); f == nil {
		t.Error("the huge-attribute record left no facts")
	} else {
		for _, o := range f.Observations {
			if len(o.Value) > facts.MaxEvidence || len(o.Evidence) > facts.MaxEvidence+32 {
				t.Errorf("unbounded observation: %d/%d bytes", len(o.Value), len(o.Evidence))
			}
		}
	}

	// Without a valid token: 401, and never the phrases that switch the SDK off.
	req, _ := http.NewRequest(http.MethodPost, "http://"+d.IngestAddr()+"/observability/logs/otlp/v0", strings.NewReader("{}"))
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	msg, _ := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized || strings.Contains(strings.ToLower(string(msg)), "disabled") {
		t.Errorf("no token: %d %q", resp.StatusCode, msg)
	}
	// Metrics are still accepted and dropped.
	if resp, msg := postOTLP(t, d, "metrics", "application/x-protobuf", []byte{0x0a, 0x00}, nil); resp.StatusCode != 200 {
		t.Errorf("metrics: %d %s", resp.StatusCode, msg)
	}
}

// TestOTLPChunkedGzip: a gzipped protobuf body sent chunked, without a
// Content-Length (as agents-js sends its traces), is read.
func TestOTLPChunkedGzip(t *testing.T) {
	t.Parallel()
	ns := testenv.StartNATS(t)
	d, _ := startDaemon(t, testConfig(t, ns.URL()))
	req := &coltrace.ExportTraceServiceRequest{ResourceSpans: []*tracepb.ResourceSpans{{
		Resource: &resourcepb.Resource{Attributes: []*common.KeyValue{testenv.StrKV("room_id", "RM_Chunk"), testenv.StrKV("job_id", "AJ_Chunk")}},
		ScopeSpans: []*tracepb.ScopeSpans{{Spans: []*tracepb.Span{{Name: "session_close",
			Attributes: []*common.KeyValue{testenv.StrKV("lk.close_reason", "participant_disconnected")}}}}},
	}}}
	pb, _ := proto.Marshal(req)
	var gz bytes.Buffer
	zw := gzip.NewWriter(&gz)
	_, _ = zw.Write(pb)
	_ = zw.Close()
	hr, _ := http.NewRequest(http.MethodPost, "http://"+d.IngestAddr()+"/observability/traces/otlp/v0", io.MultiReader(&gz))
	hr.Header.Set("Authorization", testenv.Bearer(testenv.PythonToken(t, testenv.Key, testenv.Secret, true)))
	hr.Header.Set("Content-Type", "application/x-protobuf")
	hr.Header.Set("Content-Encoding", "gzip")
	resp, err := http.DefaultClient.Do(hr)
	if err != nil {
		t.Fatal(err)
	}
	_ = resp.Body.Close()
	if resp.StatusCode != 200 || hr.ContentLength != 0 {
		t.Fatalf("status %d (content length %d)", resp.StatusCode, hr.ContentLength)
	}
	f := readFacts(t, ns.URL(), "RM_Chunk", "AJ_Chunk")
	if f == nil || facts.Resolve(f.Observations).CloseReason != "CR_PARTICIPANT_DISCONNECTED" {
		t.Fatalf("facts %+v", f)
	}
}

// TestOTLPRenamedSessionAttributes: an SDK that names its session only
// lk.room_id and lk.job_id (LiveKit's OpenTelemetry registry, where
// livekit/agents#7973 moves the agents, with no alias for room_id and
// job_id) gets the same scorecard as one that sends today's names: the
// close reason and the agent name still come from its logs.
func TestOTLPRenamedSessionAttributes(t *testing.T) {
	t.Parallel()
	cfg := pipelineConfig(t, "")
	d, _ := startDaemon(t, cfg)
	chat := mustReadFile(t, filepath.Join(scenarioDir, "1_clean_call", "chat_history.json"))
	for _, s := range []struct {
		room, job string
		renamed   bool
	}{{"RM_OldNames", "AJ_Names", false}, {"RM_NewNames", "AJ_Names", true}} {
		header, _ := proto.Marshal(&livekit.MetricsRecordingHeader{RoomId: s.room, JobId: s.job})
		body, ct := testenv.PythonUpload(t, testenv.FullParts(header, chat, nil)[:2])
		if resp, msg := post(t, "http://"+d.IngestAddr()+"/observability/recordings/v0", testenv.Bearer(testenv.PythonToken(t, testenv.Key, testenv.Secret, true)),
			ct, bytes.NewReader(body)); resp.StatusCode != 200 {
			t.Fatalf("upload: %d %s", resp.StatusCode, msg)
		}
		logs := string(testenv.JSLogs(s.room, s.job, "names-agent", map[string]any{"msg": "AgentSession closed", "reason": "user_initiated"}))
		if s.renamed {
			logs = strings.NewReplacer(`"key":"room_id"`, `"key":"lk.room_id"`, `"key":"job_id"`, `"key":"lk.job_id"`).Replace(logs)
			if strings.Contains(logs, `"room_id"`) || strings.Contains(logs, `"job_id"`) {
				t.Fatalf("the old names are left: %s", logs)
			}
		}
		if r, msg := postOTLP(t, d, "logs", "application/json", []byte(logs), nil); r.StatusCode != 200 {
			t.Fatalf("otlp: %d %s", r.StatusCode, msg)
		}
		// And a span, its session named on the resource the same way.
		roomKey, jobKey := "room_id", "job_id"
		if s.renamed {
			roomKey, jobKey = "lk.room_id", "lk.job_id"
		}
		sendSpans(t, d, []attribute.KeyValue{attribute.String(roomKey, s.room), attribute.String(jobKey, s.job)},
			"agent_turn", attribute.Float64("lk.e2e_latency", 0.912), attribute.Bool("lk.interrupted", false))
	}
	testenv.WaitFor(t, settleWait, "both scorecards", func() bool { return len(results(t, d.NATSURL())) == 2 })
	cards := map[string]session.Scorecard{}
	for _, c := range results(t, d.NATSURL()) {
		cards[c.Session.RoomID] = c
	}
	oldC, newC := cards["RM_OldNames"], cards["RM_NewNames"]
	if newC.Completion.CloseReason != "CR_USER_INITIATED" || newC.Session.AgentName != "names-agent" || newC.Spans == nil ||
		!newC.Spans.E2ELatencyP50.Set {
		t.Errorf("renamed attributes: close reason %s, agent %q", newC.Completion.CloseReason, newC.Session.AgentName)
	}
	strip := func(c session.Scorecard) string { // the same card but for the session's ids
		b, _ := json.Marshal(c)
		return strings.NewReplacer("RM_OldNames", "RM_x", "RM_NewNames", "RM_x").Replace(string(b))
	}
	if strip(oldC) != strip(newC) {
		t.Errorf("the scorecards differ beyond the session:\nold %s\nnew %s", strip(oldC), strip(newC))
	}
}

// sendSpans exports one span named name, with attrs, through the official
// OpenTelemetry Go exporter (protobuf, gzip, as the Python SDK sends), its
// resource carrying session (the session's room and job attributes).
func sendSpans(t *testing.T, d *Daemon, session []attribute.KeyValue, name string, attrs ...attribute.KeyValue) {
	t.Helper()
	ctx := context.Background()
	exp, err := otlptracehttp.New(ctx, otlptracehttp.WithEndpointURL("http://"+d.IngestAddr()+"/observability/traces/otlp/v0"),
		otlptracehttp.WithCompression(otlptracehttp.GzipCompression),
		otlptracehttp.WithHeaders(map[string]string{"Authorization": testenv.Bearer(testenv.PythonToken(t, testenv.Key, testenv.Secret, true))}))
	if err != nil {
		t.Fatal(err)
	}
	res := resource.NewWithAttributes(semconv.SchemaURL, append(session, semconv.ServiceName("livekit-agents"), semconv.TelemetrySDKLanguagePython)...)
	tp := sdktrace.NewTracerProvider(sdktrace.WithResource(res), sdktrace.WithSyncer(exp))
	_, span := tp.Tracer("livekit-agents").Start(ctx, name)
	span.SetAttributes(attrs...)
	span.End()
	if err := tp.Shutdown(ctx); err != nil {
		t.Fatalf("trace export: %v", err)
	}
}
