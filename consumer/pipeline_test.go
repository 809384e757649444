package consumer

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/livekit/protocol/livekit"
	"github.com/livekit/protocol/utils/protojson"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/lkscore/lkscore/config"
	"github.com/lkscore/lkscore/consumer/broker"
	"github.com/lkscore/lkscore/consumer/internal/facts"
	"github.com/lkscore/lkscore/internal/testenv"
	"github.com/lkscore/lkscore/recording"
	"github.com/lkscore/lkscore/session"
	"github.com/lkscore/lkscore/wire"
)

const scenarioDir = "../scenarios/data/"

// pipelineConfig is testConfig with retries fast enough for tests.
func pipelineConfig(t testing.TB, url string) config.Config {
	cfg := testConfig(t, url)
	cfg.Pipeline.RetryBase = 100 * time.Millisecond
	cfg.Pipeline.AckWait = 5 * time.Second
	// Sessions without a named close reason settle after this; the tests'
	// scenarios carry one in their summary, others wait it out.
	cfg.Pipeline.SettleWindow = 500 * time.Millisecond
	// Sessions whose room's participants left do not wait for room_finished
	// unless a test says so (TestRoomFinishedAwaited).
	cfg.Pipeline.RoomFinishedWait = 0
	return cfg
}

// uploadScenario posts a scenario's recording exactly as the Python SDK would.
func uploadScenario(t *testing.T, d *Daemon, name string, chat []byte) {
	t.Helper()
	header := mustReadFile(t, filepath.Join(scenarioDir, name, "header.binpb"))
	if chat == nil {
		chat = mustReadFile(t, filepath.Join(scenarioDir, name, "chat_history.json"))
	}
	body, ct := testenv.PythonUpload(t, testenv.FullParts(header, chat, nil)[:2])
	resp, msg := post(t, "http://"+d.IngestAddr()+"/observability/recordings/v0", testenv.Bearer(testenv.PythonToken(t, testenv.Key, testenv.Secret, true)), ct, bytes.NewReader(body))
	if resp.StatusCode != 200 {
		t.Fatalf("upload %s: %d %s", name, resp.StatusCode, msg)
	}
}

// sendWebhook signs and posts an event exactly as LiveKit's notifier does.
func sendWebhook(t *testing.T, d *Daemon, ev *livekit.WebhookEvent) {
	t.Helper()
	body, err := protojson.Marshal(ev)
	if err != nil {
		t.Fatal(err)
	}
	resp, msg := post(t, "http://"+d.IngestAddr()+"/webhook", testenv.SignWebhook(t, testenv.Key, testenv.Secret, body, 5*time.Minute), "application/webhook+json", bytes.NewReader(body))
	if resp.StatusCode != 200 {
		t.Fatalf("webhook %s: %d %s", ev.Event, resp.StatusCode, msg)
	}
}

func jobEnded(id, roomSid, jobID, agent string, status livekit.JobStatus) *livekit.WebhookEvent {
	return &livekit.WebhookEvent{Event: "agent_job_ended", Id: id, CreatedAt: time.Now().Unix(),
		Job: &livekit.Job{Id: jobID, AgentName: agent, Room: &livekit.Room{Sid: roomSid, Name: "room-" + roomSid},
			State: &livekit.JobState{Status: status}}}
}

// quiesce waits until every pipeline consumer has nothing pending or unacked,
// five polls in a row: the server updates a consumer's pending count
// asynchronously after a store, so one idle-looking poll can come too early.
func quiesce(t *testing.T, url string, consumers map[string]string) {
	t.Helper()
	nc, err := nats.Connect(url)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, _ := jetstream.New(nc)
	idle := 0
	testenv.WaitFor(t, settleWait, "the pipeline to settle", func() bool {
		if !factsSettled(t, js) {
			idle = 0
			return false
		}
		for cons, stream := range consumers {
			info, err := js.Consumer(context.Background(), stream, cons)
			if err != nil {
				idle = 0
				return false
			}
			ci, err := info.Info(context.Background())
			if err != nil || ci.NumPending > 0 || ci.NumAckPending > 0 {
				idle = 0
				return false
			}
		}
		idle++
		return idle >= 5
	})
}

