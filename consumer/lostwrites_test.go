package consumer

import (
	"context"
	"testing"
	"time"

	"github.com/livekit/protocol/livekit"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"google.golang.org/protobuf/proto"

	"github.com/lkscore/lkscore/config"
	"github.com/lkscore/lkscore/consumer/internal/facts"
	"github.com/lkscore/lkscore/internal/sdkclient"
	"github.com/lkscore/lkscore/internal/testenv"
)

// TestLostWritesRecoveredFromStore: the closest a test gets to the
// acknowledged-but-unsynced writes an OS crash can take
// (docs/guarantees.md, "What a crash can take"): a session's upload, its
// agent_job_ended and the agent's close log are each answered 200 by an
// ingest process, then the webhook and the upload notice are erased from
// their streams before any worker saw them. A worker that starts then finds
// the upload in the store with its sweep and scores the session exactly
// once, with the close reason the remaining signal (the SDK's log, in the
// facts) names; more sweeps do not score it again.
func TestLostWritesRecoveredFromStore(t *testing.T) {
	t.Parallel()
	ns := startNATS(t)
	cfg := pipelineConfig(t, ns.URL())
	ingestCfg := cfg
	ingestCfg.Role = config.RoleIngest
	d, _ := startDaemon(t, ingestCfg)

	const room, job = "RM_LostWrites09", "AJ_LostWrites09"
	ctx := context.Background()
	snd := sdkclient.New("http://"+d.IngestAddr(), testenv.Key, testenv.Secret)
	header, _ := proto.Marshal(&livekit.MetricsRecordingHeader{RoomId: room, JobId: job})
	chat := mustReadFile(t, scenarioDir+"/1_clean_call/chat_history.json")
	if err := snd.CloseLog(ctx, room, job, "lost-agent", "participant_disconnected"); err != nil {
		t.Fatal(err)
	}
	if err := snd.Upload(ctx, header, chat); err != nil {
		t.Fatal(err)
	}
	sendWebhook(t, d, jobEnded("EV_lost09", room, job, "lost-agent", livekit.JobStatus_JS_SUCCESS))

	// The crash: both acknowledged messages are gone from their streams.
	nc, err := nats.Connect(ns.URL())
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, _ := jetstream.New(nc)
	erased := 0
	for _, name := range []string{"LKSCORE_WEBHOOKS", "LKSCORE_UPLOADS"} {
		s, err := js.Stream(ctx, name)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range streamMsgs(t, ns.URL(), name) {
			if err := s.SecureDeleteMsg(ctx, m.Sequence); err != nil {
				t.Fatal(err)
			}
			erased++
		}
	}
	if erased != 2 {
		t.Fatalf("erased %d messages, want the webhook and the upload notice", erased)
	}

	workerCfg := cfg
	workerCfg.Role, workerCfg.OpsListen = config.RoleWorker, "127.0.0.1:0"
	workerCfg.Pipeline.SweepInterval = 200 * time.Millisecond
	_, reg := startDaemon(t, workerCfg)
	testenv.WaitFor(t, settleWait, "the session found in the store to be scored", func() bool { return len(streamMsgs(t, ns.URL(), "LKSCORE_RESULTS")) >= 1 })
	runs := counter(t, reg, "lkscore_recovery_runs_total", map[string]string{"kind": "sweep"})
	testenv.WaitFor(t, settleWait, "three more sweeps", func() bool {
		return counter(t, reg, "lkscore_recovery_runs_total", map[string]string{"kind": "sweep"}) >= runs+3
	})
	quiesce(t, ns.URL(), defaultConsumers)
	cards := results(t, ns.URL())
	if len(cards) != 1 {
		t.Fatalf("%d scorecards, want exactly 1", len(cards))
	}
	c := cards[0]
	if c.Session.Key != room+"/"+job || c.Completion.CloseReason != "CR_PARTICIPANT_DISCONNECTED" || c.Completion.CloseReasonSource != facts.SourceOTLPLog {
		t.Errorf("scorecard %s: close reason %s from %s (%s)", c.Session.Key, c.Completion.CloseReason, c.Completion.CloseReasonSource, c.Completion.CloseReasonEvidence)
	}
}
