package consumer

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"io/fs"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/livekit/protocol/livekit"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"

	"github.com/lkscore/lkscore/config"
	"github.com/lkscore/lkscore/consumer/forget"
	"github.com/lkscore/lkscore/consumer/internal/facts"
	"github.com/lkscore/lkscore/internal/testenv"
	"github.com/lkscore/lkscore/recording"
	"github.com/lkscore/lkscore/regress"
	"github.com/lkscore/lkscore/scoring"
	"github.com/lkscore/lkscore/session"
	"github.com/lkscore/lkscore/store"
)

// trustSession is one session sent the way LiveKit and the SDK send it, with
// a marker in every free-text field lkscore is sent: the chat history, the
// webhooks' participant names, metadata and attributes (a SIP caller's phone
// number among them, and its identity), the room's and the job's metadata
// and attributes, and OTLP log fields.
type trustSession struct {
	room, job string
	// headerRedacted marks the session redacted in its upload header only:
	// its job does not say enable_redaction.
	headerRedacted bool
	markers        map[string]string // field → marker
	webhookMarkers []string          // the markers only the webhooks carry
}

func newTrustSession(room, job string, headerRedacted bool) *trustSession {
	return &trustSession{room: room, job: job, headerRedacted: headerRedacted, markers: map[string]string{}}
}

func (s *trustSession) mark(field string) string {
	m := fmt.Sprintf("MRK%s%s", s.room, strings.ReplaceAll(field, "_", ""))
	s.markers[field] = m
	return m
}

// markWebhook is a marker carried by a webhook's free text.
func (s *trustSession) markWebhook(field string) string {
	m := s.mark(field)
	s.webhookMarkers = append(s.webhookMarkers, m)
	return m
}

