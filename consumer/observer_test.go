package consumer

import (
	"bytes"
	"compress/gzip"
	"slices"
	"testing"
	"time"

	"github.com/livekit/protocol/livekit"
	collogs "go.opentelemetry.io/proto/otlp/collector/logs/v1"
	common "go.opentelemetry.io/proto/otlp/common/v1"
	logspb "go.opentelemetry.io/proto/otlp/logs/v1"
	resourcepb "go.opentelemetry.io/proto/otlp/resource/v1"
	"google.golang.org/protobuf/proto"

	"github.com/lkscore/lkscore/consumer/internal/facts"
	"github.com/lkscore/lkscore/internal/testenv"
)

// pythonObserverRecord is the OTLP request the Python SDK sends for the
// observer's record (examples/agents-python/observe_lkscore.py), built from
// livekit/agents telemetry/traces.py: the resource is service.name
// livekit-agents plus room_id, job_id and lk.agent_name; OpenTelemetry's
// LoggingHandler names the scope after the logger ("livekit.agents") and
// turns every key of the record's extra into an attribute, next to the code
// location; _MetadataLogProcessor adds the session metadata and logger.name.
// It goes out as protobuf, gzip-compressed.
func pythonObserverRecord(t *testing.T, roomID, jobID string) []byte {
	t.Helper()
	meta := []*common.KeyValue{testenv.StrKV("room_id", roomID), testenv.StrKV("job_id", jobID), testenv.StrKV("lk.agent_name", "py-agent")}
	req := &collogs.ExportLogsServiceRequest{ResourceLogs: []*logspb.ResourceLogs{{
		Resource: &resourcepb.Resource{Attributes: append([]*common.KeyValue{
			testenv.StrKV("telemetry.sdk.language", "python"), testenv.StrKV("telemetry.sdk.name", "opentelemetry"),
			testenv.StrKV("telemetry.sdk.version", "1.39.1"), testenv.StrKV("service.name", "livekit-agents")}, meta...)},
		ScopeLogs: []*logspb.ScopeLogs{{
			Scope: &common.InstrumentationScope{Name: "livekit.agents"},
			LogRecords: []*logspb.LogRecord{{
				TimeUnixNano: uint64(time.Now().UnixNano()), ObservedTimeUnixNano: uint64(time.Now().UnixNano()),
				SeverityNumber: logspb.SeverityNumber_SEVERITY_NUMBER_INFO, SeverityText: "INFO",
				Body: &common.AnyValue{Value: &common.AnyValue_StringValue{StringValue: "lkscore session closed"}},
				Attributes: append([]*common.KeyValue{
					testenv.StrKV("lk.close_reason", "error"), testenv.StrKV("lk.close_error", "APIConnectionError: tts timed out"),
					testenv.StrKV("lk.agent_name", "py-agent"), testenv.StrKV("lkscore.agent_version", "2.0.1"),
					testenv.StrKV("code.file.path", "/app/observe_lkscore.py"), testenv.StrKV("code.function.name", "_on_close"),
					testenv.IntKV("code.line.number", 41), testenv.StrKV("logger.name", "livekit.agents")}, meta...),
			}},
		}},
	}}}
	pb, err := proto.Marshal(req)
	if err != nil {
		t.Fatal(err)
	}
	var gz bytes.Buffer
	zw := gzip.NewWriter(&gz)
	_, _ = zw.Write(pb)
	_ = zw.Close()
	return gz.Bytes()
}

// TestPythonObserverRecord: the Python observer's record, in the shape the
// Python SDK's OTLP handler sends it, gives the session its close reason
// (source otlp_log, with the close error as evidence), agent name and version
// tag; on a self-hosted server, with the room's webhooks only.
func TestPythonObserverRecord(t *testing.T) {
	t.Parallel()
	ns := testenv.StartNATS(t)
	d, _ := startDaemon(t, pipelineConfig(t, ns.URL()))
	resp, msg := postOTLP(t, d, "logs", "application/x-protobuf", pythonObserverRecord(t, "RM_PyObs", "AJ_PyObs"),
		map[string]string{"Content-Encoding": "gzip"})
	if resp.StatusCode != 200 {
		t.Fatalf("otlp: %d %s", resp.StatusCode, msg)
	}
	dir := t.TempDir()
	writeScenarioCopy(t, dir, "1_clean_call", "RM_PyObs", "AJ_PyObs", "")
	uploadDir(t, d, dir)
	now := time.Now().Unix()
	sendWebhook(t, d, testenv.ParticipantLeft("EV_po1", "RM_PyObs", "agent-AJ_PyObs", livekit.ParticipantInfo_AGENT, livekit.DisconnectReason_CLIENT_INITIATED, now))
	sendWebhook(t, d, testenv.ParticipantLeft("EV_po2", "RM_PyObs", "caller", livekit.ParticipantInfo_SIP, livekit.DisconnectReason_CLIENT_INITIATED, now))
	sendWebhook(t, d, testenv.RoomFinished("EV_po3", "RM_PyObs", livekit.RoomEndReason_ROOM_END_IDLE_TIMEOUT))
	testenv.WaitFor(t, settleWait, "the scorecard", func() bool { return len(streamMsgs(t, ns.URL(), "LKSCORE_RESULTS")) == 1 })
	c := results(t, ns.URL())[0]
	if c.Completion.CloseReason != "CR_ERROR" || c.Completion.CloseReasonSource != facts.SourceOTLPLog ||
		c.Completion.CloseReasonEvidence != "otlp_log: lk.close_reason=error lk.close_error=APIConnectionError: tts timed out" ||
		c.Session.AgentName != "py-agent" || !slices.Contains(c.Session.Tags, "version:2.0.1") || c.Session.EndedBy != facts.RoleAgent ||
		c.Session.SDK == nil || c.Session.SDK.Language != "python" || c.Overall.Verdict != "fail" {
		t.Fatalf("scorecard session %+v completion %+v overall %+v", c.Session, c.Completion, c.Overall)
	}
}
