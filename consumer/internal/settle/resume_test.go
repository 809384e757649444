package settle

import (
	"context"
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/lkscore/lkscore/consumer/internal/facts"
	"github.com/lkscore/lkscore/consumer/internal/metrics"
	"github.com/lkscore/lkscore/consumer/internal/stagetest"
	"github.com/lkscore/lkscore/internal/testenv"
)

// TestSettlerResumesFromMark: a settler publishes two complete sessions and
// stores its low-water mark past them; stopped, and started again after a
// third session completed, it watches from the mark, not from the first
// entry, publishes the third session and nothing twice. (The daemon-level
// variant, with ingest and workers in separate daemons, is consumer's
// TestSettlerResumesFromLowWater.)
func TestSettlerResumesFromMark(t *testing.T) {
	t.Parallel()
	set := stagetest.Start(t)
	js, cfg, env, subj, fs := set.JS, set.Cfg, set.Env, set.Env.Subjects, set.Facts(t)
	ctx := context.Background()
	complete := func(i int) {
		room, job := fmt.Sprintf("RM_r%d", i), fmt.Sprintf("AJ_r%d", i)
		if err := fs.Add(ctx, facts.Update{RoomID: room, JobID: job, JobEnded: true,
			Recording: &facts.RecordingRef{SessionKey: room + "/" + job, Dir: room + "/" + job + "/"},
			Observations: []facts.Observation{{Field: facts.FieldCloseReason, Value: "CR_USER_INITIATED", Source: facts.SourceSummary,
				Evidence: "summary: close_reason=CR_USER_INITIATED"}}}); err != nil {
			t.Fatal(err)
		}
	}
	sessions, err := js.Stream(ctx, subj.SessionStream())
	if err != nil {
		t.Fatal(err)
	}
	published := func() uint64 {
		info, err := sessions.Info(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return info.State.Msgs
	}
	run := func() (*Settler, *metrics.Pipeline, func()) {
		m := metrics.NewPipeline(prometheus.NewRegistry())
		s, err := New(env, Options{Facts: fs, Metrics: m, Pipeline: cfg.Pipeline})
		if err != nil {
			t.Fatal(err)
		}
		rctx, cancel := context.WithCancel(ctx)
		done := make(chan struct{})
		go func() {
			defer close(done)
			s.Run(rctx)
		}()
		return s, m, func() { cancel(); <-done }
	}

	complete(0)
	complete(1)
	_, _, stop := run()
	testenv.WaitFor(t, 10*time.Second, "two sessions published", func() bool { return published() == 2 })
	var mark uint64
	testenv.WaitFor(t, 3*lowWaterEvery, "the low-water mark past both sessions", func() bool {
		e, err := fs.Bucket().Get(ctx, LowWaterKey)
		if err != nil {
			return false
		}
		mark, _ = strconv.ParseUint(string(e.Value()), 10, 64)
		for i := range 2 {
			if _, rev, err := fs.Get(ctx, facts.Key(fmt.Sprintf("RM_r%d", i), fmt.Sprintf("AJ_r%d", i))); err != nil || rev >= mark {
				return false
			}
		}
		return true
	})
	stop()

	complete(2)
	s2, m2, stop2 := run()
	defer stop2()
	testenv.WaitFor(t, 10*time.Second, "the third session published", func() bool { return published() == 3 })
	if from := s2.WatchedFrom(); from < mark {
		t.Errorf("the second settler watched from revision %d, below the stored mark %d", from, mark)
	}
	time.Sleep(time.Second) // anything it would publish again, it would have by now
	if n := testutil.ToFloat64(m2.Sessions.WithLabelValues("CR_USER_INITIATED", "true")); n != 1 {
		t.Errorf("the second settler published %v sessions, want 1 (the third)", n)
	}
}
