package consumer

import (
	"context"
	"fmt"
	"math/rand/v2"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/livekit/protocol/livekit"

	"github.com/lkscore/lkscore/config"
	"github.com/lkscore/lkscore/scoring"
	"github.com/lkscore/lkscore/wire"
)

// left is a participant_left (or _connection_aborted) webhook as livekit-server
// sends it.
func left(id, roomSid, identity string, kind livekit.ParticipantInfo_Kind, reason livekit.DisconnectReason, at int64) *livekit.WebhookEvent {
	return &livekit.WebhookEvent{Event: "participant_left", Id: id, CreatedAt: at, Room: &livekit.Room{Sid: roomSid, Name: "room-" + roomSid},
		Participant: &livekit.ParticipantInfo{Identity: identity, Kind: kind, DisconnectReason: reason, State: livekit.ParticipantInfo_DISCONNECTED}}
}

func finished(id, roomSid string, end livekit.RoomEndReason) *livekit.WebhookEvent {
	return &livekit.WebhookEvent{Event: "room_finished", Id: id, CreatedAt: time.Now().Unix(),
		Room: &livekit.Room{Sid: roomSid, Name: "room-" + roomSid}, RoomEndReason: end}
}

func departureObs(t *testing.T, ev *livekit.WebhookEvent, storedNanos int64) wire.Observation {
	t.Helper()
	o := departureObservation(ev, storedNanos)
	if o == nil {
		t.Fatalf("no departure for %s", ev.GetParticipant().GetIdentity())
	}
	return *o
}

