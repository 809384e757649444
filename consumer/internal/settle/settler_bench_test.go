package settle

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/lkscore/lkscore/consumer/internal/facts"
	"github.com/lkscore/lkscore/consumer/internal/metrics"
	"github.com/lkscore/lkscore/consumer/internal/stagetest"
)

// BenchmarkSettlerComplete: how fast one settler publishes sessions whose
// facts are complete (recording stored, job ended, the summary's close
// reason), on an embedded nats-server: the facts are written first, then
// the settler starts and is timed until every session's work is on the
// stream (a settler catching up, as after a restart or a burst). One
// publisher (the settle step as it was: in the watch loop, two round trips
// in line per session) against the default, side by side:
//
//	go test ./consumer/internal/settle -run '^$' -bench SettlerComplete -benchtime 2000x -count 3
func BenchmarkSettlerComplete(b *testing.B) {
	for _, publishers := range []int{1, settlePublishers} {
		b.Run(fmt.Sprintf("publishers=%d", publishers), func(b *testing.B) {
			set := stagetest.Start(b)
			js, cfg, env, subj, fs := set.JS, set.Cfg, set.Env, set.Env.Subjects, set.Facts(b)
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			s, err := New(env, Options{Facts: fs, Pipeline: cfg.Pipeline, Metrics: metrics.NewPipeline(prometheus.NewRegistry())})
			if err != nil {
				b.Fatal(err)
			}
			s.publishers = publishers
			stream, err := js.Stream(ctx, subj.SessionStream())
			if err != nil {
				b.Fatal(err)
			}
			for i := range b.N {
				room, job := fmt.Sprintf("RM_b%d", i), fmt.Sprintf("AJ_b%d", i)
				if err := fs.Add(ctx, facts.Update{RoomID: room, JobID: job, JobEnded: true,
					Recording: &facts.RecordingRef{SessionKey: room + "/" + job, Dir: room + "/" + job + "/"},
					Observations: []facts.Observation{{Field: facts.FieldCloseReason, Value: "CR_USER_INITIATED", Source: facts.SourceSummary,
						Evidence: "summary: close_reason=CR_USER_INITIATED"}}}); err != nil {
					b.Fatal(err)
				}
			}
			b.ResetTimer()
			done := make(chan struct{})
			go func() {
				defer close(done)
				s.Run(ctx)
			}()
			for {
				info, err := stream.Info(ctx)
				if err != nil {
					b.Fatal(err)
				}
				if info.State.Msgs >= uint64(b.N) {
					break
				}
				time.Sleep(time.Millisecond)
			}
			b.StopTimer()
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "sessions/s")
			cancel()
			<-done
		})
	}
}
