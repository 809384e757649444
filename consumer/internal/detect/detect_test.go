package detect_test

import (
	"bytes"
	"context"
	"encoding/json"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/lkscore/lkscore/config"
	"github.com/lkscore/lkscore/consumer/broker"
	"github.com/lkscore/lkscore/consumer/internal/detect"
	"github.com/lkscore/lkscore/consumer/internal/metrics"
	"github.com/lkscore/lkscore/consumer/internal/stagetest"
	"github.com/lkscore/lkscore/internal/population"
	"github.com/lkscore/lkscore/internal/testenv"
	"github.com/lkscore/lkscore/regress"
	"github.com/lkscore/lkscore/scoring"
	"github.com/lkscore/lkscore/session"
	"github.com/lkscore/lkscore/wire"
)

// TestReplicasAlertOnce: two detectors (replicas sharing the regression
// bucket) are each handed every scorecard of a version whose sessions start
// closing in error, at the same time, as a redelivery to both would. The
// failures alert is published once, with its evidence, and the alert state
// ends with an empty outbox. Every alert matches docs/alert.schema.json.
func TestReplicasAlertOnce(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	r := startFailingVersion(t)
	js, kv, subj, cards := r.js, r.kv, r.subj, r.cards
	replicas := []*detect.Detector{r.detector(t), r.detector(t)}

	cons, err := js.OrderedConsumer(ctx, subj.ResultStream(), jetstream.OrderedConsumerConfig{})
	if err != nil {
		t.Fatal(err)
	}
	for range cards {
		m, err := cons.Next(jetstream.FetchMaxWait(5 * time.Second))
		if err != nil {
			t.Fatal(err)
		}
		var wg sync.WaitGroup
		errs := make([]error, len(replicas))
		for i, d := range replicas {
			wg.Go(func() { errs[i] = d.Handle(ctx, m) })
		}
		wg.Wait()
		for i, err := range errs {
			if err != nil {
				t.Fatalf("replica %d: %v", i, err)
			}
		}
	}

	schema, err := jsonschema.NewCompiler().Compile("../../../docs/alert.schema.json")
	if err != nil {
		t.Fatal(err)
	}
	var alerts []wire.Alert
	for _, m := range streamMsgs(t, js, subj.AlertStream()) {
		var a wire.Alert
		if err := json.Unmarshal(m.Data(), &a); err != nil {
			t.Fatal(err)
		}
		doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(m.Data()))
		if err != nil {
			t.Fatal(err)
		}
		if err := schema.Validate(doc); err != nil {
			t.Errorf("alert does not match docs/alert.schema.json: %v\n%s", err, m.Data())
		}
		alerts = append(alerts, a)
	}
	seen := map[string]int{}
	var failures int
	for _, a := range alerts {
		seen[a.ID+"/"+a.Status]++
		if a.Kind == regress.KindFailures && a.Metric == regress.MetricCRError && a.Status == wire.AlertFiring {
			failures++
			if len(a.WorstSessions) == 0 || a.Test != "binomial_tail" || a.Current < a.Baseline+0.05 {
				t.Errorf("failures alert evidence %+v", a)
			}
		}
	}
	for id, n := range seen {
		if n > 1 {
			t.Errorf("alert %s published %d times by two replicas", id, n)
		}
	}
	if failures != 1 {
		t.Fatalf("%d firing %s alerts, want 1 (all: %d)", failures, regress.MetricCRError, len(alerts))
	}
	key := regress.Key{Agent: "support", Version: "7", ScoringVersion: cards[0].ScoringVersion}
	e, err := kv.Get(ctx, regress.AlertStateKey(key))
	if err != nil {
		t.Fatal(err)
	}
	var st regress.AlertState
	if err := json.Unmarshal(e.Value(), &st); err != nil {
		t.Fatal(err)
	}
	if len(st.Outbox) != 0 || len(st.Firing) == 0 {
		t.Errorf("alert state after the run: %d firing, outbox %d (want firing, outbox empty)", len(st.Firing), len(st.Outbox))
	}
}

// failingVersion is a results stream holding 80 scorecards of agent
// support version 7, the last 20 of which close in error 70% of the time,
// and a regression bucket; alerts fire without a hold time.
type failingVersion struct {
	js    jetstream.JetStream
	kv    jetstream.KeyValue
	subj  wire.Subjects
	env   broker.Env
	cfg   config.Regression
	cards []session.Scorecard
}

