package consumer

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/lkscore/lkscore/consumer/internal/metrics"
	"github.com/lkscore/lkscore/wire"
)

func TestPipelineStopWaitsForLoops(t *testing.T) {
	bg, cancel := context.WithCancel(context.Background())
	p := &pipeline{cancel: func() {}, background: cancel}
	finished := make(chan struct{})
	p.goLoop(func() {
		<-bg.Done()
		time.Sleep(100 * time.Millisecond) // a round still publishing
		close(finished)
	})
	if err := p.stop(context.Background()); err != nil {
		t.Fatal(err)
	}
	select {
	case <-finished:
	default:
		t.Fatal("stop returned before the loop did")
	}

	// A loop that outlives the deadline is reported, not waited for forever.
	bg2, cancel2 := context.WithCancel(context.Background())
	p2 := &pipeline{cancel: func() {}, background: cancel2}
	release := make(chan struct{})
	defer close(release)
	p2.goLoop(func() { <-bg2.Done(); <-release })
	ctx, done := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer done()
	if err := p2.stop(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("stop = %v, want the deadline", err)
	}
}

// TestWatchdogNamesTheStall: a stage with work pending that settled nothing
// for stall_after is flagged and logged with the likely cause.
func TestWatchdogNamesTheStall(t *testing.T) {
	var logs strings.Builder
	log := slog.New(slog.NewTextHandler(&logs, nil))
	m := metrics.NewPipeline(nil)
	now := time.Now()
	s := &stage{name: wire.StageScore, consumerName: "score-default", concurrency: 4, metrics: m, log: log,
		health: newHealth(nil, nil, time.Second, time.Second, m.DependencyUp, log), now: func() time.Time { return now }}
	s.progress.Store(now.Add(-2 * time.Minute).UnixNano())
	info := &jetstream.ConsumerInfo{NumPending: 7, NumAckPending: 10, Config: jetstream.ConsumerConfig{MaxAckPending: 10}}
	s.checkStall(info, time.Minute)
	if v := testutil.ToFloat64(m.Stalled.WithLabelValues(wire.StageScore, "score-default")); v != 1 {
		t.Errorf("stalled gauge = %v, want 1", v)
	}
	if !strings.Contains(logs.String(), "stage making no progress") || !strings.Contains(logs.String(), "max_ack_pending reached") {
		t.Errorf("log: %s", logs.String())
	}
	s.busy.Store(4)
	logs.Reset()
	s.checkStall(info, time.Minute)
	if !strings.Contains(logs.String(), "every slot is busy") {
		t.Errorf("log: %s", logs.String())
	}
	s.progress.Store(now.UnixNano())
	s.checkStall(info, time.Minute)
	if v := testutil.ToFloat64(m.Stalled.WithLabelValues(wire.StageScore, "score-default")); v != 0 {
		t.Errorf("stalled gauge = %v after progress, want 0", v)
	}
}