// send posts the upload, the OTLP logs and every webhook of the session.
func (s *trustSession) send(t *testing.T, d *Daemon) {
	t.Helper()
	items := []map[string]any{
		{"id": "i1", "type": "message", "role": "assistant", "content": []string{s.mark("agent_text")}, "interrupted": false, "created_at": 1764417601.0},
		{"id": "i2", "type": "message", "role": "user", "content": []string{s.mark("user_text")}, "interrupted": false, "created_at": 1764417603.0},
		{"id": "i3", "type": "function_call", "call_id": "c1", "name": "lookup", "arguments": `{"q":"` + s.mark("tool_args") + `"}`, "created_at": 1764417604.0},
		{"id": "i4", "type": "function_call_output", "call_id": "c1", "name": "lookup", "output": "timeout for " + s.mark("tool_output"), "is_error": true, "created_at": 1764417605.0},
		{"id": "i5", "type": "message", "role": "assistant", "content": []string{s.mark("agent_text2")}, "interrupted": false, "created_at": 1764417606.0},
	}
	chat, _ := json.Marshal(map[string]any{"items": items})
	header, _ := proto.Marshal(&livekit.MetricsRecordingHeader{RoomId: s.room, JobId: s.job, RedactionEnabled: s.headerRedacted})
	body, ct := testenv.PythonUpload(t, testenv.FullParts(header, chat, nil)[:2])
	if resp, msg := post(t, "http://"+d.IngestAddr()+"/observability/recordings/v0", testenv.Bearer(testenv.PythonToken(t, testenv.Key, testenv.Secret, true)),
		ct, bytes.NewReader(body)); resp.StatusCode != 200 {
		t.Fatalf("upload: %d %s", resp.StatusCode, msg)
	}
	logsBody := testenv.JSLogs(s.room, s.job, "trust-agent",
		map[string]any{"msg": "AgentSession closed", "reason": "participant_disconnected"},
		map[string]any{"msg": "user said something", "transcript": s.mark("otlp_field")})
	if r, msg := postOTLP(t, d, "logs", "application/json", logsBody, nil); r.StatusCode != 200 {
		t.Fatalf("otlp: %d %s", r.StatusCode, msg)
	}
	room := func() *livekit.Room {
		return &livekit.Room{Sid: s.room, Name: "call", Metadata: s.markWebhook("room_metadata"), TurnPassword: s.markWebhook("turn_password")}
	}
	caller := &livekit.ParticipantInfo{Sid: "PA_" + s.room, Identity: "sip_+1555" + s.room, Kind: livekit.ParticipantInfo_SIP,
		Name: s.markWebhook("participant_name"), Metadata: s.markWebhook("participant_metadata"),
		Attributes:       map[string]string{"sip.phoneNumber": "+1555" + s.markWebhook("phone_number"), "note": s.markWebhook("participant_attribute")},
		Tracks:           []*livekit.TrackInfo{{Sid: "TR_1", Name: s.markWebhook("track_name")}},
		DisconnectReason: livekit.DisconnectReason_CLIENT_INITIATED}
	job := &livekit.Job{Id: s.job, AgentName: "trust-agent", Metadata: s.markWebhook("job_metadata"),
		Attributes: map[string]string{"caller": s.markWebhook("job_attribute")}, Room: room(), Participant: caller,
		State: &livekit.JobState{Status: livekit.JobStatus_JS_SUCCESS, ParticipantIdentity: "agent-" + s.job}}
	events := []*livekit.WebhookEvent{
		{Event: "agent_job_started", Id: "EV_start_" + s.job, Room: room(), Job: job},
		{Event: "participant_left", Id: "EV_left_" + s.job, Room: room(), Participant: caller},
		{Event: "participant_connection_aborted", Id: "EV_abort_" + s.job, Room: room(), Participant: caller},
		{Event: "agent_job_ended", Id: "EV_end_" + s.job, Room: room(), Job: job},
		{Event: "room_finished", Id: "EV_fin_" + s.job, Room: room()},
		// An egress of the room: its request names storage credentials and a stream URL.
		{Event: "egress_ended", Id: "EV_egress_" + s.job, EgressInfo: &livekit.EgressInfo{EgressId: "EG_" + s.room, RoomId: s.room,
			RoomName: "call", Status: livekit.EgressStatus_EGRESS_COMPLETE,
			Request: &livekit.EgressInfo_RoomComposite{RoomComposite: &livekit.RoomCompositeEgressRequest{RoomName: "call",
				FileOutputs: []*livekit.EncodedFileOutput{{Filepath: "calls/x.ogg", Output: &livekit.EncodedFileOutput_S3{
					S3: &livekit.S3Upload{AccessKey: s.markWebhook("egress_access_key"), Secret: s.markWebhook("egress_secret"), Bucket: "calls"}}}}}},
			StreamResults: []*livekit.StreamInfo{{Url: "rtmp://live.example/app/" + s.markWebhook("stream_key")}},
			FileResults:   []*livekit.FileInfo{{Filename: "calls/x.ogg", Location: "s3://calls/calls/x.ogg"}}}},
	}
	for _, ev := range events {
		wb, _ := protojson.Marshal(ev)
		if resp, msg := post(t, "http://"+d.IngestAddr()+"/webhook", testenv.SignWebhook(t, testenv.Key, testenv.Secret, wb, 5*time.Minute),
			"application/webhook+json", bytes.NewReader(wb)); resp.StatusCode != 200 {
			t.Fatalf("%s: %d %s", ev.Event, resp.StatusCode, msg)
		}
	}
}

// scoreBoth starts a daemon on the embedded NATS server (its store in the
// data dir), sends both sessions and waits until both are scored and the
// pipeline is idle. It returns the daemon, its config and its NATS URL.
func scoreBoth(t *testing.T, a, b *trustSession) (*Daemon, config.Config, string) {
	t.Helper()
	cfg := pipelineConfig(t, "")
	// A rule and a threshold on it: the detector's threshold windows name
	// sessions too, so forget and the scans cover them.
	cfg.Scoring.Rules = []scoring.Rule{{Name: "errored", Expr: `close_reason == "CR_ERROR"`, Severity: session.Warning}}
	cfg.Regression.Thresholds = []regress.Threshold{{Name: "errors", Rule: "errored", AtLeast: 1, OfLast: 10}}
	d, _ := startDaemon(t, cfg)
	url := d.NATSURL()
	a.send(t, d)
	b.send(t, d)
	testenv.WaitFor(t, settleWait, "both scorecards", func() bool { return len(streamMsgs(t, url, "LKSCORE_RESULTS")) == 2 })
	quiesce(t, url, defaultConsumers)
	return d, cfg, url
}

