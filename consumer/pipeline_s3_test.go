package consumer

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/livekit/protocol/auth"
	"github.com/livekit/protocol/livekit"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/lkscore/lkscore/consumer/broker"
	"github.com/lkscore/lkscore/consumer/internal/locate"
	"github.com/lkscore/lkscore/internal/testenv"
	"github.com/lkscore/lkscore/store"
	"github.com/lkscore/lkscore/wire"
)

// TestPipelineMaxDeliveries: a message that keeps failing with a transient
// error (here its session facts cannot be written: the bucket is gone) ends
// in the DLQ through JetStream's max-deliveries advisory.
func TestPipelineMaxDeliveries(t *testing.T) {
	t.Parallel()
	ns := startNATS(t)
	cfg := pipelineConfig(t, ns.URL())
	cfg.Pipeline.MaxDeliver = 3
	d, reg := startDaemon(t, cfg)
	nc, _ := nats.Connect(ns.URL())
	defer nc.Close()
	js, _ := jetstream.New(nc)
	if err := js.DeleteKeyValue(context.Background(), "LKSCORE_SESSION_FACTS"); err != nil {
		t.Fatal(err)
	}
	sendWebhook(t, d, jobEnded("EV_down", "RM_Down", "AJ_Down", "a", livekit.JobStatus_JS_SUCCESS))

	admin := broker.NewDeadLetterAdmin(js, wire.NewSubjects("lkscore.", "LKSCORE"))
	var dls []wire.DeadLetter
	testenv.WaitFor(t, settleWait, "a max-deliveries dead letter", func() bool {
		dls, _ = admin.List(context.Background(), wire.StageLocate, 10)
		return len(dls) == 1
	})
	if dl := dls[0]; !strings.Contains(dl.Error, "max deliveries (3)") || dl.Subject != "lkscore.webhook.agent_job_ended" || dl.Deliveries != 3 {
		t.Fatalf("dead letter %+v", dl)
	}
	if v := counter(t, reg, "lkscore_pipeline_retried_total", map[string]string{"stage": wire.StageLocate, "reason": "transient"}); v < 2 {
		t.Errorf("retries counted %v", v)
	}
}

// TestPipelineStoreOutagePauses: while the store is down the pipeline stops
// taking work (and says so), burns no deliveries, and resumes within a few
// health intervals of the store's return.
func TestPipelineStoreOutagePauses(t *testing.T) {
	srv := testenv.StartS3(t)
	testenv.SetAWSEnv(t, testenv.S3SecretKey)
	st := testenv.OpenBucket(t, srv, "rec", store.NewS3)
	testenv.PutSession(t, st.Begin, "1_clean_call", "RM_Out/AJ_Out/")
	ns := startNATS(t)
	cfg := pipelineConfig(t, ns.URL())
	cfg.S3 = srv.Config("rec")
	cfg.S3.MaxAttempts, cfg.S3.RequestTimeout = 1, time.Second
	cfg.Pipeline.MaxDeliver = 3
	cfg.Pipeline.HealthInterval = 200 * time.Millisecond
	d, reg := startDaemon(t, cfg)
	srv.Stop()
	sendWebhook(t, d, jobEnded("EV_out", "RM_Out", "AJ_Out", "agent-out", livekit.JobStatus_JS_SUCCESS))
	testenv.WaitFor(t, settleWait, "the store marked down", func() bool {
		return gauge(t, reg, "lkscore_dependency_up", map[string]string{"dependency": "store"}) == 0
	})
	if code := readyz(t, d); code != 503 {
		t.Errorf("/readyz = %d while the store is down", code)
	}
	time.Sleep(10 * cfg.Pipeline.HealthInterval) // well past max_deliver at any backoff
	srv.Start(t)
	back := time.Now()
	testenv.WaitFor(t, settleWait, "the session scored", func() bool { return len(streamMsgs(t, ns.URL(), "LKSCORE_RESULTS")) == 1 })
	if took := time.Since(back); took > 5*cfg.Pipeline.HealthInterval+cfg.Pipeline.SettleWindow+time.Second {
		t.Errorf("resumed %s after the store came back", took)
	}
	if n := len(streamMsgs(t, ns.URL(), "LKSCORE_DLQ")); n != 0 {
		t.Errorf("%d dead letters: the outage burnt deliveries", n)
	}
	if code := readyz(t, d); code != 200 {
		t.Errorf("/readyz = %d after the store came back", code)
	}
}

