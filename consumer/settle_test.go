package consumer

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"testing"

	"github.com/livekit/protocol/livekit"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/lkscore/lkscore/internal/testenv"
	"github.com/lkscore/lkscore/wire"
)

// TestSettlerInProcess: only nats-server's 409 "duplicate message id is in
// process" (another replica publishing the same session) is taken as the
// other replica winning; any other publish error is a warning.
func TestSettlerInProcess(t *testing.T) {
	inProc := fmt.Errorf("publish session RM/AJ: %w", &jetstream.APIError{Code: 409, ErrorCode: 10158, Description: "duplicate message id is in process"})
	if !inProcess(inProc) {
		t.Error("10158 not recognised")
	}
	for _, err := range []error{errors.New("nats: timeout"), &jetstream.APIError{Code: 503, ErrorCode: 10008}} {
		if inProcess(err) {
			t.Errorf("%v taken for another replica's publish", err)
		}
	}
}

// TestSettlerResumesFromLowWater: a worker stores the settlers' low-water
// mark; a worker started later watches the facts from it instead of from the
// first entry, still scores a session that completed while no worker ran,
// and scores nothing twice.
func TestSettlerResumesFromLowWater(t *testing.T) {
	ns := startNATS(t)
	icfg := pipelineConfig(t, ns.URL())
	icfg.Role = "ingest"
	ingest, _ := startDaemon(t, icfg)
	wcfg := pipelineConfig(t, ns.URL())
	wcfg.Role, wcfg.DataDir = "worker", icfg.DataDir // one local store
	w1, _ := startDaemon(t, wcfg)
	for i, name := range []string{"1_clean_call", "4_tool_trouble"} {
		dir := t.TempDir()
		writeScenarioCopy(t, dir, name, fmt.Sprintf("RM_Low%d", i), fmt.Sprintf("AJ_Low%d", i), `{"close_reason":"user_initiated"}`)
		uploadDir(t, ingest, dir)
		sendWebhook(t, ingest, jobEnded(fmt.Sprintf("EV_low%d", i), fmt.Sprintf("RM_Low%d", i), fmt.Sprintf("AJ_Low%d", i), "a", livekit.JobStatus_JS_SUCCESS))
	}
	waitFor(t, "two scorecards", func() bool { return len(streamMsgs(t, ns.URL(), "LKSCORE_RESULTS")) == 2 })
	kv, err := testenv.JetStream(t, ns.URL()).KeyValue(context.Background(), "LKSCORE_SESSION_FACTS")
	if err != nil {
		t.Fatal(err)
	}
	var mark uint64
	waitFor(t, "the low-water mark past both sessions", func() bool {
		e, err := kv.Get(context.Background(), wire.SettlerLowWaterKey)
		if err != nil {
			return false
		}
		mark, _ = strconv.ParseUint(string(e.Value()), 10, 64)
		for i := range 2 {
			f, err := kv.Get(context.Background(), fmt.Sprintf("RM_Low%d.AJ_Low%d", i, i))
			if err != nil || f.Revision() >= mark {
				return false
			}
		}
		return true
	})
	if err := w1.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	// A session completes while no worker runs.
	dir := t.TempDir()
	writeScenarioCopy(t, dir, "1_clean_call", "RM_LowLate", "AJ_LowLate", `{"close_reason":"user_initiated"}`)
	uploadDir(t, ingest, dir)
	sendWebhook(t, ingest, jobEnded("EV_lowlate", "RM_LowLate", "AJ_LowLate", "a", livekit.JobStatus_JS_SUCCESS))

	w2, _ := startDaemon(t, wcfg)
	waitFor(t, "the late session's scorecard", func() bool { return len(streamMsgs(t, ns.URL(), "LKSCORE_RESULTS")) == 3 })
	if from := w2.pipeline.settler.watchedFrom.Load(); from < mark {
		t.Errorf("the restarted settler watched from revision %d, below the stored mark %d", from, mark)
	}
	quiesce(t, ns.URL(), defaultConsumers)
	if n := len(streamMsgs(t, ns.URL(), "LKSCORE_RESULTS")); n != 3 {
		t.Errorf("%d scorecards, want 3", n)
	}
}