// factsSettled reports whether every session whose recording was found has
// had its work published.
func factsSettled(t *testing.T, js jetstream.JetStream) bool {
	kv, err := js.KeyValue(context.Background(), "LKSCORE_SESSION_FACTS")
	if err != nil {
		return false
	}
	lister, err := kv.ListKeys(context.Background())
	if err != nil {
		return false
	}
	for k := range lister.Keys() {
		if facts.IsInternalKey(k) { // the settlers' low-water mark, the retention sweep's time
			continue
		}
		e, err := kv.Get(context.Background(), k)
		if err != nil {
			return false
		}
		var f facts.SessionFacts
		if err := json.Unmarshal(e.Value(), &f); err != nil {
			t.Fatalf("facts %s: %v", k, err)
		}
		if f.Recording != nil && f.PublishedAt == nil {
			return false
		}
	}
	return true
}

var defaultConsumers = map[string]string{
	wire.LocatorWebhooks: "LKSCORE_WEBHOOKS", wire.LocatorUploads: "LKSCORE_UPLOADS", wire.ScoreConsumer("default"): "LKSCORE_SESSIONS",
}

func results(t *testing.T, url string) []session.Scorecard {
	t.Helper()
	var out []session.Scorecard
	for _, m := range streamMsgs(t, url, "LKSCORE_RESULTS") {
		var sc session.Scorecard
		if err := json.Unmarshal(m.Data, &sc); err != nil {
			t.Fatalf("result is not a scorecard: %v", err)
		}
		if m.Header.Get(jetstream.MsgIDHeader) != sc.Session.Key+"@"+sc.ScoringVersion || m.Header.Get(wire.HeaderVerdict) != sc.Overall.Verdict ||
			m.Subject != "lkscore.result."+sc.Completion.CloseReason || m.Header.Get(wire.HeaderScoringVersion) != sc.ScoringVersion {
			t.Errorf("result %s: subject %s, headers %v", sc.Session.Key, m.Subject, m.Header)
		}
		out = append(out, sc)
	}
	return out
}

// TestPipelineEndToEnd: uploads and webhooks, duplicated and in both
// orders, give exactly one scorecard per session, identical to the golden.
func TestPipelineEndToEnd(t *testing.T) {
	t.Parallel()
	ns := startNATS(t)
	d, reg := startDaemon(t, pipelineConfig(t, ns.URL()))
	// Webhook first, then the upload (the locator waits for it), twice each.
	sendWebhook(t, d, jobEnded("EV_job1", "RM_CleanCall01", "AJ_CleanCall01", "booking-agent", livekit.JobStatus_JS_SUCCESS))
	uploadScenario(t, d, "1_clean_call", nil)
	uploadScenario(t, d, "1_clean_call", nil)
	sendWebhook(t, d, jobEnded("EV_job2", "RM_CleanCall01", "AJ_CleanCall01", "booking-agent", livekit.JobStatus_JS_SUCCESS))
	// Upload first for the second session, then room_finished.
	uploadScenario(t, d, "4_tool_trouble", nil)
	sendWebhook(t, d, &livekit.WebhookEvent{Event: "room_finished", Id: "EV_room4", Room: &livekit.Room{Sid: "RM_ToolTrouble04", Name: "r4"}})

	testenv.WaitFor(t, settleWait, "two scorecards", func() bool { return len(streamMsgs(t, ns.URL(), "LKSCORE_RESULTS")) >= 2 })
	quiesce(t, ns.URL(), defaultConsumers)
	cards := results(t, ns.URL())
	if len(cards) != 2 {
		t.Fatalf("%d scorecards, want exactly 2", len(cards))
	}
	for _, sc := range cards {
		name := map[string]string{"RM_CleanCall01/AJ_CleanCall01": "1_clean_call", "RM_ToolTrouble04/AJ_ToolTrouble04": "4_tool_trouble"}[sc.Session.Key]
		var want session.Scorecard
		_ = json.Unmarshal(mustReadFile(t, filepath.Join(scenarioDir, name, "scorecard.golden.json")), &want)
		if fmt.Sprint(sc.Overall) != fmt.Sprint(want.Overall) || fmt.Sprint(sc.Components) != fmt.Sprint(want.Components) || sc.ScoringVersion != want.ScoringVersion {
			t.Errorf("%s: pipeline scorecard differs from the golden: %+v", name, sc.Overall)
		}
		if !strings.HasPrefix(sc.Session.Source, "file://") {
			t.Errorf("source %q does not point back at the recording", sc.Session.Source)
		}
	}
	if v := counter(t, reg, "lkscore_pipeline_dead_lettered_total", nil); v != 0 {
		t.Errorf("%v dead letters", v)
	}
	// Each session's steps are on /metrics: the clean call was complete
	// (summary, recording, job ended: ready_to_located), the other settled
	// after room_finished (due_to_located); both were scored and stored.
	for step, want := range map[string]uint64{"ready_to_located": 1, "due_to_located": 1, "located_to_scored": 2, "scored_to_stored": 2} {
		if n := stepCount(t, reg, step); n != want {
			t.Errorf("lkscore_session_step_seconds{step=%q}: %d sessions, want %d", step, n, want)
		}
	}
	// And on the dashboard's pipeline view.
	resp, err := http.Get("http://" + d.OpsAddr() + "/ui")
	if err != nil {
		t.Fatal(err)
	}
	page, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	for _, step := range []string{"ready_to_located", "located_to_scored"} {
		if !strings.Contains(string(page), `<tr class="step"><td>`+step+`</td>`) {
			t.Errorf("the dashboard's pipeline view does not show %s", step)
		}
	}
}