// TestPipelineEgressEnded: an egress file holding a raw multipart upload is
// located and scored; an audio file is linked to its room.
func TestPipelineEgressEnded(t *testing.T) {
	srv := testenv.StartS3(t)
	testenv.SetAWSEnv(t, testenv.S3SecretKey)
	testenv.OpenBucket(t, srv, "rec", store.NewS3)
	putRawUpload(t, testenv.OpenBucket(t, srv, "egress-out", store.NewS3), "5_bad_hearing", "RM_BadHearing05.upload")
	ctx := context.Background()

	ns := startNATS(t)
	cfg := pipelineConfig(t, ns.URL())
	cfg.S3 = srv.Config("rec")
	d, _ := startDaemon(t, cfg)
	sendWebhook(t, d, &livekit.WebhookEvent{Event: "egress_ended", Id: "EV_eg", EgressInfo: &livekit.EgressInfo{
		EgressId: "EG_1", RoomId: "RM_BadHearing05", RoomName: "hearing", Status: livekit.EgressStatus_EGRESS_COMPLETE,
		FileResults: []*livekit.FileInfo{
			{Location: srv.Endpoint + "/egress-out/uploads/RM_BadHearing05.upload"},
			{Location: "https://egress-out.s3.amazonaws.com/audio/RM_BadHearing05.ogg"},
		}}})
	testenv.WaitFor(t, settleWait, "the egress upload to be scored", func() bool { return len(streamMsgs(t, ns.URL(), "LKSCORE_RESULTS")) == 1 })
	cards := results(t, ns.URL())
	if cards[0].Session.Key != "RM_BadHearing05/AJ_BadHearing05" || cards[0].Session.Source != "s3://egress-out/uploads/RM_BadHearing05.upload" {
		t.Fatalf("scorecard session %+v", cards[0].Session)
	}
	nc, _ := nats.Connect(ns.URL())
	defer nc.Close()
	js, _ := jetstream.New(nc)
	kv, err := js.KeyValue(ctx, "LKSCORE_EGRESS_LINKS")
	if err != nil {
		t.Fatal(err)
	}
	entry, err := kv.Get(ctx, "RM_BadHearing05.EG_1")
	if err != nil {
		t.Fatal(err)
	}
	var link locate.EgressLink
	_ = json.Unmarshal(entry.Value(), &link)
	if len(link.Locations) != 1 || !strings.HasSuffix(link.Locations[0], ".ogg") || link.Status != "EGRESS_COMPLETE" {
		t.Fatalf("egress link %+v", link)
	}
}

// fakeEgressAPI serves LiveKit's Twirp Egress API (the protocol's generated
// server) with a fixed ListEgress answer; other methods are not served.
type fakeEgressAPI struct {
	livekit.Egress
	t     *testing.T
	items []*livekit.EgressInfo
	calls atomic.Int32
}

func (f *fakeEgressAPI) ListEgress(ctx context.Context, _ *livekit.ListEgressRequest) (*livekit.ListEgressResponse, error) {
	f.calls.Add(1)
	return &livekit.ListEgressResponse{Items: f.items}, nil
}

// requireRecordGrant checks requests the way LiveKit does: a token signed
// by a known key with the roomRecord grant.
func requireRecordGrant(t *testing.T, h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		v, err := auth.ParseAPIToken(strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer "))
		if err == nil && v.APIKey() == testenv.Key {
			if _, grants, err := v.Verify(testenv.Secret); err == nil && grants.Video != nil && grants.Video.RoomRecord {
				h.ServeHTTP(w, r)
				return
			}
		}
		t.Errorf("ListEgress without a valid roomRecord token")
		http.Error(w, "unauthorized", http.StatusUnauthorized)
	})
}