// TestRoomStory: what the room's webhooks imply, whatever order they come in.
func TestRoomStory(t *testing.T) {
	const caller, agentKind = livekit.ParticipantInfo_STANDARD, livekit.ParticipantInfo_AGENT
	sip := livekit.ParticipantInfo_SIP
	end := func(r livekit.RoomEndReason) wire.Observation { return roomEndObservation(finished("EV_f", "RM", r)) }
	dep := func(identity string, kind livekit.ParticipantInfo_Kind, reason livekit.DisconnectReason, at, stored int64) wire.Observation {
		return departureObs(t, left("EV_"+identity, "RM", identity, kind, reason, at), stored)
	}
	for _, tc := range []struct {
		name              string
		obs               []wire.Observation
		want, from, ended string
	}{
		{"caller hangs up first", []wire.Observation{
			dep("caller", caller, livekit.DisconnectReason_CLIENT_INITIATED, 100, 5),
			dep("agent-AJ", agentKind, livekit.DisconnectReason_CLIENT_INITIATED, 101, 1),
			end(livekit.RoomEndReason_ROOM_END_IDLE_TIMEOUT)}, "CR_PARTICIPANT_DISCONNECTED", sourceRoom, roleCaller},
		{"same second: the stream's order decides", []wire.Observation{
			dep("agent-AJ", agentKind, livekit.DisconnectReason_ROOM_CLOSED, 100, 9),
			dep("caller", caller, livekit.DisconnectReason_CLIENT_INITIATED, 100, 8)}, "CR_PARTICIPANT_DISCONNECTED", sourceRoom, roleCaller},
		{"agent leaves first: nothing more", []wire.Observation{
			dep("agent-AJ", agentKind, livekit.DisconnectReason_CLIENT_INITIATED, 100, 1),
			dep("caller", caller, livekit.DisconnectReason_CLIENT_INITIATED, 104, 2),
			end(livekit.RoomEndReason_ROOM_END_IDLE_TIMEOUT)}, "CR_UNKNOWN", sourceAbsent, roleAgent},
		{"room deleted via the API", []wire.Observation{
			dep("caller", caller, livekit.DisconnectReason_ROOM_DELETED, 100, 1),
			dep("agent-AJ", agentKind, livekit.DisconnectReason_ROOM_DELETED, 100, 2),
			end(livekit.RoomEndReason_ROOM_END_API_DELETE)}, "CR_JOB_SHUTDOWN", sourceRoom, roleCaller},
		{"room deleted, no departures seen", []wire.Observation{end(livekit.RoomEndReason_ROOM_END_API_DELETE)}, "CR_JOB_SHUTDOWN", sourceRoom, ""},
		{"server shutdown", []wire.Observation{dep("caller", caller, livekit.DisconnectReason_SERVER_SHUTDOWN, 100, 1)}, "CR_JOB_SHUTDOWN", sourceRoom, roleCaller},
		{"SIP callee unavailable", []wire.Observation{dep("+15550100", sip, livekit.DisconnectReason_USER_UNAVAILABLE, 100, 1)}, "CR_PARTICIPANT_DISCONNECTED", sourceRoom, roleCaller},
		{"caller's connection aborted", []wire.Observation{departureObs(t, &livekit.WebhookEvent{Event: "participant_connection_aborted", Id: "EV_ab", CreatedAt: 100,
			Room: &livekit.Room{Sid: "RM"}, Participant: &livekit.ParticipantInfo{Identity: "caller"}}, 1)}, "CR_PARTICIPANT_DISCONNECTED", sourceRoom, roleCaller},
		{"caller removed by the app", []wire.Observation{dep("caller", caller, livekit.DisconnectReason_PARTICIPANT_REMOVED, 100, 1)}, "CR_UNKNOWN", sourceAbsent, roleCaller},
		{"caller removed for an agent error", []wire.Observation{dep("caller", caller, livekit.DisconnectReason_AGENT_ERROR, 100, 1)}, "CR_ERROR", sourceRoom, roleCaller},
		{"the job's identity marks the agent, whatever its kind", []wire.Observation{
			{Field: fieldAgentIdentity, Value: identityHash("bot"), Source: sourceWebhook},
			dep("bot", caller, livekit.DisconnectReason_CLIENT_INITIATED, 100, 1),
			dep("caller", caller, livekit.DisconnectReason_CLIENT_INITIATED, 101, 1)}, "CR_UNKNOWN", sourceAbsent, roleAgent},
		{"the SDK's log outranks the room", []wire.Observation{
			{Field: fieldCloseReason, Value: "CR_USER_INITIATED", Source: sourceOTLPLog, Evidence: "otlp_log: x"},
			dep("caller", caller, livekit.DisconnectReason_ROOM_DELETED, 100, 1)}, "CR_USER_INITIATED", sourceOTLPLog, roleCaller},
		{"a crashed job outranks the room", []wire.Observation{
			{Field: fieldCloseReason, Value: "CR_ERROR", Source: sourceJobStatus, Evidence: "job_status: x"},
			dep("caller", caller, livekit.DisconnectReason_CLIENT_INITIATED, 100, 1)}, "CR_ERROR", sourceJobStatus, roleCaller},
	} {
		t.Run(tc.name, func(t *testing.T) {
			want := resolve(tc.obs)
			if want.CloseReason != tc.want || want.CloseReasonSource != tc.from || want.EndedBy != tc.ended {
				t.Fatalf("resolved %s from %s (%q), ended by %q; want %s from %s, ended by %q",
					want.CloseReason, want.CloseReasonSource, want.CloseReasonEvidence, want.EndedBy, tc.want, tc.from, tc.ended)
			}
			for range 50 { // any arrival order, any duplicate
				obs := append(slices.Clone(tc.obs), tc.obs[rand.IntN(len(tc.obs))])
				rand.Shuffle(len(obs), func(a, b int) { obs[a], obs[b] = obs[b], obs[a] })
				f := &wire.SessionFacts{}
				mergeFacts(f, factUpdate{Observations: obs})
				if got := resolve(f.Observations); !reflect.DeepEqual(got, resolve(sortedObs(tc.obs))) {
					t.Fatalf("order changed the facts:\n%+v\n%+v", got, want)
				}
			}
		})
	}
	// Egress and ingress participants are not part of the call; a Cloud
	// migration is not an end.
	for _, p := range []*livekit.ParticipantInfo{{Identity: "EG_1", Kind: livekit.ParticipantInfo_EGRESS},
		{Identity: "IN_1", Kind: livekit.ParticipantInfo_INGRESS}, {Identity: "c", DisconnectReason: livekit.DisconnectReason_MIGRATION}} {
		if o := departureObservation(&livekit.WebhookEvent{Event: "participant_left", Participant: p}, 1); o != nil {
			t.Errorf("%s: departure %+v", p.Identity, o)
		}
	}
}

func sortedObs(obs []wire.Observation) []wire.Observation {
	f := &wire.SessionFacts{}
	mergeFacts(f, factUpdate{Observations: obs})
	return f.Observations
}

