package consumer

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/livekit/protocol/livekit"
	"github.com/livekit/protocol/utils/protojson"
	"github.com/nats-io/nats.go"

	"github.com/lkscore/lkscore/consumer/broker"
	"github.com/lkscore/lkscore/internal/testenv"
	"github.com/lkscore/lkscore/session"
	"github.com/lkscore/lkscore/wire"
)

// hostileIDs are ids a compromised sender with a valid signature could put
// where a room or job id goes: each is out of the one id rule
// (wire.CheckID), and before it the first two cut the daemon off from NATS
// for good (issue 65).
var hostileIDs = map[string]string{
	"4200 characters":  "RM_" + strings.Repeat("x", 4200),
	"2000 characters":  "RM_" + strings.Repeat("y", 2000),
	"129 characters":   "RM_" + strings.Repeat("z", 126),
	"a NUL byte":       "RM_nul\x00x",
	"a dot":            "RM_a.b",
	"a path":           "../../etc",
	"a space":          "RM_a b",
	"a wildcard":       "RM_>",
	"non-ASCII":        "RM_ü",
	"a line break":     "RM_a\r\nPUB x 1",
	"a slash and a ..": "RM_a/../b",
}

// signedPost signs body as LiveKit's notifier does and posts it.
func signedPost(t *testing.T, d *Daemon, body []byte) (int, string) {
	t.Helper()
	resp, msg := post(t, "http://"+d.IngestAddr()+"/webhook", testenv.SignWebhook(t, testenv.Key, testenv.Secret, body, 5*time.Minute),
		"application/webhook+json", bytes.NewReader(body))
	return resp.StatusCode, msg
}

// TestHostileIDs: every hostile id, sent signed through each path (a
// webhook's room, job, egress and participant ids, OTLP's resource and
// record attributes, an upload's header) to a real daemon, is refused with
// 400 naming the field, or, stored by an older lkscore, dead-lettered with
// the reason; /readyz stays 200 throughout, a valid session sent after is
// scored, and the daemon restarted on the same data dir is ready and scores
// the next one.
func TestHostileIDs(t *testing.T) {
	t.Parallel()
	ns := startNATS(t)
	cfg := pipelineConfig(t, ns.URL())
	d, _ := startDaemon(t, cfg)
	stillReady := func(after string) {
		t.Helper()
		// The disconnect a long subject caused came a moment after the 200.
		time.Sleep(50 * time.Millisecond)
		if c := readyz(t, d); c != 200 {
			t.Fatalf("/readyz %d after %s", c, after)
		}
	}
	now := time.Now().Unix()
	for name, id := range hostileIDs {
		events := map[string]*livekit.WebhookEvent{
			"job.room.sid": jobEnded("EV_h1", id, "AJ_Fine", "a", livekit.JobStatus_JS_SUCCESS),
			"job.id":       jobEnded("EV_h2", "RM_Fine", id, "a", livekit.JobStatus_JS_SUCCESS),
			"room.sid":     testenv.RoomFinished("EV_h3", id, livekit.RoomEndReason_ROOM_END_IDLE_TIMEOUT),
			"participant.sid": testenv.ParticipantLeft("EV_h4", "RM_Fine", "caller", livekit.ParticipantInfo_STANDARD,
				livekit.DisconnectReason_CLIENT_INITIATED, now),
			"egress_info.room_id": {Event: "egress_ended", Id: "EV_h5", EgressInfo: &livekit.EgressInfo{EgressId: "EG_Fine", RoomId: id}},
			"egress_info.egress_id": {Event: "egress_ended", Id: "EV_h6",
				EgressInfo: &livekit.EgressInfo{EgressId: id, RoomId: "RM_Fine"}},
			"id": jobEnded(id, "RM_Fine", "AJ_Fine", "a", livekit.JobStatus_JS_SUCCESS),
		}
		events["participant.sid"].Participant.Sid = id
		for field, ev := range events {
			body, err := protojson.Marshal(ev)
			if err != nil {
				t.Fatal(err)
			}
			code, msg := signedPost(t, d, body)
			if code != 400 || !strings.Contains(msg, field) {
				t.Errorf("webhook with %s in %s: %d %q, want 400 naming the field", name, field, code, strings.TrimSpace(msg))
			}
		}
		stillReady("webhooks with " + name)

		logs := testenv.JSLogs(id, "AJ_Fine", "a", map[string]any{"msg": "AgentSession closed", "reason": "user_initiated"})
		resp, msg := postOTLP(t, d, "logs", "application/json", logs, nil)
		if resp.StatusCode != 400 || !strings.Contains(msg, "room_id") {
			t.Errorf("OTLP logs with %s in room_id: %d %q, want 400 naming room_id", name, resp.StatusCode, strings.TrimSpace(msg))
		}
		stillReady("OTLP with " + name)

		upload, ct := testenv.PythonUpload(t, testenv.FullParts(testenv.Header(t, id, "AJ_Fine"), []byte(`{"items":[]}`), nil)[:2])
		resp, msg = post(t, "http://"+d.IngestAddr()+"/observability/recordings/v0",
			testenv.Bearer(testenv.PythonToken(t, testenv.Key, testenv.Secret, true)), ct, bytes.NewReader(upload))
		if resp.StatusCode != 400 || !strings.Contains(msg, "room_id") {
			t.Errorf("upload with %s in room_id: %d %q, want 400", name, resp.StatusCode, strings.TrimSpace(msg))
		}
		stillReady("upload with " + name)
	}

	// A sender's valid and hostile sessions in one OTLP request: the valid
	// one is kept, the other rejected (OTLP's partial success).
	mixed := testenv.JSLogs("RM_Mixed", "AJ_Mixed", "a", map[string]any{"msg": "AgentSession closed", "reason": "user_initiated"})
	var req map[string][]any
	if err := json.Unmarshal(mixed, &req); err != nil {
		t.Fatal(err)
	}
	var bad map[string][]any
	_ = json.Unmarshal(testenv.JSLogs(hostileIDs["4200 characters"], "AJ_Bad", "a", map[string]any{"msg": "x"}), &bad)
	req["resourceLogs"] = append(req["resourceLogs"], bad["resourceLogs"]...)
	mixed, _ = json.Marshal(req)
	resp, msg := postOTLP(t, d, "logs", "application/json", mixed, nil)
	if resp.StatusCode != 200 || !strings.Contains(msg, `"rejectedLogRecords":"1"`) || !strings.Contains(msg, "room_id") {
		t.Errorf("OTLP with one valid and one hostile session: %d %q, want 200 with a partial success", resp.StatusCode, msg)
	}

	// Webhooks an older lkscore stored before the id rule: each is
	// dead-lettered with its reason, and none disconnects the process.
	js := testenv.JetStream(t, ns.URL())
	stored := 0
	for _, name := range []string{"4200 characters", "a NUL byte", "a dot"} {
		for i, ev := range []*livekit.WebhookEvent{
			jobEnded("EV_old", hostileIDs[name], "AJ_Old", "a", livekit.JobStatus_JS_SUCCESS),
			jobEnded("EV_old", "RM_Old", hostileIDs[name], "a", livekit.JobStatus_JS_SUCCESS),
			testenv.RoomFinished("EV_old", hostileIDs[name], livekit.RoomEndReason_ROOM_END_IDLE_TIMEOUT),
		} {
			ev.Id = fmt.Sprintf("EV_old%d", stored)
			body, _ := protojson.Marshal(ev)
			msg := nats.NewMsg("lkscore.webhook." + ev.Event)
			msg.Data = body
			if _, err := js.PublishMsg(context.Background(), msg); err != nil {
				t.Fatalf("store an old hostile webhook (%s, %d): %v", name, i, err)
			}
			stored++
		}
	}
	admin := broker.NewDeadLetterAdmin(js, wire.NewSubjects("lkscore.", "LKSCORE"))
	var dls []wire.DeadLetter
	testenv.WaitFor(t, settleWait, "a dead letter for each old hostile webhook", func() bool {
		dls, _ = admin.List(context.Background(), wire.StageLocate, 100)
		return len(dls) >= stored
	})
	for _, dl := range dls {
		if !strings.Contains(dl.Error, " id ") || dl.Deliveries != 1 {
			t.Errorf("dead letter %s: %d deliveries, %q: want one at the first delivery, naming the id", dl.Subject, dl.Deliveries, dl.Error)
		}
	}
	stillReady("old hostile webhooks")

	// A valid session after all of it is scored, and so is one after a
	// restart on the same data dir.
	session := func(d *Daemon, room, job string) {
		t.Helper()
		dir := t.TempDir()
		writeScenarioCopy(t, dir, "1_clean_call", room, job, "")
		uploadDir(t, d, dir)
		sendWebhook(t, d, jobEnded("EV_"+job, room, job, "a", livekit.JobStatus_JS_SUCCESS))
		testenv.WaitFor(t, settleWait, room+"'s scorecard", func() bool {
			return slices.ContainsFunc(results(t, ns.URL()), func(c session.Scorecard) bool { return c.Session.RoomID == room })
		})
	}
	session(d, "RM_AfterHostile", "AJ_AfterHostile")
	if err := d.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	d, _ = startDaemon(t, cfg)
	if c := readyz(t, d); c != 200 {
		t.Fatalf("/readyz %d after a restart on the same data dir", c)
	}
	session(d, "RM_AfterRestart", "AJ_AfterRestart")
}