// TestPipelineEgressReconciler: an egress_ended webhook LiveKit dropped is
// recovered through ListEgress (server-sdk-go's EgressClient).
func TestPipelineEgressReconciler(t *testing.T) {
	srv := testenv.StartS3(t)
	testenv.SetAWSEnv(t, testenv.S3SecretKey)
	testenv.OpenBucket(t, srv, "rec", store.NewS3)
	putRawUpload(t, testenv.OpenBucket(t, srv, "egress-out", store.NewS3), "3_barge_in", "barge.upload")

	api := &fakeEgressAPI{t: t, items: []*livekit.EgressInfo{
		{EgressId: "EG_done", RoomId: "RM_BargeIn03", Status: livekit.EgressStatus_EGRESS_COMPLETE, EndedAt: time.Now().UnixNano(),
			FileResults: []*livekit.FileInfo{{Location: srv.Endpoint + "/egress-out/uploads/barge.upload"}}},
		{EgressId: "EG_active", RoomId: "RM_Other", Status: livekit.EgressStatus_EGRESS_ACTIVE,
			FileResults: []*livekit.FileInfo{{Location: srv.Endpoint + "/egress-out/uploads/missing.upload"}}},
	}}
	lk := httptest.NewServer(requireRecordGrant(t, livekit.NewEgressServer(api)))
	defer lk.Close()

	ns := startNATS(t)
	cfg := pipelineConfig(t, ns.URL())
	cfg.S3 = srv.Config("rec")
	cfg.Pipeline.LiveKitURL, cfg.Pipeline.ReconcileInterval = lk.URL, 200*time.Millisecond
	startDaemon(t, cfg)
	testenv.WaitFor(t, settleWait, "the reconciled egress to be scored", func() bool { return len(streamMsgs(t, ns.URL(), "LKSCORE_RESULTS")) == 1 })
	testenv.WaitFor(t, settleWait, "another reconcile round", func() bool { return api.calls.Load() >= 3 })
	cards := results(t, ns.URL())
	if len(cards) != 1 || cards[0].Session.Key != "RM_BargeIn03/AJ_BargeIn03" {
		t.Fatalf("scorecards %+v", cards)
	}
}

// TestPipelineSweep: a session written to the store without any
// announcement is found by the sweep, and scored once however often it runs.
func TestPipelineSweep(t *testing.T) {
	t.Parallel()
	ns := startNATS(t)
	cfg := pipelineConfig(t, ns.URL())
	cfg.Pipeline.SweepInterval = 100 * time.Millisecond
	dir := filepath.Join(cfg.DataDir, "recordings", "RM_Swept", "AJ_Swept")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	writeScenarioCopy(t, dir, "1_clean_call", "RM_Swept", "AJ_Swept", `{"close_reason":"CR_COMPLETED"}`)
	_, reg := startDaemon(t, cfg)
	testenv.WaitFor(t, settleWait, "the swept session to be scored", func() bool { return len(streamMsgs(t, ns.URL(), "LKSCORE_RESULTS")) == 1 })
	runs := counter(t, reg, "lkscore_recovery_runs_total", map[string]string{"kind": "sweep"})
	testenv.WaitFor(t, settleWait, "three more sweeps", func() bool {
		return counter(t, reg, "lkscore_recovery_runs_total", map[string]string{"kind": "sweep"}) >= runs+3
	})
	quiesce(t, ns.URL(), defaultConsumers)
	if n := len(streamMsgs(t, ns.URL(), "LKSCORE_SESSIONS")); n != 1 {
		t.Fatalf("%d session messages, want 1", n)
	}
	if n := len(streamMsgs(t, ns.URL(), "LKSCORE_RESULTS")); n != 1 {
		t.Fatalf("%d scorecards, want 1", n)
	}
}

// putRawUpload stores a scenario's upload as one raw multipart object under
// uploads/, the way an egress-side recorder might keep the SDK's POST body.
func putRawUpload(t *testing.T, st *store.S3, scenario, name string) {
	t.Helper()
	ctx := context.Background()
	header := mustReadFile(t, filepath.Join(scenarioDir, scenario, "header.binpb"))
	chat := mustReadFile(t, filepath.Join(scenarioDir, scenario, "chat_history.json"))
	body, _ := testenv.PythonUpload(t, testenv.FullParts(header, chat, []byte("OggS")))
	up, err := st.Begin(ctx, "uploads/")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := up.Write(ctx, name, bytes.NewReader(body), 1<<20); err != nil {
		t.Fatal(err)
	}
	if err := up.Commit(ctx); err != nil {
		t.Fatal(err)
	}
}
