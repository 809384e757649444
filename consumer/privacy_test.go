package consumer

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/livekit/protocol/livekit"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"

	"github.com/lkscore/lkscore/internal/testenv"
	"github.com/lkscore/lkscore/recording"
	"github.com/lkscore/lkscore/store"
)

// TestMetadataOnly: with privacy.mode metadata_only, a scored session's
// chat history and audio are gone from the store (local and S3), its header
// stays, and its facts say why.
func TestMetadataOnly(t *testing.T) {
	for _, kind := range []string{"local", "s3"} {
		t.Run(kind, func(t *testing.T) {
			ns := startNATS(t)
			cfg := pipelineConfig(t, ns.URL())
			cfg.Privacy.Mode = "metadata_only"
			var st interface {
				recording.ObjectReader
			}
			if kind == "s3" {
				srv := testenv.StartS3(t)
				testenv.SetAWSEnv(t, testenv.S3SecretKey)
				st = testenv.OpenBucket(t, srv, "rec", store.NewS3)
				cfg.S3 = srv.Config("rec")
			}
			d, reg := startDaemon(t, cfg)
			if kind == "local" {
				st, _ = store.OpenLocalDir(filepath.Join(cfg.DataDir, "recordings"))
			}
			dir := t.TempDir()
			writeScenarioCopy(t, dir, "1_clean_call", "RM_Meta", "AJ_Meta", `{"close_reason":"CR_USER_INITIATED"}`)
			uploadDir(t, d, dir)
			sendWebhook(t, d, jobEnded("EV_meta", "RM_Meta", "AJ_Meta", "meta-agent", livekit.JobStatus_JS_SUCCESS))
			testenv.WaitFor(t, settleWait, "the scorecard", func() bool { return len(streamMsgs(t, ns.URL(), "LKSCORE_RESULTS")) == 1 })
			testenv.WaitFor(t, settleWait, "the content dropped", func() bool {
				f := readFacts(t, ns.URL(), "RM_Meta", "AJ_Meta")
				return f != nil && f.ContentDroppedAt != nil
			})
			ctx := context.Background()
			for name, want := range map[string]bool{recording.ObjectHeader: true, recording.ObjectChatHistory: false, recording.ObjectAudio: false} {
				rc, err := st.Open(ctx, "RM_Meta/AJ_Meta/"+name, 1<<30)
				if err == nil {
					_ = rc.Close()
				}
				if (err == nil) != want {
					t.Errorf("%s in the store: %v, want %v", name, err == nil, want)
				}
			}
			if v := counter(t, reg, "lkscore_recordings_deleted_total", map[string]string{"reason": "metadata_only"}); v != 1 {
				t.Errorf("deletions counted %v", v)
			}
			js := testenv.JetStream(t, ns.URL())
			rs, _ := js.Stream(ctx, "LKSCORE_RESULTS")
			if info, err := rs.Info(ctx); err != nil || info.Config.MaxAge != cfg.Retention.Results {
				t.Errorf("results stream MaxAge: %v, want retention.results %s", err, cfg.Retention.Results)
			}
		})
	}
}