// TestUnsignedSlowBodyRefusedAtOnce: a request without a valid token whose
// chunked body trickles in at 6 bytes a second gets its 401 at once, not at
// http.body_timeout, on each ingest path (docs/security.md: an
// unauthenticated request costs its headers only).
func TestUnsignedSlowBodyRefusedAtOnce(t *testing.T) {
	t.Parallel()
	ns := startNATS(t)
	cfg := pipelineConfig(t, ns.URL())
	cfg.HTTP.BodyTimeout = 20 * time.Second
	d, _ := startDaemon(t, cfg)
	for _, path := range []string{"/webhook", "/observability/recordings/v0", "/observability/logs/otlp/v0"} {
		conn, err := net.Dial("tcp", d.IngestAddr())
		if err != nil {
			t.Fatal(err)
		}
		stop := make(chan struct{})
		done := make(chan struct{})
		go func() {
			defer close(done)
			_, _ = fmt.Fprintf(conn, "POST %s HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer not-a-token\r\n"+
				"Content-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n", path)
			for {
				if _, err := conn.Write([]byte("6\r\n{\"a\":1\r\n")); err != nil {
					return
				}
				select {
				case <-stop:
					return
				case <-time.After(time.Second):
				}
			}
		}()
		start := time.Now()
		_ = conn.SetReadDeadline(start.Add(10 * time.Second))
		resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
		took := time.Since(start)
		close(stop)
		_ = conn.Close()
		<-done
		if err != nil {
			t.Errorf("%s: no answer to an unsigned trickled body after %v: %v", path, took.Round(time.Millisecond), err)
			continue
		}
		_ = resp.Body.Close()
		if resp.StatusCode != 401 || took > 3*time.Second {
			t.Errorf("%s: %d after %v, want 401 at once", path, resp.StatusCode, took.Round(time.Millisecond))
		}
	}
}