func startFailingVersion(t *testing.T) failingVersion {
	t.Helper()
	set := stagetest.Start(t)
	r := failingVersion{js: set.JS, subj: set.Env.Subjects, env: set.Env, cfg: set.Cfg.Regression}
	r.cfg.MinFiring = 0
	var err error
	if r.kv, err = detect.OpenBucket(context.Background(), r.js, r.subj, set.Cfg.NATS); err != nil {
		t.Fatal(err)
	}
	scorer, err := scoring.NewScorer(scoring.DefaultConfig())
	if err != nil {
		t.Fatal(err)
	}
	steady := population.Baseline("support", "7")
	steady.ErrorCloseRate = 0
	failing := steady
	failing.ErrorCloseRate = 0.7
	r.cards = append(population.Generate(scorer, steady, 11, 60), population.Generate(scorer, failing, 12, 20)...)
	testenv.PublishCards(t, r.js, r.cards, 0)
	return r
}

// detector is a replica on the run's bucket.
func (r failingVersion) detector(t *testing.T) *detect.Detector {
	t.Helper()
	d, err := detect.New(r.env, detect.Options{Bucket: r.kv, Metrics: metrics.NewPipeline(prometheus.NewRegistry()), Regression: r.cfg})
	if err != nil {
		t.Fatal(err)
	}
	return d
}

func streamMsgs(t *testing.T, js jetstream.JetStream, stream string) []jetstream.Msg {
	t.Helper()
	ctx := context.Background()
	s, err := js.Stream(ctx, stream)
	if err != nil {
		t.Fatal(err)
	}
	info, err := s.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if info.State.Msgs == 0 {
		return nil
	}
	cons, err := js.OrderedConsumer(ctx, stream, jetstream.OrderedConsumerConfig{})
	if err != nil {
		t.Fatal(err)
	}
	var out []jetstream.Msg
	for uint64(len(out)) < info.State.Msgs {
		m, err := cons.Next(jetstream.FetchMaxWait(5 * time.Second))
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, m)
	}
	return out
}

// TestOneAgentsCardsShareHistoryWrites hands one detector every scorecard
// of a version whose sessions start closing in error all at once (80
// goroutines, as a burst fills the stage's slots), each card's handling
// redelivered once more beside it. Whatever the goroutines' order (the
// cards waiting for their history's stripe are written together, how many
// depends on the scheduler: 41–69 writes in five runs here, 79 before the
// shared write), every card is counted once (Total 80, redeliveries not)
// and the failures alert is published once. TestPendingSamplesOneWrite
// checks the shared write itself.
func TestOneAgentsCardsShareHistoryWrites(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	r := startFailingVersion(t)
	js, kv, subj, cards := r.js, r.kv, r.subj, r.cards
	d := r.detector(t)
	key := regress.Key{Agent: "support", Version: "7", ScoringVersion: cards[0].ScoringVersion}
	w, err := kv.Watch(ctx, regress.HistoryKey(key), jetstream.UpdatesOnly())
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = w.Stop() }()

	cons, err := js.OrderedConsumer(ctx, subj.ResultStream(), jetstream.OrderedConsumerConfig{})
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	errs := make(chan error, 2*len(cards))
	for range cards {
		m, err := cons.Next(jetstream.FetchMaxWait(5 * time.Second))
		if err != nil {
			t.Fatal(err)
		}
		for range 2 { // the card and its redelivery
			wg.Go(func() {
				if err := d.Handle(ctx, m); err != nil {
					errs <- err
				}
			})
		}
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}

	writes := 0
	for quiet := false; !quiet; {
		select {
		case e := <-w.Updates():
			if e != nil {
				writes++
			}
		case <-time.After(500 * time.Millisecond):
			quiet = true
		}
	}
	e, err := kv.Get(ctx, regress.HistoryKey(key))
	if err != nil {
		t.Fatal(err)
	}
	var h regress.History
	if err := json.Unmarshal(e.Value(), &h); err != nil {
		t.Fatal(err)
	}
	if h.Total != len(cards) {
		t.Errorf("history counts %d sessions, want %d (each once, redeliveries not)", h.Total, len(cards))
	}
	if writes == 0 || writes > len(cards) {
		t.Errorf("%d history writes for %d cards, want at most one a card", writes, len(cards))
	}
	failures := 0
	for _, m := range streamMsgs(t, js, subj.AlertStream()) {
		var a wire.Alert
		if err := json.Unmarshal(m.Data(), &a); err != nil {
			t.Fatal(err)
		}
		if a.Kind == regress.KindFailures && a.Metric == regress.MetricCRError && a.Status == wire.AlertFiring {
			failures++
		}
	}
	if failures != 1 {
		t.Errorf("%d firing %s alerts, want 1", failures, regress.MetricCRError)
	}
	t.Logf("%d cards (each handled twice at once): %d history writes", len(cards), writes)
}