// TestRedactionMarkers plants a unique marker in every free-text field of a
// redacted session (what the user and the agent said, tool arguments and
// outputs, instructions, webhook metadata and attributes, a job error, OTLP
// log fields) and checks that none of them appears anywhere lkscore writes:
// every NATS stream (KV buckets included), its logs (at debug level), and
// its HTTP answers (ingest and dashboard). A control session without
// redaction shows that the scan does find a marker that leaks.
func TestRedactionMarkers(t *testing.T) {
	t.Parallel()
	ns := startNATS(t)
	cfg := pipelineConfig(t, ns.URL())
	cfg.Pipeline.RecordingDeadline = time.Second
	d, _, logs := startDaemonLogging(t, cfg, slog.LevelDebug)

	var answers strings.Builder // every HTTP answer lkscore gave
	markers := map[string]string{}
	mark := func(field string) string {
		m := fmt.Sprintf("MRK%s%d", strings.ReplaceAll(field, "_", ""), len(markers))
		markers[field] = m
		return m
	}
	chat := func(prefix string) []byte {
		items := []map[string]any{
			{"id": "i1", "type": "agent_config_update", "instructions": prefix + mark("instructions"), "created_at": 1764417600.0},
			{"id": "i2", "type": "message", "role": "assistant", "content": []string{prefix + mark("agent_text")}, "interrupted": false, "created_at": 1764417601.0},
			{"id": "i3", "type": "message", "role": "user", "content": []string{prefix + mark("user_text")}, "interrupted": false, "created_at": 1764417603.0},
			{"id": "i4", "type": "function_call", "call_id": "c1", "name": "lookup", "arguments": `{"q":"` + prefix + mark("tool_args") + `"}`, "created_at": 1764417604.0},
			{"id": "i5", "type": "function_call_output", "call_id": "c1", "name": "lookup", "output": "timeout for " + prefix + mark("tool_output"), "is_error": true, "created_at": 1764417605.0},
			{"id": "i6", "type": "message", "role": "assistant", "content": []string{prefix + mark("agent_text2")}, "interrupted": true, "created_at": 1764417606.0},
		}
		b, _ := json.Marshal(map[string]any{"items": items})
		return b
	}
	send := func(room, job, prefix string, redacted bool) {
		header, _ := proto.Marshal(&livekit.MetricsRecordingHeader{RoomId: room, JobId: job, RedactionEnabled: redacted})
		body, ct := testenv.PythonUpload(t, testenv.FullParts(header, chat(prefix), nil)[:2])
		resp, msg := post(t, "http://"+d.IngestAddr()+"/observability/recordings/v0", testenv.Bearer(testenv.PythonToken(t, testenv.Key, testenv.Secret, true)), ct, bytes.NewReader(body))
		answers.WriteString(msg)
		if resp.StatusCode != 200 {
			t.Fatalf("upload: %d %s", resp.StatusCode, msg)
		}
		ev := &livekit.WebhookEvent{Event: "agent_job_ended", Id: "EV_" + job, Room: &livekit.Room{Sid: room, Metadata: prefix + mark("room_metadata")},
			Job: &livekit.Job{Id: job, AgentName: "red-agent", EnableRedaction: redacted, Metadata: prefix + mark("job_metadata"),
				Attributes:  map[string]string{"caller": prefix + mark("job_attribute")},
				Room:        &livekit.Room{Sid: room, Metadata: prefix + mark("job_room_metadata")},
				Participant: &livekit.ParticipantInfo{Identity: "caller", Name: prefix + mark("participant_name"), Metadata: prefix + mark("participant_metadata")},
				State:       &livekit.JobState{Status: livekit.JobStatus_JS_FAILED, Error: prefix + mark("job_error")}}}
		wb, _ := protojson.Marshal(ev)
		resp, msg = post(t, "http://"+d.IngestAddr()+"/webhook", testenv.SignWebhook(t, testenv.Key, testenv.Secret, wb, 5*time.Minute), "application/webhook+json", bytes.NewReader(wb))
		answers.WriteString(msg)
		if resp.StatusCode != 200 {
			t.Fatalf("webhook: %d %s", resp.StatusCode, msg)
		}
		logsBody := testenv.JSLogs(room, job, "red-agent",
			map[string]any{"msg": "AgentSession closed", "reason": "error", "error": prefix + mark("otlp_error")},
			map[string]any{"msg": "user said something", "transcript": prefix + mark("otlp_field")})
		r, msg := postOTLP(t, d, "logs", "application/json", logsBody, nil)
		answers.WriteString(msg)
		if r.StatusCode != 200 {
			t.Fatalf("otlp: %d %s", r.StatusCode, msg)
		}
	}
	send("RM_Red", "AJ_Red", "", true)
	// A redacted job whose recording never comes: its webhook ends in the DLQ.
	lost := &livekit.WebhookEvent{Event: "agent_job_ended", Id: "EV_lost", Job: &livekit.Job{Id: "AJ_Lost", EnableRedaction: true,
		Metadata: mark("lost_job_metadata"), Room: &livekit.Room{Sid: "RM_Lost", Metadata: mark("lost_room_metadata")},
		State: &livekit.JobState{Status: livekit.JobStatus_JS_FAILED, Error: mark("lost_job_error")}}}
	lb, _ := protojson.Marshal(lost)
	if resp, msg := post(t, "http://"+d.IngestAddr()+"/webhook", testenv.SignWebhook(t, testenv.Key, testenv.Secret, lb, 5*time.Minute), "application/webhook+json", bytes.NewReader(lb)); resp.StatusCode != 200 {
		t.Fatalf("webhook: %d %s", resp.StatusCode, msg)
	}
	redacted := maps.Clone(markers)
	send("RM_Open", "AJ_Open", "open", false) // the control
	testenv.WaitFor(t, settleWait, "both scorecards", func() bool { return len(streamMsgs(t, ns.URL(), "LKSCORE_RESULTS")) == 2 })
	testenv.WaitFor(t, settleWait, "the lost job's dead letter", func() bool { return len(streamMsgs(t, ns.URL(), "LKSCORE_DLQ")) == 1 })
	quiesce(t, ns.URL(), defaultConsumers)

	// The dashboard's pages for the redacted session.
	ops := "http://" + d.OpsAddr()
	testenv.WaitFor(t, settleWait, "the dashboard index", func() bool {
		resp, err := http.Get(ops + "/ui/sessions")
		if err != nil {
			return false
		}
		b, _ := io.ReadAll(resp.Body)
		_ = resp.Body.Close()
		return strings.Contains(string(b), "RM_Red/AJ_Red")
	})
	for _, path := range []string{"/ui", "/ui/sessions", "/ui/session?key=RM_Red/AJ_Red",
		"/ui/recording?key=RM_Red/AJ_Red&object=chat_history.json", "/ui/recording?key=RM_Red/AJ_Red&object=recording.ogg"} {
		resp, err := http.Get(ops + path)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		_ = resp.Body.Close()
		answers.Write(b)
		if strings.HasPrefix(path, "/ui/session?") && (strings.Contains(string(b), "<audio") || !strings.Contains(string(b), "the session is redacted: its audio is not served")) {
			t.Errorf("the redacted session's page offers its audio or does not say why not")
		}
		if strings.HasPrefix(path, "/ui/recording") && resp.StatusCode != http.StatusNotFound {
			t.Errorf("%s: %d, want 404 for a redacted session", path, resp.StatusCode)
		}
	}

	// Everything lkscore wrote.
	var written strings.Builder
	written.WriteString(logs.String())
	written.WriteString(answers.String())
	stored, streams := storedStreams(t, ns.URL())
	written.WriteString(stored)
	if streams < 7 { // WEBHOOKS, UPLOADS, SESSIONS, RESULTS, DLQ and two KV buckets
		t.Errorf("scanned %d streams", streams)
	}
	all := written.String()
	for field, m := range redacted {
		if strings.Contains(all, m) {
			i := strings.Index(all, m)
			t.Errorf("redacted %s (%s) leaked: …%s…", field, m, all[max(0, i-200):min(len(all), i+50)])
		}
	}
	// The control proves the scan sees a leak: the unredacted session's
	// finding quotes its tool output.
	if !strings.Contains(all, markers["tool_output"]) {
		t.Error("the control session's tool output is not in its scorecard: the scan proves nothing")
	}
	// And the markers were planted: the redacted upload is in the store.
	b, err := os.ReadFile(filepath.Join(cfg.DataDir, "recordings", "RM_Red", "AJ_Red", recording.ObjectChatHistory))
	if err != nil || !strings.Contains(string(b), redacted["user_text"]) {
		t.Errorf("the redacted upload was not stored: %v", err)
	}
}
