package consumer

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/livekit/protocol/auth"
	"github.com/livekit/protocol/livekit"
	"github.com/livekit/protocol/utils/protojson"
	"github.com/livekit/protocol/webhook"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/lkscore/lkscore/internal/testenv"
	"github.com/lkscore/lkscore/wire"
)

var initStats sync.Once

// newNotifier returns livekit/protocol's own notifier (the code LiveKit
// servers run) pointed at url, and a channel of its delivery reports.
func newNotifier(t *testing.T, url, key, secret string) (webhook.QueuedNotifier, <-chan *livekit.WebhookInfo) {
	t.Helper()
	initStats.Do(func() { webhook.InitWebhookStats(nil) })
	cfg := webhook.DefaultWebHookConfig
	cfg.URLs = []string{url}
	cfg.APIKey = key
	n, err := webhook.NewDefaultNotifier(cfg, auth.NewSimpleKeyProvider(key, secret))
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan *livekit.WebhookInfo, 100)
	n.RegisterProcessedHook(func(_ context.Context, whi *livekit.WebhookInfo) { done <- whi })
	t.Cleanup(func() { n.Stop(true) })
	return n, done
}

func awaitDelivery(t *testing.T, done <-chan *livekit.WebhookInfo) *livekit.WebhookInfo {
	t.Helper()
	select {
	case whi := <-done:
		return whi
	case <-time.After(30 * time.Second):
		t.Fatal("notifier reported no delivery")
		return nil
	}
}

func TestWebhookFromLiveKitNotifier(t *testing.T) {
	t.Parallel()
	ns := startNATS(t)
	d, reg := startDaemon(t, testConfig(t, ns.URL()))
	n, done := newNotifier(t, "http://"+d.IngestAddr()+"/webhook", testenv.Key, testenv.Secret)

	events := []*livekit.WebhookEvent{
		{Event: webhook.EventRoomFinished, Id: "EV_room", Room: &livekit.Room{Sid: "RM_1", Name: "r1"}, CreatedAt: time.Now().Unix()},
		{Event: webhook.EventAgentJobEnded, Id: "EV_job", Job: &livekit.Job{Id: "AJ_1", Room: &livekit.Room{Sid: "RM_1"}}},
		{Event: webhook.EventEgressEnded, Id: "EV_egress", EgressInfo: &livekit.EgressInfo{EgressId: "EG_1", RoomId: "RM_1"}},
		{Event: webhook.EventParticipantJoined, Id: "EV_ignored", Room: &livekit.Room{Name: "r1"}, Participant: &livekit.ParticipantInfo{Identity: "u"}},
		// The same event queued twice: LiveKit's at-least-once delivery.
		{Event: webhook.EventRoomFinished, Id: "EV_room", Room: &livekit.Room{Sid: "RM_1", Name: "r1"}, CreatedAt: time.Now().Unix()},
	}
	for _, ev := range events {
		if err := n.QueueNotify(context.Background(), ev); err != nil {
			t.Fatal(err)
		}
		whi := awaitDelivery(t, done)
		// The hook reports no status code; a non-2xx answer shows as SendError.
		if whi.SendError != "" || whi.IsDropped {
			t.Fatalf("%s: delivery failed: dropped=%v err %q", ev.Id, whi.IsDropped, whi.SendError)
		}
	}

	msgs := streamMsgs(t, ns.URL(), "LKSCORE_WEBHOOKS")
	var got []string
	for _, m := range msgs {
		got = append(got, m.Subject+" "+m.Header.Get(jetstream.MsgIDHeader))
		var ev livekit.WebhookEvent
		if err := protojson.Unmarshal(m.Data, &ev); err != nil {
			t.Fatalf("stored body is not a WebhookEvent: %v", err)
		}
		if ev.Id != m.Header.Get(jetstream.MsgIDHeader) || m.Header.Get(wire.HeaderAPIKey) != testenv.Key {
			t.Errorf("stored message headers %v do not match event %s", m.Header, ev.Id)
		}
	}
	want := []string{
		"lkscore.webhook.room_finished EV_room",
		"lkscore.webhook.agent_job_ended EV_job",
		"lkscore.webhook.egress_ended EV_egress",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("stored:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if v := counter(t, reg, "lkscore_webhook_events_total", map[string]string{"event": "participant_joined", "outcome": "ignored"}); v != 1 {
		t.Errorf("ignored events = %v, want 1", v)
	}
	if v := counter(t, reg, "lkscore_webhook_events_total", map[string]string{"outcome": "duplicate"}); v != 1 {
		t.Errorf("duplicate events = %v, want 1", v)
	}
}

func TestWebhookRefusals(t *testing.T) {
	t.Parallel()
	ns := startNATS(t)
	cfg := testConfig(t, ns.URL())
	d, _ := startDaemon(t, cfg)
	url := "http://" + d.IngestAddr() + "/webhook"
	good := []byte(`{"event":"room_finished","id":"EV_ok","room":{"sid":"RM_x","name":"x"},"createdAt":"1764417600"}`)
	big := []byte(`{"event":"room_finished","id":"EV_big","room":{"metadata":"` + strings.Repeat("a", int(cfg.Webhook.MaxBodyBytes)) + `"}}`)

	tests := []struct {
		name   string
		body   []byte
		auth   string
		chunk  bool // hide Content-Length
		status int
	}{
		{"valid raw token", good, testenv.SignWebhook(t, testenv.Key, testenv.Secret, good, 5*time.Minute), false, 200},
		{"valid bearer token", good, "Bearer " + testenv.SignWebhook(t, testenv.Key, testenv.Secret, good, 5*time.Minute), false, 200},
		{"missing auth", good, "", false, 401},
		{"garbage token", good, "not-a-jwt", false, 401},
		{"wrong secret", good, testenv.SignWebhook(t, testenv.Key, "other-secret", good, 5*time.Minute), false, 401},
		{"unknown key", good, testenv.SignWebhook(t, "APIother", testenv.Secret, good, 5*time.Minute), false, 401},
		{"expired token", good, testenv.SignWebhook(t, testenv.Key, testenv.Secret, good, -3*time.Minute), false, 401},
		{"tampered body", bytes.Replace(good, []byte("RM_x"), []byte("RM_y"), 1), testenv.SignWebhook(t, testenv.Key, testenv.Secret, good, 5*time.Minute), false, 401},
		{"oversize with length", big, testenv.SignWebhook(t, testenv.Key, testenv.Secret, big, 5*time.Minute), false, 413},
		{"oversize chunked", big, testenv.SignWebhook(t, testenv.Key, testenv.Secret, big, 5*time.Minute), true, 413},
		{"signed non-event", []byte(`[1,2,3]`), testenv.SignWebhook(t, testenv.Key, testenv.Secret, []byte(`[1,2,3]`), 5*time.Minute), false, 400},
		{"signed event without id", []byte(`{"event":"room_finished"}`), testenv.SignWebhook(t, testenv.Key, testenv.Secret, []byte(`{"event":"room_finished"}`), 5*time.Minute), false, 400},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var body = bytes.NewReader(tc.body)
			req, _ := http.NewRequest(http.MethodPost, url, body)
			if tc.chunk {
				req, _ = http.NewRequest(http.MethodPost, url, struct{ *bytes.Reader }{body})
			}
			if tc.auth != "" {
				req.Header.Set("Authorization", tc.auth)
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != tc.status {
				t.Fatalf("status %d, want %d", resp.StatusCode, tc.status)
			}
		})
	}
	t.Run("GET is 405", func(t *testing.T) {
		resp, err := http.Get(url)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusMethodNotAllowed {
			t.Fatalf("status %d, want 405", resp.StatusCode)
		}
	})
	if msgs := streamMsgs(t, ns.URL(), "LKSCORE_WEBHOOKS"); len(msgs) != 1 {
		t.Fatalf("stored %d messages, want exactly 1 (the valid event, once)", len(msgs))
	}
}

