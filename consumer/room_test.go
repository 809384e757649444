package consumer

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/livekit/protocol/livekit"

	"github.com/lkscore/lkscore/config"
	"github.com/lkscore/lkscore/consumer/internal/facts"
	"github.com/lkscore/lkscore/internal/testenv"
	"github.com/lkscore/lkscore/scoring"
)

// TestRoomStoryPipeline: sessions as a self-hosted livekit-server ends them,
// with no agent_job_* webhooks and no SDK close reason, through the daemon:
// the room's webhooks give the close reason, and room_finished completes the
// facts, so nothing waits out the settle window (20 s, the default).
func TestRoomStoryPipeline(t *testing.T) {
	ns := startNATS(t)
	cfg := pipelineConfig(t, ns.URL())
	cfg.Pipeline.SettleWindow = config.Default().Pipeline.SettleWindow
	d, _ := startDaemon(t, cfg) // the default close reasons: no ending here may be dropped
	notifier, delivered := newNotifier(t, "http://"+d.IngestAddr()+"/webhook", testenv.Key, testenv.Secret)
	now := time.Now().Unix()
	type session struct {
		room, job   string
		uploadFirst bool
		events      []*livekit.WebhookEvent
		want        string
		endedBy     string
	}
	sessions := []session{
		{"RM_Hangup", "AJ_Hangup", true, []*livekit.WebhookEvent{
			testenv.ParticipantLeft("EV_h1", "RM_Hangup", "caller", livekit.ParticipantInfo_STANDARD, livekit.DisconnectReason_CLIENT_INITIATED, now),
			testenv.ParticipantLeft("EV_h2", "RM_Hangup", "agent-AJ_Hangup", livekit.ParticipantInfo_AGENT, livekit.DisconnectReason_CLIENT_INITIATED, now),
			testenv.RoomFinished("EV_h3", "RM_Hangup", livekit.RoomEndReason_ROOM_END_IDLE_TIMEOUT)}, "CR_PARTICIPANT_DISCONNECTED", facts.RoleCaller},
		{"RM_Deleted", "AJ_Deleted", false, []*livekit.WebhookEvent{
			testenv.ParticipantLeft("EV_d1", "RM_Deleted", "caller", livekit.ParticipantInfo_STANDARD, livekit.DisconnectReason_ROOM_DELETED, now),
			testenv.ParticipantLeft("EV_d2", "RM_Deleted", "agent-AJ_Deleted", livekit.ParticipantInfo_AGENT, livekit.DisconnectReason_ROOM_DELETED, now),
			// No signal names the SDK: agents-js and agents-py report a deleted
			// room differently (docs/facts.md), so no reason is claimed.
			testenv.RoomFinished("EV_d3", "RM_Deleted", livekit.RoomEndReason_ROOM_END_API_DELETE)}, "CR_UNKNOWN", facts.RoleCaller},
		{"RM_AgentLeft", "AJ_AgentLeft", false, []*livekit.WebhookEvent{
			testenv.ParticipantLeft("EV_a1", "RM_AgentLeft", "agent-AJ_AgentLeft", livekit.ParticipantInfo_AGENT, livekit.DisconnectReason_CLIENT_INITIATED, now-3),
			testenv.ParticipantLeft("EV_a2", "RM_AgentLeft", "caller", livekit.ParticipantInfo_STANDARD, livekit.DisconnectReason_CLIENT_INITIATED, now),
			testenv.RoomFinished("EV_a3", "RM_AgentLeft", livekit.RoomEndReason_ROOM_END_IDLE_TIMEOUT)}, "CR_UNKNOWN", facts.RoleAgent},
	}
	var last time.Time
	for _, s := range sessions {
		dir := t.TempDir()
		writeScenarioCopy(t, dir, "1_clean_call", s.room, s.job, "") // real SDKs write no summary
		if s.uploadFirst {
			uploadDir(t, d, dir)
		}
		// Through LiveKit's own notifier (protocol's webhook package, the code
		// livekit-server runs): its per-room queue, its signing.
		for _, ev := range s.events {
			if err := notifier.QueueNotify(context.Background(), ev); err != nil {
				t.Fatal(err)
			}
			if whi := awaitDelivery(t, delivered); whi.SendError != "" || whi.IsDropped {
				t.Fatalf("%s: delivery failed: %+v", ev.Id, whi)
			}
		}
		if !s.uploadFirst {
			uploadDir(t, d, dir)
		}
		last = time.Now()
	}
	testenv.WaitFor(t, settleWait, "three scorecards", func() bool { return len(streamMsgs(t, ns.URL(), "LKSCORE_RESULTS")) == len(sessions) })
	if waited := time.Since(last); waited > 2*time.Second {
		t.Errorf("scored %s after the last signal: room_finished with the upload must complete the facts", waited.Round(time.Millisecond))
	}
	quiesce(t, ns.URL(), defaultConsumers)
	cards := results(t, ns.URL())
	if len(cards) != len(sessions) {
		t.Fatalf("%d scorecards for %d sessions", len(cards), len(sessions))
	}
	checkSchema(t, ns.URL())
	for _, s := range sessions {
		i := slices.IndexFunc(cards, func(c scoring.Scorecard) bool { return c.Session.RoomID == s.room })
		if i < 0 {
			t.Errorf("%s: no scorecard", s.room)
			continue
		}
		c := cards[i]
		wantSource := facts.SourceRoom
		if s.want == "CR_UNKNOWN" {
			wantSource = facts.SourceAbsent
		}
		if c.Completion.CloseReason != s.want || c.Completion.CloseReasonSource != wantSource || c.Session.EndedBy != s.endedBy ||
			c.Session.RoomEndReason == "" || len(c.Session.Departures) != 2 || c.Overall.Verdict == "fail" {
			t.Errorf("%s: %s from %s (%q), ended by %q, room end %q, departures %v, verdict %s", s.room, c.Completion.CloseReason,
				c.Completion.CloseReasonSource, c.Completion.CloseReasonEvidence, c.Session.EndedBy, c.Session.RoomEndReason,
				c.Session.Departures, c.Overall.Verdict)
		}
	}
}

