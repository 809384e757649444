package main

import (
	"context"
	"encoding/json"
	"strconv"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/lkscore/lkscore/consumer/internal/facts"
	"github.com/lkscore/lkscore/consumer/internal/metrics"
	"github.com/lkscore/lkscore/consumer/internal/settle"
	"github.com/lkscore/lkscore/consumer/internal/stagetest"
	"github.com/lkscore/lkscore/internal/testenv"
)

// TestFillLeavesAWeekOfHistory: the entries fillfacts writes decode as the
// daemon's own, are published sessions, and sit below the settler's
// low-water mark, so a settler started on the bucket watches from past them
// and publishes none: what start-up with a large history is measured on.
func TestFillLeavesAWeekOfHistory(t *testing.T) {
	set := stagetest.Start(t)
	js, cfg, env, subj, fs := set.JS, set.Cfg, set.Env, set.Env.Subjects, set.Facts(t)
	ctx := context.Background()
	if err := fill(set.NATS.URL(), "LKSCORE", 200); err != nil {
		t.Fatal(err)
	}
	keys, err := fs.Bucket().ListKeys(ctx)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for k := range keys.Keys() {
		if k == settle.LowWaterKey {
			continue
		}
		e, err := fs.Bucket().Get(ctx, k)
		if err != nil {
			t.Fatal(err)
		}
		var f facts.SessionFacts
		if err := json.Unmarshal(e.Value(), &f); err != nil || f.PublishedAt == nil || f.Recording == nil || facts.Key(f.RoomID, f.JobID) != k {
			t.Fatalf("entry %s: %v %+v", k, err, f)
		}
		n++
	}
	if n != 200 {
		t.Fatalf("%d entries, want 200", n)
	}
	mark, err := fs.Bucket().Get(ctx, settle.LowWaterKey)
	if err != nil {
		t.Fatal(err)
	}
	low, _ := strconv.ParseUint(string(mark.Value()), 10, 64)

	s, err := settle.New(env, settle.Options{Facts: fs, Metrics: metrics.NewPipeline(prometheus.NewRegistry()), Pipeline: cfg.Pipeline})
	if err != nil {
		t.Fatal(err)
	}
	rctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { defer close(done); s.Run(rctx) }()
	testenv.WaitFor(t, 10*time.Second, "the settler watching", func() bool { return s.WatchedFrom() > 0 })
	time.Sleep(time.Second)
	cancel()
	<-done
	if from := s.WatchedFrom(); from < low {
		t.Errorf("the settler watched from %d, below the mark %d", from, low)
	}
	st, err := js.Stream(ctx, subj.SessionStream())
	if err != nil {
		t.Fatal(err)
	}
	if info, err := st.Info(ctx); err != nil || info.State.Msgs != 0 {
		t.Errorf("the settler published %d sessions of the filled history (%v)", info.State.Msgs, err)
	}
}