// stepCount is how many sessions lkscore_session_step_seconds counted for a step.
func stepCount(t *testing.T, reg *prometheus.Registry, step string) uint64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var n uint64
	for _, mf := range mfs {
		if mf.GetName() == "lkscore_session_step_seconds" {
			for _, m := range mf.GetMetric() {
				if labelsMatch(m, map[string]string{"step": step}) {
					n += m.GetHistogram().GetSampleCount()
				}
			}
		}
	}
	return n
}

// TestPipelineCloseReasonFilter: a session no pool selects stays in the
// session stream; a pool added later for its reason scores the backlog.
func TestPipelineCloseReasonFilter(t *testing.T) {
	t.Parallel()
	ns := startNATS(t)
	cfg := pipelineConfig(t, ns.URL())
	d, reg := startDaemon(t, cfg) // default pool: everything but CR_JOB_SHUTDOWN
	dir := t.TempDir()
	writeScenarioCopy(t, dir, "1_clean_call", "RM_Shutdown01", "AJ_Shutdown01", `{"close_reason":"job_shutdown"}`)
	uploadDir(t, d, dir)
	quiesce(t, ns.URL(), defaultConsumers)
	if n := len(streamMsgs(t, ns.URL(), "LKSCORE_RESULTS")); n != 0 {
		t.Fatalf("%d scorecards for an unselected close reason", n)
	}
	sessions := streamMsgs(t, ns.URL(), "LKSCORE_SESSIONS")
	if len(sessions) != 1 || sessions[0].Subject != "lkscore.session.CR_JOB_SHUTDOWN" {
		t.Fatalf("session stream: %d messages", len(sessions))
	}
	for _, name := range []string{"lkscore_sessions_published_total", "lkscore_sessions_located_total"} { // the old name until 0.3
		if v := counter(t, reg, name, map[string]string{"close_reason": "CR_JOB_SHUTDOWN", "selected": "false"}); v != 1 {
			t.Errorf("%s: unselected sessions counted %v", name, v)
		}
	}

	// A second pool for shutdowns, as a worker-only deployment.
	wcfg := pipelineConfig(t, ns.URL())
	wcfg.Role, wcfg.Pipeline.Pool, wcfg.Pipeline.CloseReasons = "worker", "shutdowns", []string{"CR_JOB_SHUTDOWN"}
	wcfg.DataDir = cfg.DataDir // the same local store
	startDaemon(t, wcfg)
	testenv.WaitFor(t, settleWait, "the backlog to be scored", func() bool { return len(streamMsgs(t, ns.URL(), "LKSCORE_RESULTS")) == 1 })
	cards := results(t, ns.URL())
	if cards[0].Completion.CloseReason != "CR_JOB_SHUTDOWN" {
		t.Fatalf("scored %s", cards[0].Completion.CloseReason)
	}
}