// TestJobLeftRoomPipeline: an agents-js session with logs off whose
// agent_job_ended says JS_FAILED "agent worker left the room" (every clean
// agents-js job on a self-hosted server) is not a failure; the same with a
// crashed job process is CR_ERROR from the job status, verdict fail. The
// webhooks come in protocol's newer form (job set, the event's room unset),
// and agent_job_started is accepted.
func TestJobLeftRoomPipeline(t *testing.T) {
	t.Parallel()
	ns := startNATS(t)
	d, reg := startDaemon(t, pipelineConfig(t, ns.URL()))
	for _, tc := range []struct{ room, job, err string }{
		{"RM_LeftRoom", "AJ_LeftRoom", "agent worker left the room"},
		{"RM_Crashed", "AJ_Crashed", "job process exited with code 1"},
	} {
		dir := t.TempDir()
		writeScenarioCopy(t, dir, "1_clean_call", tc.room, tc.job, "")
		started := jobEnded("EV_s"+tc.job, tc.room, tc.job, "js-agent", livekit.JobStatus_JS_RUNNING)
		started.Event = "agent_job_started"
		sendWebhook(t, d, started)
		uploadDir(t, d, dir)
		ev := jobEnded("EV_e"+tc.job, tc.room, tc.job, "js-agent", livekit.JobStatus_JS_FAILED)
		ev.Job.State.Error = tc.err
		sendWebhook(t, d, ev)
	}
	testenv.WaitFor(t, settleWait, "two scorecards", func() bool { return len(streamMsgs(t, ns.URL(), "LKSCORE_RESULTS")) == 2 })
	quiesce(t, ns.URL(), defaultConsumers)
	cards := results(t, ns.URL())
	if len(cards) != 2 {
		t.Fatalf("%d scorecards", len(cards))
	}
	for _, c := range cards {
		got := fmt.Sprintf("%s %s %s %s %q", c.Completion.CloseReason, c.Completion.CloseReasonSource, c.Overall.Verdict, c.Session.JobStatus, c.Session.JobError)
		var want string
		switch c.Session.RoomID {
		case "RM_LeftRoom":
			want = `CR_UNKNOWN absent pass JS_FAILED "agent worker left the room"`
		case "RM_Crashed":
			want = `CR_ERROR job_status fail JS_FAILED "job process exited with code 1"`
		}
		if got != want {
			t.Errorf("%s: %s, want %s", c.Session.RoomID, got, want)
		}
	}
	if v := counter(t, reg, "lkscore_webhook_events_total", map[string]string{"event": "agent_job_started", "outcome": "stored"}); v != 2 {
		t.Errorf("agent_job_started stored %v times, want 2", v)
	}
}

// TestRoomFinishedAwaited: a session whose room's participants have left
// waits for room_finished (pipeline.room_finished_wait) beyond its settle
// window, so its card carries the room's end reason, as livekit-server
// sends room_finished departure_timeout (20 s) after the room empties; a
// room whose room_finished never comes is scored once the wait is over,
// without one.
func TestRoomFinishedAwaited(t *testing.T) {
	t.Parallel()
	cfg := pipelineConfig(t, "")
	cfg.Pipeline.SettleWindow = time.Second
	cfg.Pipeline.RoomFinishedWait = 5 * time.Second
	d, _ := startDaemon(t, cfg)
	url := d.NATSURL()
	now := time.Now().Unix()
	start := time.Now()
	for _, room := range []string{"RM_Late", "RM_Never"} {
		dir := t.TempDir()
		writeScenarioCopy(t, dir, "1_clean_call", room, "AJ_"+room, "")
		uploadDir(t, d, dir)
		sendWebhook(t, d, testenv.ParticipantLeft("EV_c"+room, room, "caller", livekit.ParticipantInfo_STANDARD, livekit.DisconnectReason_CLIENT_INITIATED, now))
		sendWebhook(t, d, testenv.ParticipantLeft("EV_a"+room, room, "agent-"+room, livekit.ParticipantInfo_AGENT, livekit.DisconnectReason_CLIENT_INITIATED, now))
	}
	// Past the settle window, well inside the wait: room_finished comes.
	time.Sleep(3 * time.Second)
	if n := len(streamMsgs(t, url, "LKSCORE_RESULTS")); n != 0 {
		t.Fatalf("%d sessions scored %s after their last signal, inside pipeline.room_finished_wait", n, time.Since(start).Round(time.Millisecond))
	}
	sendWebhook(t, d, testenv.RoomFinished("EV_fRM_Late", "RM_Late", livekit.RoomEndReason_ROOM_END_IDLE_TIMEOUT))
	testenv.WaitFor(t, settleWait, "both scorecards", func() bool { return len(streamMsgs(t, url, "LKSCORE_RESULTS")) == 2 })
	quiesce(t, url, defaultConsumers)
	for _, c := range results(t, url) {
		want := ""
		if c.Session.RoomID == "RM_Late" {
			want = "ROOM_END_IDLE_TIMEOUT"
		}
		if c.Session.RoomEndReason != want || c.Session.RoomName != "room-"+c.Session.RoomID || c.Completion.CloseReason != "CR_PARTICIPANT_DISCONNECTED" {
			t.Errorf("%s: room end %q (want %q), room name %q, close reason %s", c.Session.RoomID, c.Session.RoomEndReason, want,
				c.Session.RoomName, c.Completion.CloseReason)
		}
	}
}
