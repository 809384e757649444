package stage

import (
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/lkscore/lkscore/consumer/internal/metrics"
	"github.com/lkscore/lkscore/wire"
)

// TestWatchdogNamesTheStall: a stage with work pending that settled nothing
// for stall_after is flagged and logged with the likely cause.
func TestWatchdogNamesTheStall(t *testing.T) {
	t.Parallel()
	var logs strings.Builder
	log := slog.New(slog.NewTextHandler(&logs, nil))
	m := metrics.NewPipeline(nil)
	now := time.Now()
	spec := Spec{Name: wire.StageScore, Consumer: jetstream.ConsumerConfig{Durable: "score-default"}}
	s := New(spec, nil, Pacing{Concurrency: 4}, Deps{Metrics: m, Log: log,
		Health: mustHealth(t, HealthOptions{Interval: time.Second, ProbeTimeout: time.Second, Up: m.DependencyUp, Log: log}),
		Now:    func() time.Time { return now }})
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

func mustHealth(t *testing.T, o HealthOptions) *Health {
	t.Helper()
	h, err := NewHealth(o)
	if err != nil {
		t.Fatal(err)
	}
	return h
}
