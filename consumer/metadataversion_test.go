package consumer

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http/httptest"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/livekit/protocol/livekit"
	"github.com/livekit/protocol/webhook"

	"github.com/lkscore/lkscore/config"
	"github.com/lkscore/lkscore/consumer/internal/ingest"
	"github.com/lkscore/lkscore/internal/testenv"
	"github.com/lkscore/lkscore/notify"
	"github.com/lkscore/lkscore/regress"
	"github.com/lkscore/lkscore/wire"
)

// versionedSession is one session of TestMetadataVersionAlerts: its agent
// version is named only in its job's metadata, or only in its room's.
type versionedSession struct {
	room, job, version string
	inRoom             bool    // the version is in the room's metadata, not the job's
	slowBy             float64 // seconds added to every agent turn's e2e_latency
	toolError          bool    // the session's tool call failed
}

// metadataMarker is a value of the sessions' metadata other than the
// version: no stored byte may hold it.
func metadataMarker(s versionedSession) string { return "MDMARK-" + s.job }

// chat is 1_clean_call's chat history with the session's latencies (each
// turn's jittered by rng) and tool outcome.
func (s versionedSession) chat(t *testing.T, rng *rand.Rand) []byte {
	t.Helper()
	var doc struct {
		Items []map[string]any `json:"items"`
	}
	if err := json.Unmarshal(mustReadFile(t, filepath.Join(scenarioDir, "1_clean_call", "chat_history.json")), &doc); err != nil {
		t.Fatal(err)
	}
	for _, it := range doc.Items {
		if m, ok := it["metrics"].(map[string]any); ok {
			if v, ok := m["e2e_latency"].(float64); ok {
				m["e2e_latency"] = v + s.slowBy + (rng.Float64()-0.5)*0.2
			}
		}
		if it["type"] == "function_call_output" && s.toolError {
			it["is_error"], it["output"] = true, "upstream timeout"
		}
	}
	b, err := json.Marshal(doc)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// jobEnded is the session's agent_job_ended event as livekit-server sends
// it, the version in the job's or the room's metadata beside other keys.
func (s versionedSession) jobEnded() *livekit.WebhookEvent {
	md := fmt.Sprintf(`{"version": %q, "customer": %q}`, s.version, metadataMarker(s))
	other := fmt.Sprintf(`{"customer": %q}`, metadataMarker(s))
	job := &livekit.Job{Id: s.job, AgentName: "am-agent", Metadata: md, Room: &livekit.Room{Sid: s.room, Name: "am-room", Metadata: other},
		State: &livekit.JobState{Status: livekit.JobStatus_JS_SUCCESS}}
	if s.inRoom {
		job.Metadata, job.Room.Metadata = other, md
	}
	return &livekit.WebhookEvent{Event: webhook.EventAgentJobEnded, Id: "EV_" + s.job, CreatedAt: time.Now().Unix(), Job: job}
}

// TestMetadataVersionAlerts (issue 57): a team names its agent's version
// only in the job's metadata (or the room's), as LiveKit carries it in
// agent_job_ended, with regression.version_metadata_key. Through ingest,
// the stored webhook (which keeps no metadata), the locator, the
// scorecard and the regression history, version v2 (+600 ms, 20% tool
// errors) raises a regression alert against v1, once on NATS, once in a
// real Alertmanager and once at a webhook; every scorecard carries its
// version. Each stored webhook keeps the version in its
// wire.HeaderMetadataVersion and no other byte of the metadata.
func TestMetadataVersionAlerts(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: sends 30 sessions through the pipeline and the alert path")
	}
	t.Parallel()
	ns := startNATS(t)
	am := testenv.StartAlertmanager(t)
	hooks := &hookReceiver{}
	srv := httptest.NewServer(hooks)
	t.Cleanup(srv.Close)
	cfg := pipelineConfig(t, ns.URL())
	cfg.Regression.Detect.MinSessions = 10
	cfg.Regression.EvaluateEvery = 5
	cfg.Regression.VersionMetadataKey = "version"
	cfg.Regression.MinFiring = 0
	cfg.Alerts.Alertmanager.URLs = []string{am.URL}
	cfg.Alerts.Alertmanager.ResendInterval = time.Hour // only the delivery stage posts during the test
	cfg.Alerts.Webhooks = []config.AlertWebhook{{Name: "raw", URL: srv.URL + "/json", Format: notify.FormatJSON}}
	d, _ := startDaemon(t, cfg)
	notifier, delivered := newNotifier(t, "http://"+d.IngestAddr()+"/webhook", testenv.Key, testenv.Secret)

	rng := rand.New(rand.NewPCG(57, 1))
	var sessions []versionedSession
	for i := range 30 {
		s := versionedSession{room: fmt.Sprintf("RM_amv%02d", i), job: fmt.Sprintf("AJ_amv%02d", i), version: "v1", inRoom: i%3 == 1}
		if i >= 10 {
			s.version, s.slowBy, s.toolError = "v2", 0.6, i%5 == 0
		}
		sessions = append(sessions, s)
	}
	send := func(batch []versionedSession) {
		for _, s := range batch {
			header := testenv.HeaderWithSummary(t, s.room, s.job, `{"close_reason":"CR_PARTICIPANT_DISCONNECTED"}`)
			body, ct := testenv.PythonUpload(t, testenv.FullParts(header, s.chat(t, rng), nil)[:2])
			if resp, msg := post(t, "http://"+d.IngestAddr()+"/observability/recordings/v0",
				testenv.Bearer(testenv.PythonToken(t, testenv.Key, testenv.Secret, true)), ct, bytes.NewReader(body)); resp.StatusCode != 200 {
				t.Fatalf("upload %s: %d %s", s.job, resp.StatusCode, msg)
			}
			if err := notifier.QueueNotify(context.Background(), s.jobEnded()); err != nil {
				t.Fatal(err)
			}
			if whi := awaitDelivery(t, delivered); whi.SendError != "" || whi.IsDropped {
				t.Fatalf("%s: delivery failed: dropped=%v err %q", s.job, whi.IsDropped, whi.SendError)
			}
		}
	}
	url := d.NATSURL()
	// v1 is scored first: it is v2's baseline.
	send(sessions[:10])
	testenv.WaitFor(t, settleWait, "v1's scorecards", func() bool { return len(streamMsgs(t, url, "LKSCORE_RESULTS")) == 10 })
	send(sessions[10:])
	testenv.WaitFor(t, settleWait, "every scorecard", func() bool { return len(streamMsgs(t, url, "LKSCORE_RESULTS")) == 30 })

	want := map[string]string{}
	for _, s := range sessions {
		want[s.room+"/"+s.job] = s.version
	}
	for _, card := range results(t, url) {
		k := regress.KeyOf(&card, cfg.Regression.VersionTag)
		if v := want[card.Session.Key]; k.Agent != "am-agent" || k.Version != v {
			t.Errorf("%s: scored as %s %s, want am-agent %s (tags %v)", card.Session.Key, k.Agent, k.Version, v, card.Session.Tags)
		}
	}

	var fired []wire.Alert
	testenv.WaitFor(t, settleWait, "v2's regression alert", func() bool {
		fired = alertMsgs(t, url)
		return slices.ContainsFunc(fired, func(a wire.Alert) bool { return a.Kind == regress.KindRegression && a.Status == wire.AlertFiring })
	})
	time.Sleep(2 * time.Second) // a duplicate, or another metric's alert, would arrive now
	fired = alertMsgs(t, url)
	seen := map[string]int{}
	for _, a := range fired {
		seen[a.Kind+"/"+a.Metric+"/"+a.Status]++
		if a.Kind == regress.KindRegression && (a.Agent != "am-agent" || a.Version != "v2" || a.BaselineOf != "version v1") {
			t.Errorf("regression alert %s: agent %s version %s against %q", a.Metric, a.Agent, a.Version, a.BaselineOf)
		}
	}
	for k, n := range seen {
		if n != 1 {
			t.Errorf("%s published %d times", k, n)
		}
	}
	if seen[regress.KindRegression+"/"+regress.MetricE2EP50+"/"+wire.AlertFiring] == 0 {
		t.Errorf("no regression alert on e2e latency p50: %v", summary(fired))
	}
	testenv.WaitFor(t, settleWait, "the alerts in Alertmanager and at the webhook", func() bool {
		return am.Received(t)["firing"] == len(fired) && len(hooks.byPath("/json")) == len(fired)
	})
	time.Sleep(time.Second)
	if got := am.Received(t); got["firing"] != len(fired) {
		t.Errorf("Alertmanager received %v, want %d firing once each", got, len(fired))
	}
	for _, a := range am.Alerts(t) {
		if a.Labels["agent"] != "am-agent" || a.Labels["version"] != "v2" {
			t.Errorf("Alertmanager holds %v", a.Labels)
		}
	}
	keys := map[string]int{}
	for _, p := range hooks.byPath("/json") {
		keys[p.key]++
	}
	for _, a := range fired {
		if keys[a.ID+"#"+a.Status] != 1 {
			t.Errorf("the webhook got %s %d times", a.ID+"#"+a.Status, keys[a.ID+"#"+a.Status])
		}
	}
	checkStoredVersions(t, url, sessions)
}

