package consumer

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/livekit/protocol/livekit"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"

	"github.com/lkscore/lkscore/config"
	"github.com/lkscore/lkscore/consumer/internal/facts"
	"github.com/lkscore/lkscore/internal/testenv"
	"github.com/lkscore/lkscore/session"
)

// roomSession is a session whose room's name is a marker, sent as LiveKit
// and the SDK send it: the upload, the SDK's logs naming the room (agents-js
// chat_history logs carry "room"), and the room's webhooks.
type roomSession struct {
	room, job, name string
	jobRedacted     bool // the job's enable_redaction (and the logs' lk.redaction.enabled)
	roomEvents      bool // participant_left, room_finished and egress_ended too
}

func (s roomSession) send(t *testing.T, d *Daemon) {
	t.Helper()
	chat, _ := json.Marshal(map[string]any{"items": []map[string]any{
		{"id": "i1", "type": "message", "role": "assistant", "content": []string{"Hello"}, "created_at": 1764417601.0},
		{"id": "i2", "type": "message", "role": "user", "content": []string{"Hi"}, "created_at": 1764417603.0},
		{"id": "i3", "type": "message", "role": "assistant", "content": []string{"Bye"}, "created_at": 1764417605.0},
	}})
	header, _ := proto.Marshal(&livekit.MetricsRecordingHeader{RoomId: s.room, JobId: s.job, RedactionEnabled: s.jobRedacted})
	body, ct := testenv.PythonUpload(t, testenv.FullParts(header, chat, nil)[:2])
	if resp, msg := post(t, "http://"+d.IngestAddr()+"/observability/recordings/v0", testenv.Bearer(testenv.PythonToken(t, testenv.Key, testenv.Secret, true)),
		ct, bytes.NewReader(body)); resp.StatusCode != 200 {
		t.Fatalf("upload: %d %s", resp.StatusCode, msg)
	}
	rec := map[string]any{"msg": "chat_history", "room": s.name}
	if s.jobRedacted {
		rec["lk.redaction.enabled"] = "true"
	}
	if r, msg := postOTLP(t, d, "logs", "application/json", testenv.JSLogs(s.room, s.job, "room-agent", rec,
		map[string]any{"msg": "AgentSession closed", "reason": "participant_disconnected"}), nil); r.StatusCode != 200 {
		t.Fatalf("otlp: %d %s", r.StatusCode, msg)
	}
	room := func() *livekit.Room { return &livekit.Room{Sid: s.room, Name: s.name} }
	job := &livekit.Job{Id: s.job, AgentName: "room-agent", Room: room(), EnableRedaction: s.jobRedacted,
		State: &livekit.JobState{Status: livekit.JobStatus_JS_SUCCESS}}
	events := []*livekit.WebhookEvent{
		{Event: "agent_job_started", Id: "EV_st_" + s.job, Room: room(), Job: job},
		{Event: "agent_job_ended", Id: "EV_en_" + s.job, Room: room(), Job: job},
	}
	if s.roomEvents {
		events = append(events,
			&livekit.WebhookEvent{Event: "participant_left", Id: "EV_pl_" + s.job, Room: room(), Participant: &livekit.ParticipantInfo{
				Identity: "caller", Kind: livekit.ParticipantInfo_SIP, DisconnectReason: livekit.DisconnectReason_CLIENT_INITIATED}},
			&livekit.WebhookEvent{Event: "room_finished", Id: "EV_rf_" + s.job, Room: room()},
			&livekit.WebhookEvent{Event: "egress_ended", Id: "EV_eg_" + s.job, EgressInfo: &livekit.EgressInfo{EgressId: "EG_" + s.room,
				RoomId: s.room, RoomName: s.name, Status: livekit.EgressStatus_EGRESS_COMPLETE,
				FileResults: []*livekit.FileInfo{{Filename: "calls/x.ogg", Location: "s3://calls/calls/x.ogg"}}}})
	}
	for _, ev := range events {
		ev.CreatedAt = time.Now().Unix()
		wb, _ := protojson.Marshal(ev)
		if resp, msg := post(t, "http://"+d.IngestAddr()+"/webhook", testenv.SignWebhook(t, testenv.Key, testenv.Secret, wb, 5*time.Minute),
			"application/webhook+json", bytes.NewReader(wb)); resp.StatusCode != 200 {
			t.Fatalf("%s: %d %s", ev.Event, resp.StatusCode, msg)
		}
	}
}

// dashboardPages is what the dashboard serves of the sessions: the lists,
// the exports and each session's page.
func dashboardPages(t *testing.T, d *Daemon, keys ...string) string {
	t.Helper()
	var b strings.Builder
	paths := []string{"/ui", "/ui/sessions", "/ui/export?format=csv", "/ui/export?format=json"}
	for _, k := range keys {
		paths = append(paths, "/ui/session?key="+k)
	}
	for _, p := range paths {
		resp, err := http.Get("http://" + d.OpsAddr() + p)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		_ = resp.Body.Close()
		b.Write(body)
	}
	return b.String()
}

