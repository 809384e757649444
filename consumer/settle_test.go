package consumer

import (
	"bytes"
	"compress/gzip"
	"context"
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/livekit/protocol/livekit"
	"github.com/livekit/protocol/utils/protojson"
	collogs "go.opentelemetry.io/proto/otlp/collector/logs/v1"
	"google.golang.org/protobuf/proto"

	"github.com/lkscore/lkscore/consumer/internal/facts"
	"github.com/lkscore/lkscore/consumer/internal/settle"
	"github.com/lkscore/lkscore/internal/testenv"
)

// TestSettlerResumesFromLowWater: a worker stores the settlers' low-water
// mark; a worker started later watches the facts from it instead of from the
// first entry, still scores a session that completed while no worker ran,
// and scores nothing twice.
func TestSettlerResumesFromLowWater(t *testing.T) {
	t.Parallel()
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
	testenv.WaitFor(t, settleWait, "two scorecards", func() bool { return len(streamMsgs(t, ns.URL(), "LKSCORE_RESULTS")) == 2 })
	kv, err := testenv.JetStream(t, ns.URL()).KeyValue(context.Background(), "LKSCORE_SESSION_FACTS")
	if err != nil {
		t.Fatal(err)
	}
	var mark uint64
	testenv.WaitFor(t, settleWait, "the low-water mark past both sessions", func() bool {
		e, err := kv.Get(context.Background(), settle.LowWaterKey)
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
	testenv.WaitFor(t, settleWait, "the late session's scorecard", func() bool { return len(streamMsgs(t, ns.URL(), "LKSCORE_RESULTS")) == 3 })
	if from := w2.pipeline.settler.WatchedFrom(); from < mark {
		t.Errorf("the restarted settler watched from revision %d, below the stored mark %d", from, mark)
	}
	quiesce(t, ns.URL(), defaultConsumers)
	if n := len(streamMsgs(t, ns.URL(), "LKSCORE_RESULTS")); n != 3 {
		t.Errorf("%d scorecards, want 3", n)
	}
}

// TestSessionSettlesWithoutNamedReason: a Python-style session whose only
// close-reason signal is implied waits for the settle window, then is
// scored with that reason; a late duplicate of every signal changes nothing.
func TestSessionSettlesWithoutNamedReason(t *testing.T) {
	t.Parallel()
	ns := testenv.StartNATS(t)
	cfg := pipelineConfig(t, ns.URL())
	cfg.Pipeline.SettleWindow = time.Second
	d, _ := startDaemon(t, cfg)
	dir := t.TempDir()
	writeScenarioCopy(t, dir, "1_clean_call", "RM_Py", "AJ_Py", "")
	logs := &collogs.ExportLogsServiceRequest{}
	if err := protojson.Unmarshal(testenv.JSLogs("RM_Py", "AJ_Py", "py-agent",
		map[string]any{"msg": "closing agent session due to participant disconnect (disable via `RoomInputOptions.close_on_disconnect=False`)"}), logs); err != nil {
		t.Fatal(err)
	}
	pb, _ := proto.Marshal(logs)
	var gz bytes.Buffer
	zw := gzip.NewWriter(&gz)
	_, _ = zw.Write(pb)
	_ = zw.Close()
	send := func() {
		uploadDir(t, d, dir)
		sendWebhook(t, d, jobEnded("EV_py", "RM_Py", "AJ_Py", "py-agent", livekit.JobStatus_JS_SUCCESS))
		if resp, msg := postOTLP(t, d, "logs", "application/x-protobuf", gz.Bytes(), map[string]string{"Content-Encoding": "gzip"}); resp.StatusCode != 200 {
			t.Fatalf("otlp: %d %s", resp.StatusCode, msg)
		}
	}
	start := time.Now()
	send()
	testenv.WaitFor(t, settleWait, "a scorecard", func() bool { return len(streamMsgs(t, ns.URL(), "LKSCORE_RESULTS")) == 1 })
	if waited := time.Since(start); waited < cfg.Pipeline.SettleWindow {
		t.Errorf("scored after %s, before the settle window (%s) closed", waited, cfg.Pipeline.SettleWindow)
	}
	send() // the SDK's retries, LiveKit's duplicates
	time.Sleep(2 * cfg.Pipeline.SettleWindow)
	quiesce(t, ns.URL(), defaultConsumers)
	cards := results(t, ns.URL())
	if len(cards) != 1 || cards[0].Completion.CloseReason != "CR_PARTICIPANT_DISCONNECTED" ||
		cards[0].Completion.CloseReasonSource != facts.SourceOTLPLogImplied || cards[0].Session.AgentName != "py-agent" {
		t.Fatalf("%d scorecards: %+v", len(cards), cards)
	}
}