// TestJobStatusDeparture: livekit-server's "agent worker left the room" is a
// normal departure, not an error; any other JS_FAILED is.
func TestJobStatusDeparture(t *testing.T) {
	l := &locator{}
	for _, tc := range []struct {
		status    livekit.JobStatus
		err, want string
	}{
		{livekit.JobStatus_JS_FAILED, "agent worker left the room", "CR_UNKNOWN"},
		{livekit.JobStatus_JS_FAILED, "Agent worker left the room ", "CR_UNKNOWN"},
		{livekit.JobStatus_JS_FAILED, "job process exited with code 1", "CR_ERROR"},
		{livekit.JobStatus_JS_FAILED, "", "CR_ERROR"}, // the Python worker reports a failed process without an error
		{livekit.JobStatus_JS_SUCCESS, "", "CR_UNKNOWN"},
	} {
		job := &livekit.Job{Id: "AJ", State: &livekit.JobState{Status: tc.status, Error: tc.err}}
		r := resolve(l.jobObservations(job))
		departed := tc.status == livekit.JobStatus_JS_FAILED && tc.want == "CR_UNKNOWN"
		if r.CloseReason != tc.want || r.JobStatus != tc.status.String() || r.JobError != tc.err ||
			departed != strings.Contains(r.CloseReasonEvidence, "not an error") {
			t.Errorf("%s %q: close reason %s (%s), job %s %q", tc.status, tc.err, r.CloseReason, r.CloseReasonEvidence, r.JobStatus, r.JobError)
		}
	}
}

// TestRoomStoryPipeline: sessions as a self-hosted livekit-server ends them,
// with no agent_job_* webhooks and no SDK close reason, through the daemon:
// the room's webhooks give the close reason, and room_finished completes the
// facts, so nothing waits out the settle window (20 s, the default).
func TestRoomStoryPipeline(t *testing.T) {
	ns := startNATS(t)
	cfg := pipelineConfig(t, ns.URL())
	cfg.Pipeline.SettleWindow = config.Default().Pipeline.SettleWindow
	cfg.Pipeline.CloseReasons = append(cfg.Pipeline.CloseReasons, "CR_JOB_SHUTDOWN")
	d, _ := startDaemon(t, cfg)
	notifier, delivered := newNotifier(t, "http://"+d.IngestAddr()+"/webhook", testKey, testSecret)
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
			left("EV_h1", "RM_Hangup", "caller", livekit.ParticipantInfo_STANDARD, livekit.DisconnectReason_CLIENT_INITIATED, now),
			left("EV_h2", "RM_Hangup", "agent-AJ_Hangup", livekit.ParticipantInfo_AGENT, livekit.DisconnectReason_CLIENT_INITIATED, now),
			finished("EV_h3", "RM_Hangup", livekit.RoomEndReason_ROOM_END_IDLE_TIMEOUT)}, "CR_PARTICIPANT_DISCONNECTED", roleCaller},
		{"RM_Deleted", "AJ_Deleted", false, []*livekit.WebhookEvent{
			left("EV_d1", "RM_Deleted", "caller", livekit.ParticipantInfo_STANDARD, livekit.DisconnectReason_ROOM_DELETED, now),
			left("EV_d2", "RM_Deleted", "agent-AJ_Deleted", livekit.ParticipantInfo_AGENT, livekit.DisconnectReason_ROOM_DELETED, now),
			finished("EV_d3", "RM_Deleted", livekit.RoomEndReason_ROOM_END_API_DELETE)}, "CR_JOB_SHUTDOWN", roleCaller},
		{"RM_AgentLeft", "AJ_AgentLeft", false, []*livekit.WebhookEvent{
			left("EV_a1", "RM_AgentLeft", "agent-AJ_AgentLeft", livekit.ParticipantInfo_AGENT, livekit.DisconnectReason_CLIENT_INITIATED, now-3),
			left("EV_a2", "RM_AgentLeft", "caller", livekit.ParticipantInfo_STANDARD, livekit.DisconnectReason_CLIENT_INITIATED, now),
			finished("EV_a3", "RM_AgentLeft", livekit.RoomEndReason_ROOM_END_IDLE_TIMEOUT)}, "CR_UNKNOWN", roleAgent},
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
	waitFor(t, "three scorecards", func() bool { return len(streamMsgs(t, ns.URL(), "LKSCORE_RESULTS")) == len(sessions) })
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
		wantSource := sourceRoom
		if s.want == "CR_UNKNOWN" {
			wantSource = sourceAbsent
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
	waitFor(t, "two scorecards", func() bool { return len(streamMsgs(t, ns.URL(), "LKSCORE_RESULTS")) == 2 })
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
