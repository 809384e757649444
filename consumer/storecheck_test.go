package consumer

import (
	"context"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/livekit/protocol/livekit"

	"github.com/lkscore/lkscore/consumer/broker"
	"github.com/lkscore/lkscore/internal/testenv"
	"github.com/lkscore/lkscore/wire"
)

// TestStoreNotShared: ingest and worker as separate processes with separate
// local data dirs (the chart's split without S3). The worker dead-letters the
// first upload's notice as store_not_shared within 10 s, counts it, logs it
// and says so on /readyz; once a worker runs on the ingest's store, the dead
// letter replays and the session is scored once.
func TestStoreNotShared(t *testing.T) {
	ns := startNATS(t)
	icfg := pipelineConfig(t, ns.URL())
	icfg.Role = "ingest"
	ingest, _ := startDaemon(t, icfg)
	wcfg := pipelineConfig(t, ns.URL()) // its own data dir
	wcfg.Role = "worker"
	worker, wreg := startDaemon(t, wcfg)

	sendWebhook(t, ingest, jobEnded("EV_ns", "RM_CleanCall01", "AJ_CleanCall01", "booking-agent", livekit.JobStatus_JS_SUCCESS))
	start := time.Now()
	uploadScenario(t, ingest, "1_clean_call", nil)
	testenv.WaitFor(t, settleWait, "the dead letter", func() bool { return len(streamMsgs(t, ns.URL(), "LKSCORE_DLQ")) == 1 })
	if took := time.Since(start); took > 10*time.Second {
		t.Errorf("dead-lettered after %s, want within 10 s", took)
	}
	dl := streamMsgs(t, ns.URL(), "LKSCORE_DLQ")[0]
	if e := dl.Header.Get(wire.HeaderDLQError); !strings.HasPrefix(e, "store_not_shared: upload stored in file://"+icfg.DataDir) ||
		!strings.Contains(e, "this worker reads file://"+wcfg.DataDir) {
		t.Errorf("dead letter error %q", e)
	}
	if v := counter(t, wreg, "lkscore_store_not_shared_total", nil); v != 1 {
		t.Errorf("lkscore_store_not_shared_total = %v", v)
	}
	if v := counter(t, wreg, "lkscore_pipeline_dead_lettered_total", map[string]string{"reason": "store_not_shared"}); v != 1 {
		t.Errorf("dead letters by reason store_not_shared = %v", v)
	}
	resp, err := http.Get("http://" + worker.opsLn.Addr().String() + "/readyz")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusServiceUnavailable || !strings.Contains(string(body), "recording store not shared") {
		t.Errorf("/readyz %d %q", resp.StatusCode, body)
	}
	if n := len(streamMsgs(t, ns.URL(), "LKSCORE_RESULTS")); n != 0 {
		t.Fatalf("%d scorecards from a store the worker cannot read", n)
	}

	// Fixed: the worker runs on the ingest's store. The replayed notice is scored once.
	if err := worker.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	fixed := wcfg
	fixed.DataDir = icfg.DataDir
	startDaemon(t, fixed)
	admin := broker.NewDeadLetterAdmin(testenv.JetStream(t, ns.URL()), wire.NewSubjects("lkscore.", "LKSCORE"))
	letters, err := admin.List(context.Background(), "", 10)
	if err != nil || len(letters) != 1 {
		t.Fatalf("dead letters %v %v", letters, err)
	}
	if err := admin.Replay(context.Background(), letters[0].Seq); err != nil {
		t.Fatal(err)
	}
	testenv.WaitFor(t, settleWait, "the scorecard", func() bool { return len(streamMsgs(t, ns.URL(), "LKSCORE_RESULTS")) == 1 })
	quiesce(t, ns.URL(), defaultConsumers)
	if n := len(streamMsgs(t, ns.URL(), "LKSCORE_RESULTS")); n != 1 {
		t.Fatalf("%d scorecards after the replay, want exactly 1", n)
	}
}