// roomCards scores sessions on a daemon with cfg and returns the cards by
// room, the stream messages, the dashboard's pages and the data dir's raw
// bytes (read after shutdown).
func roomCards(t *testing.T, cfg config.Config, sessions ...roomSession) (cards map[string]session.Scorecard, stored, pages, raw string) {
	t.Helper()
	d, _ := startDaemon(t, cfg)
	url := d.NATSURL()
	var keys []string
	for _, s := range sessions {
		s.send(t, d)
		keys = append(keys, s.room+"/"+s.job)
	}
	testenv.WaitFor(t, settleWait, "the scorecards", func() bool { return len(streamMsgs(t, url, "LKSCORE_RESULTS")) == len(sessions) })
	quiesce(t, url, defaultConsumers)
	testenv.WaitFor(t, settleWait, "the dashboard index", func() bool {
		p := dashboardPages(t, d)
		return !slices.ContainsFunc(keys, func(k string) bool { return !strings.Contains(p, k) })
	})
	cards = map[string]session.Scorecard{}
	for _, c := range results(t, url) {
		cards[c.Session.RoomID] = c
	}
	stored, pages = storedMessages(t, url), dashboardPages(t, d, keys...)
	if err := d.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	return cards, stored, pages, string(rawBytes(t, cfg.DataDir))
}

// TestRoomNamesRedacted: a room named after its caller's number. Under
// privacy.redaction: always, every session's room name is kept only as its
// keyed hash: on its card (as "lkscore-hmac:…"), and nowhere in the clear:
// no stream or bucket message, no raw byte of the NATS store or the data
// dir, no dashboard page holds the marker, whichever signal carried it
// (webhooks of the job and the room, an egress, the SDK's logs). Under auto,
// a session its job says is redacted gets the same on its card, facts, job
// webhooks and the pages; a session not redacted keeps its name.
func TestRoomNamesRedacted(t *testing.T) {
	t.Parallel()
	t.Run("always", func(t *testing.T) {
		t.Parallel()
		cfg := pipelineConfig(t, "")
		cfg.Privacy.Redaction = "always"
		s := roomSession{room: "RM_NameAlways", job: "AJ_NameAlways", name: "call-+14155550123-MRKroomAlways", roomEvents: true}
		cards, stored, pages, raw := roomCards(t, cfg, s)
		keys, err := facts.IdentityKeysFor(cfg.Privacy.IdentityKeys, cfg.LiveKit.Keys)
		if err != nil {
			t.Fatal(err)
		}
		if got, want := cards[s.room].Session.RoomName, keys.StoredRoomName(s.name); got != want || !strings.HasPrefix(got, "lkscore-hmac:") {
			t.Errorf("card room_name %q, want the keyed hash %q", got, want)
		}
		if !strings.Contains(pages, keys.StoredRoomName(s.name)) {
			t.Error("the dashboard does not show the room's hash")
		}
		for where, what := range map[string]string{"stream message": stored, "dashboard page": pages, "raw byte": raw} {
			for _, l := range leaked(what, []string{"MRKroomAlways"}) {
				t.Errorf("%s keeps the room name: %s", where, l)
			}
		}
	})
	t.Run("auto", func(t *testing.T) {
		t.Parallel()
		cfg := pipelineConfig(t, "")
		red := roomSession{room: "RM_NameRed", job: "AJ_NameRed", name: "call-+14155550199-MRKroomRedacted", jobRedacted: true, roomEvents: true}
		open := roomSession{room: "RM_NameOpen", job: "AJ_NameOpen", name: "call-MRKroomOpen"}
		cards, stored, pages, raw := roomCards(t, cfg, red, open)
		if got := cards[red.room].Session.RoomName; !strings.HasPrefix(got, "lkscore-hmac:") {
			t.Errorf("the redacted session's card room_name %q, want its keyed hash", got)
		}
		if got := cards[open.room].Session.RoomName; got != open.name {
			t.Errorf("the session not redacted lost its room name: %q", got)
		}
		for where, what := range map[string]string{"stream message": stored, "dashboard page": pages, "raw byte": raw} {
			for _, l := range leaked(what, []string{"MRKroomRedacted"}) {
				t.Errorf("%s keeps the redacted session's room name: %s", where, l)
			}
			if len(leaked(what, []string{"MRKroomOpen"})) == 0 {
				t.Errorf("the scan of %s does not find the room name not redacted: it proves nothing", where)
			}
		}
	})
}