// checkStoredVersions: each stored agent_job_ended keeps its version in
// wire.HeaderMetadataVersion and no other byte of its metadata; no other
// header names metadata; no stream or bucket message holds a marker.
func checkStoredVersions(t *testing.T, url string, sessions []versionedSession) {
	t.Helper()
	byEvent := map[string]versionedSession{}
	var markers []string
	for _, s := range sessions {
		byEvent["EV_"+s.job] = s
		markers = append(markers, metadataMarker(s))
	}
	allowed := []string{wire.HeaderEvent, wire.HeaderAPIKey, wire.HeaderMetadataVersion, "Nats-Msg-Id", "Nats-Expected-Stream"}
	for _, m := range streamMsgs(t, url, "LKSCORE_WEBHOOKS") {
		var ev livekit.WebhookEvent
		if err := ingest.DecodeEvent(m.Data, &ev); err != nil {
			t.Fatal(err)
		}
		s := byEvent[ev.Id]
		if got := m.Header.Get(wire.HeaderMetadataVersion); got != s.version {
			t.Errorf("%s: stored version %q, want %q", ev.Id, got, s.version)
		}
		if ev.GetJob().GetMetadata() != "" || ev.GetJob().GetRoom().GetMetadata() != "" || ev.GetRoom().GetMetadata() != "" {
			t.Errorf("%s keeps metadata: %s", ev.Id, m.Data)
		}
		for k := range m.Header {
			if !slices.Contains(allowed, k) {
				t.Errorf("%s: header %s=%v", ev.Id, k, m.Header[k])
			}
		}
	}
	for _, l := range leaked(storedMessages(t, url), markers) {
		t.Errorf("stored message keeps metadata: %s", l)
	}
	if !strings.Contains(storedMessages(t, url), "am-agent") {
		t.Fatal("the scan sees no stored webhook: it proves nothing")
	}
}