// writeScenarioCopy writes a scenario's recording under new ids and summary.
func writeScenarioCopy(t *testing.T, dir, name, roomID, jobID, summary string) {
	t.Helper()
	header := testenv.HeaderWithSummary(t, roomID, jobID, summary)
	_ = os.WriteFile(filepath.Join(dir, "header.binpb"), header, 0o644)
	_ = os.WriteFile(filepath.Join(dir, "chat_history.json"), mustReadFile(t, filepath.Join(scenarioDir, name, "chat_history.json")), 0o644)
}

func uploadDir(t *testing.T, d *Daemon, dir string) {
	t.Helper()
	body, ct := testenv.PythonUpload(t, testenv.FullParts(mustReadFile(t, filepath.Join(dir, "header.binpb")), mustReadFile(t, filepath.Join(dir, "chat_history.json")), nil)[:2])
	resp, msg := post(t, "http://"+d.IngestAddr()+"/observability/recordings/v0", testenv.Bearer(testenv.PythonToken(t, testenv.Key, testenv.Secret, true)), ct, bytes.NewReader(body))
	if resp.StatusCode != 200 {
		t.Fatalf("upload: %d %s", resp.StatusCode, msg)
	}
}

// TestPipelineDeadLetters: a job whose recording never arrives, and a
// malformed recording, end in the DLQ with the reason; a replay after the
// fix scores the session.
func TestPipelineDeadLetters(t *testing.T) {
	t.Parallel()
	ns := startNATS(t)
	cfg := pipelineConfig(t, ns.URL())
	cfg.Pipeline.RecordingDeadline = 1500 * time.Millisecond
	d, _ := startDaemon(t, cfg)

	sendWebhook(t, d, jobEnded("EV_lost", "RM_Lost", "AJ_Lost", "a", livekit.JobStatus_JS_SUCCESS))
	uploadScenario(t, d, "2_slow_agent", []byte(`{"items": [{"id": "x", "type": "message", "role": "user", "content": ["hi"]}`))

	nc, _ := nats.Connect(ns.URL())
	defer nc.Close()
	js, _ := jetstream.New(nc)
	admin := broker.NewDeadLetterAdmin(js, wire.NewSubjects("lkscore.", "LKSCORE"))
	var dls []wire.DeadLetter
	testenv.WaitFor(t, settleWait, "two dead letters", func() bool {
		dls, _ = admin.List(context.Background(), "", 10)
		return len(dls) == 2
	})
	byStage := map[string]wire.DeadLetter{}
	for _, dl := range dls {
		byStage[dl.Stage] = dl
	}
	if l := byStage[wire.StageLocate]; !strings.Contains(l.Error, "recording not found") || l.Subject != "lkscore.webhook.agent_job_ended" || l.Deliveries < 2 {
		t.Errorf("locate dead letter %+v", l)
	}
	s := byStage[wire.StageScore]
	if !strings.Contains(s.Error, "chat_history") || s.Deliveries != 1 || s.SessionKey != "RM_SlowAgent02/AJ_SlowAgent02" {
		t.Errorf("score dead letter %+v: a malformed recording must be dead-lettered at once", s)
	}
	if n := len(streamMsgs(t, ns.URL(), "LKSCORE_RESULTS")); n != 0 {
		t.Fatalf("%d scorecards", n)
	}

	// Fix the recording in the store, then re-drive the dead letter.
	fixed := mustReadFile(t, filepath.Join(scenarioDir, "2_slow_agent", "chat_history.json"))
	if err := os.WriteFile(filepath.Join(cfg.DataDir, "recordings", "RM_SlowAgent02", "AJ_SlowAgent02", "chat_history.json"), fixed, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := admin.Replay(context.Background(), s.Seq); err != nil {
		t.Fatal(err)
	}
	testenv.WaitFor(t, settleWait, "the replayed session to be scored", func() bool { return len(streamMsgs(t, ns.URL(), "LKSCORE_RESULTS")) == 1 })
	if left, _ := admin.List(context.Background(), wire.StageScore, 10); len(left) != 0 {
		t.Errorf("replayed dead letter still listed: %+v", left)
	}
}

// TestPipelineInferredCloseReason: with no session summary, a failed job's
// end state stands in for the close reason, and the scorecard says so.
func TestPipelineInferredCloseReason(t *testing.T) {
	t.Parallel()
	ns := startNATS(t)
	cfg := pipelineConfig(t, ns.URL())
	// The recording is in the store but was never announced: only the
	// webhook locates it.
	dir := filepath.Join(cfg.DataDir, "recordings", "RM_Inferred", "AJ_Inferred")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	writeScenarioCopy(t, dir, "1_clean_call", "RM_Inferred", "AJ_Inferred", "")
	d, _ := startDaemon(t, cfg)
	sendWebhook(t, d, jobEnded("EV_fail", "RM_Inferred", "AJ_Inferred", "agent-x", livekit.JobStatus_JS_FAILED))
	testenv.WaitFor(t, settleWait, "a scorecard", func() bool { return len(streamMsgs(t, ns.URL(), "LKSCORE_RESULTS")) == 1 })
	sessions := streamMsgs(t, ns.URL(), "LKSCORE_SESSIONS")
	if len(sessions) != 1 || sessions[0].Subject != "lkscore.session.CR_ERROR" {
		t.Fatalf("session messages: %d", len(sessions))
	}
	cards := results(t, ns.URL())
	if c := cards[0]; c.Completion.CloseReason != "CR_ERROR" || c.Completion.CloseReasonSource != "job_status" || c.Session.AgentName != "agent-x" || c.Overall.Verdict != session.Fail {
		t.Fatalf("scorecard %+v %+v", c.Completion, c.Session)
	}
}

// TestPipelineLegacyUploadMatchesJob: an upload from an SDK before 1.6.6
// (no job_id) is still matched by its room's agent_job_ended.
func TestPipelineLegacyUploadMatchesJob(t *testing.T) {
	t.Parallel()
	ns := startNATS(t)
	cfg := pipelineConfig(t, ns.URL())
	cfg.Pipeline.RecordingDeadline = 2 * time.Second
	header := testenv.HeaderWithSummary(t, "RM_Legacy", "", `{"close_reason":"CR_COMPLETED"}`)
	key := recording.SessionKey("RM_Legacy", "", header)
	dir := filepath.Join(cfg.DataDir, "recordings", filepath.FromSlash(key))
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	_ = os.WriteFile(filepath.Join(dir, "chat_history.json"), mustReadFile(t, filepath.Join(scenarioDir, "1_clean_call", "chat_history.json")), 0o644)
	_ = os.WriteFile(filepath.Join(dir, "header.binpb"), header, 0o644)
	d, _ := startDaemon(t, cfg)
	sendWebhook(t, d, jobEnded("EV_legacy", "RM_Legacy", "AJ_Unknown", "legacy-agent", livekit.JobStatus_JS_SUCCESS))
	testenv.WaitFor(t, settleWait, "the legacy session to be scored", func() bool { return len(streamMsgs(t, ns.URL(), "LKSCORE_RESULTS")) == 1 })
	quiesce(t, ns.URL(), defaultConsumers)
	if c := results(t, ns.URL())[0]; c.Session.Key != key || c.Session.AgentName != "legacy-agent" {
		t.Fatalf("scorecard session %+v", c.Session)
	}
	if n := len(streamMsgs(t, ns.URL(), "LKSCORE_DLQ")); n != 0 {
		t.Fatalf("%d dead letters", n)
	}
}

func TestPipelineStopWaitsForLoops(t *testing.T) {
	t.Parallel()
	bg, cancel := context.WithCancel(context.Background())
	p := &pipeline{cancel: func() {}, background: cancel}
	finished := make(chan struct{})
	p.goLoop(func() {
		<-bg.Done()
		time.Sleep(100 * time.Millisecond) // a round still publishing
		close(finished)
	})
	if err := p.stop(context.Background()); err != nil {
		t.Fatal(err)
	}
	select {
	case <-finished:
	default:
		t.Fatal("stop returned before the loop did")
	}

	// A loop that outlives the deadline is reported, not waited for forever.
	bg2, cancel2 := context.WithCancel(context.Background())
	p2 := &pipeline{cancel: func() {}, background: cancel2}
	release := make(chan struct{})
	defer close(release)
	p2.goLoop(func() { <-bg2.Done(); <-release })
	ctx, done := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer done()
	if err := p2.stop(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("stop = %v, want the deadline", err)
	}
}