// storedMessages is every message of every stream (KV buckets included):
// subjects, headers and data.
func storedMessages(t *testing.T, url string) string {
	t.Helper()
	stored, _ := storedStreams(t, url)
	return stored
}

// storedStreams is storedMessages with how many streams it read.
func storedStreams(t *testing.T, url string) (string, int) {
	t.Helper()
	var b strings.Builder
	js := testenv.JetStream(t, url)
	names := js.StreamNames(context.Background())
	streams := 0
	for name := range names.Name() {
		streams++
		st, err := js.Stream(context.Background(), name)
		if err != nil {
			t.Fatal(err)
		}
		info, _ := st.Info(context.Background())
		for seq := info.State.FirstSeq; info.State.Msgs > 0 && seq <= info.State.LastSeq; seq++ {
			m, err := st.GetMsg(context.Background(), seq)
			if err != nil {
				continue // deleted (a KV entry's older revision)
			}
			b.WriteString(m.Subject)
			for k, v := range m.Header {
				b.WriteString(k + strings.Join(v, ","))
			}
			b.Write(m.Data)
		}
	}
	return b.String(), streams
}

// rawBytes is every byte of every file under dir: the NATS store's block
// files, indexes and the recording store.
func rawBytes(t *testing.T, dir string) []byte {
	t.Helper()
	var all []byte
	err := filepath.WalkDir(dir, func(path string, e fs.DirEntry, err error) error {
		if err != nil || e.IsDir() {
			return err
		}
		b, err := os.ReadFile(path)
		all = append(append(all, b...), 0)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return all
}

// leaked reports the markers found in what, with some context.
func leaked(what string, markers []string) []string {
	var out []string
	for _, m := range markers {
		if i := strings.Index(what, m); i >= 0 {
			out = append(out, fmt.Sprintf("%s: …%q…", m, what[max(0, i-120):min(len(what), i+40)]))
		}
	}
	return out
}

// TestStoredWebhooksKeepNoFreeText: a session redacted only by its upload
// header, and one not redacted at all: no webhook of either keeps a
// participant name, metadata, attributes (the caller's phone number), a
// track name, the room's or the job's metadata or attributes, the room's TURN
// password, an egress's credentials or stream key, or the caller's identity; not in any stream or bucket message, nor in the raw bytes of the
// NATS store and the data dir. The agent's name, which webhooks keep, is
// found in both: the scans see what is stored.
func TestStoredWebhooksKeepNoFreeText(t *testing.T) {
	t.Parallel()
	redacted, open := newTrustSession("RM_HdrRed", "AJ_HdrRed", true), newTrustSession("RM_Plain", "AJ_Plain", false)
	d, cfg, url := scoreBoth(t, redacted, open)

	stored := storedMessages(t, url)
	webhookMarkers := append(append([]string{}, redacted.webhookMarkers...), open.webhookMarkers...)
	identities := []string{"sip_+1555RM_HdrRed", "sip_+1555RM_Plain", "agent-AJ_HdrRed"}
	for _, l := range leaked(stored, append(webhookMarkers, identities...)) {
		t.Errorf("stored message keeps %s", l)
	}
	if !strings.Contains(stored, `"agentName":"trust-agent"`) {
		t.Fatal("the stored webhooks lack the agent name: the scan proves nothing")
	}
	if len(streamMsgs(t, url, "LKSCORE_WEBHOOKS")) != 12 {
		t.Errorf("stored %d webhooks, want 12", len(streamMsgs(t, url, "LKSCORE_WEBHOOKS")))
	}
	if !strings.Contains(stored, "s3://calls/calls/x.ogg") {
		t.Error("the egress's file result is not stored: the egress link cannot be made")
	}
	// The redacted session keeps none of its own text either, in any message.
	for _, l := range leaked(stored, []string{redacted.markers["user_text"], redacted.markers["tool_output"], redacted.markers["otlp_field"]}) {
		t.Errorf("the header-redacted session's text is stored: %s", l)
	}

	// The raw bytes, once the daemon has stopped and flushed them.
	if err := d.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	raw := string(rawBytes(t, cfg.DataDir))
	for _, l := range leaked(raw, append(webhookMarkers, identities...)) {
		t.Errorf("raw bytes keep %s", l)
	}
	if !strings.Contains(raw, `"agentName":"trust-agent"`) || !strings.Contains(raw, open.markers["tool_output"]) {
		t.Fatal("the raw scan does not see the store's messages: it proves nothing")
	}
}

// TestForgetForgets: after Forget of a session with a marker in every field
// lkscore is sent, no marker is in any stream or bucket message, in the raw
// bytes of the NATS store and the data dir, or in any dashboard page or
// export of the running daemon. Another session, not forgotten, is still
// found everywhere the scans look: they see what is there.
func TestForgetForgets(t *testing.T) {
	t.Parallel()
	gone, kept := newTrustSession("RM_Gone", "AJ_Gone", false), newTrustSession("RM_Kept", "AJ_Kept", false)
	d, cfg, url := scoreBoth(t, gone, kept)

	ops := "http://" + d.OpsAddr()
	// get is one page; the list pages and exports name the sessions they
	// hold, the session's own pages carry its text.
	get := func(path string) string {
		resp, err := http.Get(ops + path)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		_ = resp.Body.Close()
		return string(body)
	}
	lists := func() string {
		var b strings.Builder
		for _, path := range []string{"/ui", "/ui/sessions", "/ui/sessions?sort=newest", "/ui/export?format=csv", "/ui/export?format=json"} {
			b.WriteString(get(path))
		}
		return b.String()
	}
	pages := func() string {
		var b strings.Builder
		b.WriteString(lists())
		for _, path := range []string{"/ui/session?key=RM_Gone/AJ_Gone", "/ui/recording?key=RM_Gone/AJ_Gone&object=chat_history.json"} {
			// These echo the key they were asked for: only the session's text counts.
			b.WriteString(strings.ReplaceAll(get(path), "RM_Gone/AJ_Gone", "the key asked for"))
		}
		return b.String()
	}
	testenv.WaitFor(t, settleWait, "the dashboard index", func() bool {
		p := lists()
		return strings.Contains(p, "RM_Gone/AJ_Gone") && strings.Contains(p, "RM_Kept/AJ_Kept")
	})
	// Before forget, the scans find the session: in the stream messages and on the dashboard.
	goneMarkers := []string{"RM_Gone/AJ_Gone"}
	for _, m := range gone.markers {
		goneMarkers = append(goneMarkers, m)
	}
	if l := leaked(storedMessages(t, url), []string{gone.markers["tool_output"], "RM_Gone/AJ_Gone"}); len(l) != 2 {
		t.Fatalf("before forget the stream scan finds %d of 2 traces of the session", len(l))
	}
	if l := leaked(pages(), []string{gone.markers["tool_output"], "RM_Gone/AJ_Gone"}); len(l) != 2 {
		t.Fatalf("before forget the dashboard scan finds %d of 2 traces of the session", len(l))
	}

	js := testenv.JetStream(t, url)
	st, err := store.OpenLocalDir(filepath.Join(cfg.DataDir, "recordings"))
	if err != nil {
		t.Fatal(err)
	}
	layout, _ := cfg.Layout()
	steps := forget.Run(context.Background(), js, d.subjects, st, layout, 2*time.Second, "RM_Gone/AJ_Gone")
	for _, s := range steps {
		t.Logf("%-55s removed %-3d %s %s", s.Place, s.Removed, s.Note, s.Err)
		if s.Err != "" {
			t.Errorf("%s: %s", s.Place, s.Err)
		}
	}

	for _, l := range leaked(storedMessages(t, url), goneMarkers) {
		t.Errorf("stream message after forget: %s", l)
	}
	for _, l := range leaked(pages(), goneMarkers) {
		t.Errorf("dashboard after forget: %s", l)
	}
	keptMarkers := []string{kept.markers["tool_output"], "RM_Kept/AJ_Kept"}
	if l := leaked(storedMessages(t, url)+pages(), keptMarkers); len(l) != 2 {
		t.Errorf("the session not forgotten is gone too: %d of 2 traces left", len(l))
	}
	if err := d.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	// Raw bytes: the session key survives only where docs/security.md says (key-value
	// subjects and purge markers, deduplication ids); its free text nowhere.
	raw := string(rawBytes(t, cfg.DataDir))
	var text []string
	for _, m := range gone.markers {
		text = append(text, m)
	}
	for _, l := range leaked(raw, text) {
		t.Errorf("raw bytes after forget: %s", l)
	}
	if l := leaked(raw, []string{kept.markers["tool_output"], kept.markers["user_text"]}); len(l) != 2 {
		t.Errorf("the raw scan does not see the session not forgotten (%d of 2): it proves nothing", len(l))
	}
	if _, err := os.Stat(filepath.Join(cfg.DataDir, "recordings", "RM_Gone")); !os.IsNotExist(err) {
		t.Errorf("the forgotten upload is still stored: %v", err)
	}
	if _, err := os.Stat(filepath.Join(cfg.DataDir, "recordings", "RM_Kept", "AJ_Kept", recording.ObjectChatHistory)); err != nil {
		t.Errorf("the kept upload is gone: %v", err)
	}
}

// TestDashboardHostAndFrames: a page on another site that rebinds its name
// to 127.0.0.1 sends its own Host, and gets no session data; the pages
// carry frame protection; the token is not taken from the URL. With an
// external URL configured (a proxy in front), loopback clients need the
// token too, and the external host is served.
func TestDashboardHostAndFrames(t *testing.T) {
	t.Parallel()
	cfg := pipelineConfig(t, "")
	cfg.Dashboard.Token = "dash-token-0123456789"
	d, _ := startDaemon(t, cfg)
	s := newTrustSession("RM_Host", "AJ_Host", false)
	s.send(t, d)
	testenv.WaitFor(t, settleWait, "the scorecard", func() bool { return len(streamMsgs(t, d.NATSURL(), "LKSCORE_RESULTS")) == 1 })
	get := func(path, host string, hdr map[string]string) (*http.Response, string) {
		req, _ := http.NewRequest(http.MethodGet, "http://"+d.OpsAddr()+path, nil)
		req.Host = host
		for k, v := range hdr {
			req.Header.Set(k, v)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		_ = resp.Body.Close()
		return resp, string(b)
	}
	testenv.WaitFor(t, settleWait, "the dashboard index", func() bool {
		_, b := get("/ui/sessions", d.OpsAddr(), nil)
		return strings.Contains(b, "RM_Host/AJ_Host")
	})
	for _, path := range []string{"/ui", "/ui/sessions", "/ui/session?key=RM_Host/AJ_Host", "/ui/export?format=json", "/ui/export?format=csv"} {
		resp, body := get(path, "attacker.example", nil)
		if resp.StatusCode == http.StatusOK || strings.Contains(body, "RM_Host") || strings.Contains(body, s.markers["tool_output"]) {
			t.Errorf("Host attacker.example, %s: %d %q", path, resp.StatusCode, body)
		}
		resp, body = get(path, d.OpsAddr(), nil)
		if resp.StatusCode != http.StatusOK || !strings.Contains(body, "RM_Host") {
			t.Errorf("loopback %s: %d", path, resp.StatusCode)
		}
		if resp.Header.Get("X-Frame-Options") != "DENY" || !strings.Contains(resp.Header.Get("Content-Security-Policy"), "frame-ancestors 'none'") ||
			resp.Header.Get("Referrer-Policy") != "no-referrer" {
			t.Errorf("%s: no frame protection: %v", path, resp.Header)
		}
	}
	if resp, _ := get("/ui?token=dash-token-0123456789", d.OpsAddr(), nil); resp.StatusCode != http.StatusBadRequest {
		t.Errorf("a token in the URL: %d, want 400", resp.StatusCode)
	}

	// Behind a proxy: loopback is not trusted, the external host is served, the token lets in.
	cfg2 := pipelineConfig(t, "")
	cfg2.Dashboard.Token, cfg2.Dashboard.ExternalURL = "dash-token-0123456789", "https://lkscore.example.com"
	d2, _ := startDaemon(t, cfg2)
	get2 := func(host string, hdr map[string]string) int {
		req, _ := http.NewRequest(http.MethodGet, "http://"+d2.OpsAddr()+"/ui", nil)
		req.Host = host
		for k, v := range hdr {
			req.Header.Set(k, v)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		_ = resp.Body.Close()
		return resp.StatusCode
	}
	if c := get2("lkscore.example.com", nil); c != http.StatusForbidden {
		t.Errorf("behind a proxy, loopback without the token: %d, want 403", c)
	}
	if c := get2("lkscore.example.com", map[string]string{"Authorization": "Bearer dash-token-0123456789"}); c != http.StatusOK {
		t.Errorf("behind a proxy, with the token: %d", c)
	}
	if c := get2("lkscore.example.com", map[string]string{"Cookie": "lkscore-ui=dash-token-0123456789"}); c != http.StatusOK {
		t.Errorf("behind a proxy, with the login cookie: %d", c)
	}
	if c := get2("attacker.example", map[string]string{"Authorization": "Bearer dash-token-0123456789"}); c == http.StatusOK {
		t.Errorf("behind a proxy, another Host: %d", c)
	}
}

// TestFieldWebhooksReplayed: the 60 webhooks a real livekit-server v1.13.11
// sent during six real agents-js sessions (testdata/field), re-signed with
// the test's key and sent in their order. Every one is answered 200; no
// stored message, nor the raw bytes of the store, keeps a room's TURN
// password or a participant's name or identity; and the room's departures
// carry each participant's keyed identity hash (the key derived from the
// LiveKit API secret), one per participant.
func TestFieldWebhooksReplayed(t *testing.T) {
	t.Parallel()
	cfg := pipelineConfig(t, "")
	d, _ := startDaemon(t, cfg)
	url := d.NATSURL()
	lines := strings.Split(strings.TrimSpace(string(mustReadFile(t, filepath.Join("testdata", "field", "lkreal-2026-12-03-webhooks.jsonl")))), "\n")
	secrets, identities := map[string]bool{}, map[string]bool{}
	for _, line := range lines {
		var ev livekit.WebhookEvent
		if err := protojson.Unmarshal([]byte(line), &ev); err != nil {
			t.Fatal(err)
		}
		if p := ev.GetRoom().GetTurnPassword(); p != "" {
			secrets[p] = true
		}
		if p := ev.GetParticipant(); p != nil {
			identities[p.GetIdentity()] = true
			// Quoted, so a name is found only as a whole JSON string; an
			// empty one is no marker ("" turns up in binary block files by
			// chance: a CI run failed on it).
			for _, v := range []string{p.GetIdentity(), p.GetName()} {
				if v != "" {
					secrets[`"`+v+`"`] = true
				}
			}
		}
		if resp, msg := post(t, "http://"+d.IngestAddr()+"/webhook", testenv.SignWebhook(t, testenv.Key, testenv.Secret, []byte(line), 5*time.Minute),
			"application/webhook+json", strings.NewReader(line)); resp.StatusCode != 200 {
			t.Fatalf("%s: %d %s", ev.GetEvent(), resp.StatusCode, msg)
		}
	}
	if len(secrets) < 8 || len(identities) != 7 {
		t.Fatalf("the recording has %d TURN passwords, names and identities, %d identities", len(secrets), len(identities))
	}
	kept := len(streamMsgs(t, url, "LKSCORE_WEBHOOKS"))
	if kept != 18 { // participant_left ×12, room_finished ×6; the rest is not a kept event
		t.Errorf("stored %d webhooks, want 18", kept)
	}
	// The departures name each participant by the hash of its real identity.
	keys, err := facts.IdentityKeysFor(cfg.Privacy.IdentityKeys, cfg.LiveKit.Keys)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]bool{}
	for id := range identities {
		want[facts.IdentityHash(keys.Stored(id))] = true
	}
	var stored string
	got := map[string]bool{}
	testenv.WaitFor(t, settleWait, "the rooms' departures", func() bool {
		stored = storedMessages(t, url)
		got = map[string]bool{}
		for _, m := range regexp.MustCompile(`"field":"departure","value":"[^"]* ([0-9a-f]{6}\.[0-9a-f]{12})"`).FindAllStringSubmatch(stored, -1) {
			got[m[1]] = true
		}
		return len(got) >= len(want)
	})
	var all []string
	for s := range secrets {
		all = append(all, s)
	}
	for _, l := range leaked(stored, all) {
		t.Errorf("stored message keeps %s", l)
	}
	if len(got) != len(want) {
		t.Errorf("departures carry %d identity hashes, want the %d of the recording's identities", len(got), len(want))
	}
	for h := range got {
		if !want[h] {
			t.Errorf("departure identity hash %s is not the hash of any real identity", h)
		}
	}
	if err := d.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	for _, l := range leaked(string(rawBytes(t, cfg.DataDir)), all) {
		t.Errorf("raw bytes keep %s", l)
	}
}

// TestDashboardLoginRateLimited: through the daemon's ops listener, 1,000
// wrong logins from one address as fast as a client can send them: only
// the first few are compared, the rest wait (429, Retry-After); the right
// token from another loopback address (127.0.0.2) logs in at once.
func TestDashboardLoginRateLimited(t *testing.T) {
	t.Parallel()
	cfg := pipelineConfig(t, "")
	cfg.Dashboard.Token, cfg.Dashboard.ExternalURL = "dash-token-0123456789", "https://lkscore.example.com"
	d, _ := startDaemon(t, cfg)
	login := func(from, token string) *http.Response {
		client := &http.Client{
			Transport:     &http.Transport{DialContext: (&net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(from)}}).DialContext},
			CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
		}
		req, _ := http.NewRequest(http.MethodPost, "http://"+d.OpsAddr()+"/ui/login", strings.NewReader("token="+token))
		req.Host = "lkscore.example.com"
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		resp, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		_ = resp.Body.Close()
		client.CloseIdleConnections()
		return resp
	}
	compared, waited := 0, 0
	for i := range 1000 {
		switch resp := login("127.0.0.1", fmt.Sprintf("guess-%06d-Xy", i)); resp.StatusCode {
		case http.StatusForbidden:
			compared++
		case http.StatusTooManyRequests:
			if resp.Header.Get("Retry-After") == "" {
				t.Fatal("429 without Retry-After")
			}
			waited++
		default:
			t.Fatalf("a wrong token: %d", resp.StatusCode)
		}
	}
	if compared > 10 || waited < 990 {
		t.Errorf("of 1,000 wrong logins %d were compared, %d told to wait", compared, waited)
	}
	if resp := login("127.0.0.2", "dash-token-0123456789"); resp.StatusCode != http.StatusSeeOther {
		t.Errorf("the right token from another address: %d", resp.StatusCode)
	}
}

// TestOneLoginBudgetAcrossPaths: with ops_pprof on, 120 wrong tokens from
// one address spread over /ui and /debug/pprof/* are compared at most 6
// times in all: every guarded path shares the process's one login limiter
// (issue 66: pprof's paths each had a budget of their own).
func TestOneLoginBudgetAcrossPaths(t *testing.T) {
	t.Parallel()
	cfg := pipelineConfig(t, "")
	cfg.OpsPprof = true
	cfg.Dashboard.Token, cfg.Dashboard.ExternalURL = "dash-token-0123456789", "https://lkscore.example.com"
	d, _ := startDaemon(t, cfg)
	paths := []string{"/ui", "/debug/pprof/", "/debug/pprof/heap", "/debug/pprof/goroutine", "/debug/pprof/cmdline", "/ui/alerts"}
	compared, waited := 0, 0
	start := time.Now()
	for i := range 120 {
		req, _ := http.NewRequest(http.MethodGet, "http://"+d.OpsAddr()+paths[i%len(paths)], nil)
		req.Host = "lkscore.example.com"
		req.Header.Set("Authorization", fmt.Sprintf("Bearer guess-%06d-Xy", i))
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		_ = resp.Body.Close()
		switch resp.StatusCode {
		case http.StatusForbidden:
			compared++
		case http.StatusTooManyRequests:
			waited++
		default:
			t.Fatalf("a wrong token on %s: %d", req.URL.Path, resp.StatusCode)
		}
	}
	if took := time.Since(start); compared > 6 {
		t.Errorf("of 120 wrong tokens over /ui and /debug/pprof/* in %v, %d were compared (want at most 6), %d told to wait",
			took.Round(time.Millisecond), compared, waited)
	}
}