// TestWebhookReplay replays one captured signed request: one message.
func TestWebhookReplay(t *testing.T) {
	t.Parallel()
	ns := startNATS(t)
	d, _ := startDaemon(t, testConfig(t, ns.URL()))
	body := []byte(`{"event":"agent_job_ended","id":"EV_replay","job":{"id":"AJ_r","room":{"sid":"RM_r"}}}`)
	tok := testenv.SignWebhook(t, testenv.Key, testenv.Secret, body, 5*time.Minute)
	for i := 0; i < 3; i++ {
		resp, _ := post(t, "http://"+d.IngestAddr()+"/webhook", tok, "application/webhook+json", bytes.NewReader(body))
		if resp.StatusCode != 200 {
			t.Fatalf("replay %d: status %d", i, resp.StatusCode)
		}
	}
	if msgs := streamMsgs(t, ns.URL(), "LKSCORE_WEBHOOKS"); len(msgs) != 1 {
		t.Fatalf("stored %d messages, want 1", len(msgs))
	}
}

// TestWebhookNATSOutage: NATS down → 503 (LiveKit retries); back → 200;
// nothing that got a 200 is lost.
func TestWebhookNATSOutage(t *testing.T) {
	ns := startNATS(t)
	cfg := testConfig(t, ns.URL())
	cfg.NATS.PublishTimeout = time.Second
	d, _ := startDaemon(t, cfg)
	url := "http://" + d.IngestAddr() + "/webhook"
	send := func(id string) int {
		body := []byte(fmt.Sprintf(`{"event":"room_finished","id":%q,"room":{"sid":"RM_o"}}`, id))
		resp, _ := post(t, url, testenv.SignWebhook(t, testenv.Key, testenv.Secret, body, 5*time.Minute), "", bytes.NewReader(body))
		return resp.StatusCode
	}
	if s := send("EV_before"); s != 200 {
		t.Fatalf("before outage: %d", s)
	}
	ns.Stop()
	start := time.Now()
	if s := send("EV_during"); s != http.StatusServiceUnavailable {
		t.Fatalf("during outage: %d, want 503", s)
	}
	if el := time.Since(start); el > 5*time.Second {
		t.Errorf("503 took %s; LiveKit gives up after 10s", el)
	}
	ns.Start()
	testenv.WaitFor(t, settleWait, "reconnect", func() bool { return send("EV_after") == 200 })
	if s := send("EV_during"); s != 200 { // LiveKit's retry of the refused event
		t.Fatalf("retry after outage: %d", s)
	}
	var ids []string
	for _, m := range streamMsgs(t, ns.URL(), "LKSCORE_WEBHOOKS") {
		ids = append(ids, m.Header.Get(jetstream.MsgIDHeader))
	}
	if got := strings.Join(ids, ","); got != "EV_before,EV_after,EV_during" {
		t.Fatalf("stored %s", got)
	}
}
