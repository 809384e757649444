package detect

import (
	"context"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/lkscore/lkscore/consumer/internal/metrics"
	"github.com/lkscore/lkscore/consumer/internal/stagetest"
	"github.com/lkscore/lkscore/regress"
)

// TestPendingSamplesOneWrite: samples waiting for one history (one of them
// a redelivery of a sample already written) are written in one
// compare-and-set; each learns whether it was new and the history's total
// just after it, which decides whether its card is the one evaluated
// (evaluate_every).
func TestPendingSamplesOneWrite(t *testing.T) {
	ctx := context.Background()
	set := stagetest.Start(t)
	kv, err := OpenBucket(ctx, set.JS, set.Env.Subjects, set.Cfg.NATS)
	if err != nil {
		t.Fatal(err)
	}
	d, err := New(set.Env, Options{Bucket: kv, Metrics: metrics.NewPipeline(prometheus.NewRegistry()), Regression: set.Cfg.Regression})
	if err != nil {
		t.Fatal(err)
	}
	key := regress.Key{Agent: "a", Version: "1", ScoringVersion: "s"}
	k := regress.HistoryKey(key)
	first := d.enqueue(k, regress.Sample{Seq: 1})
	d.addSamples(ctx, key)
	if !first.done || first.err != nil || !first.added || first.total != 1 {
		t.Fatalf("first sample: %+v", first)
	}
	before, err := kv.Get(ctx, k)
	if err != nil {
		t.Fatal(err)
	}
	var ps []*pendingSample
	for _, seq := range []uint64{2, 3, 1, 4} { // 1: a redelivery
		ps = append(ps, d.enqueue(k, regress.Sample{Seq: seq}))
	}
	d.addSamples(ctx, key)
	after, err := kv.Get(ctx, k)
	if err != nil {
		t.Fatal(err)
	}
	if after.Revision() != before.Revision()+1 {
		t.Errorf("four waiting samples: revision %d → %d, want one write", before.Revision(), after.Revision())
	}
	wantAdded, wantTotal := []bool{true, true, false, true}, []int{2, 3, 3, 4}
	for i, p := range ps {
		if !p.done || p.err != nil || p.added != wantAdded[i] || p.total != wantTotal[i] || p.h == nil || p.h.Total != 4 {
			t.Errorf("sample %d: done %v err %v added %v total %d history %v, want added %v total %d of 4",
				i, p.done, p.err, p.added, p.total, p.h, wantAdded[i], wantTotal[i])
		}
	}
	if len(d.pending) != 0 {
		t.Errorf("%d histories still pending", len(d.pending))
	}
}
