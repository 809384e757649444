package rescore

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/lkscore/lkscore/config"
	"github.com/lkscore/lkscore/consumer/broker"
	"github.com/lkscore/lkscore/consumer/internal/score"
	"github.com/lkscore/lkscore/scoring"
	"github.com/lkscore/lkscore/wire"
)

// publish puts the scoring config where the workers find it, enqueues one
// rescore item per session not yet published or enqueued under the
// version, and follows the results stream until the workers have
// published every one (or o.Wait passes).
func (r *run) publish(ctx context.Context, scorer *scoring.Scorer, n config.NATS, items map[string]uint64, fresh map[string]digest,
	published, enqueued map[string]bool) error {
	if err := r.putConfig(ctx, scorer, n); err != nil {
		return err
	}
	todo, waiting, already := publishPlan(fresh, published, enqueued)
	r.rep.AlreadyPublished = already
	waitedFor := append(append([]string(nil), todo...), waiting...)
	r.progress("%d already published under %s, %d enqueued by an earlier run, %d to enqueue", already, r.version, len(waiting), len(todo))

	w := &watch{current: r.current, wanted: make(map[string]bool, len(waitedFor)), got: map[string]digest{}}
	for _, key := range waitedFor {
		w.wanted[key] = true
	}
	watchCtx, stopWatch := context.WithCancel(ctx)
	defer stopWatch()
	var wg sync.WaitGroup
	var watchErr error
	wg.Add(1)
	go func() {
		defer wg.Done()
		watchErr = w.follow(watchCtx, r.js, r.s.ResultStream(), r.began)
	}()
	defer wg.Wait()

	if err := r.enqueue(ctx, todo, len(waiting), items, w); err != nil {
		return err
	}
	if err := r.await(ctx, w, len(waitedFor)); err != nil {
		return err
	}
	stopWatch()
	wg.Wait()
	if watchErr != nil && !errors.Is(watchErr, context.Canceled) {
		return watchErr
	}
	r.rep.Published = w.count()
	r.rep.NotYetPublished, r.rep.Mismatched = outcome(waitedFor, w.digests(), fresh)
	r.progress("published %d/%d under %s", r.rep.Published, len(waitedFor), r.version)
	return nil
}

// putConfig stores the scoring config under its version in the scoring
// bucket, where the workers read it for rescore items.
func (r *run) putConfig(ctx context.Context, scorer *scoring.Scorer, n config.NATS) error {
	cfgJSON, err := json.Marshal(scorer.Config())
	if err != nil {
		return err
	}
	kv, err := r.js.CreateOrUpdateKeyValue(ctx, jetstream.KeyValueConfig{Bucket: r.s.ScoringBucket(),
		Description: "lkscore rescore: the scoring configs the workers score rescore items with, by scoring version",
		Storage:     broker.StorageType(n.Storage), Replicas: n.Replicas, History: 1})
	if err != nil {
		return fmt.Errorf("scoring bucket: %w", err)
	}
	if _, err := kv.Put(ctx, score.ScoringKey(r.version), cfgJSON); err != nil {
		return fmt.Errorf("scoring bucket: %w", err)
	}
	return nil
}

// enqueue publishes a rescore item for each session of todo, at most
// o.InFlight ahead of what the workers published (waiting more were
// enqueued by an earlier run).
func (r *run) enqueue(ctx context.Context, todo []string, waiting int, items map[string]uint64, w *watch) error {
	inFlight := max(r.o.InFlight, 1)
	last := time.Now()
	for i, key := range todo {
		for i-w.count() >= inFlight+waiting { // backpressure: the workers' pace
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-time.After(20 * time.Millisecond):
			}
		}
		item, err := r.item(ctx, items[key])
		if err != nil {
			return fmt.Errorf("enqueue %s: %w", key, err)
		}
		item.ScoringVersion = r.version
		data, err := json.Marshal(item)
		if err != nil {
			return err
		}
		msg := nats.NewMsg(r.s.Session(item.CloseReason))
		msg.Data = data
		msg.Header.Set(wire.HeaderSessionKey, key)
		msg.Header.Set(wire.HeaderAgentName, item.AgentName)
		msg.Header.Set(wire.HeaderCloseReason, item.CloseReason)
		msg.Header.Set(wire.HeaderScoringVersion, r.version)
		if _, err := r.js.PublishMsg(ctx, msg, jetstream.WithMsgID("rescore:"+key+"@"+r.version),
			jetstream.WithExpectStream(r.s.SessionStream())); err != nil {
			return fmt.Errorf("enqueue %s: %w", key, err)
		}
		r.rep.Enqueued++
		if time.Since(last) > 2*time.Second {
			r.progress("enqueued %d/%d, published %d", r.rep.Enqueued, len(todo), w.count())
			last = time.Now()
		}
	}
	return nil
}

// await waits until the workers published want scorecards, or o.Wait.
func (r *run) await(ctx context.Context, w *watch, want int) error {
	deadline := time.Now().Add(r.o.Wait)
	last := time.Now()
	for w.count() < want && time.Now().Before(deadline) {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
		if time.Since(last) > 2*time.Second {
			r.progress("published %d/%d", w.count(), want)
			last = time.Now()
		}
	}
	return nil
}

// watch follows the scorecards the workers publish under a version for
// the sessions a run waits for, keeping each one's digest.
type watch struct {
	current func(nats.Header) bool // a card of this run's config (run.current)
	wanted  map[string]bool
	mu      sync.Mutex
	got     map[string]digest
}

func (w *watch) count() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.got)
}

func (w *watch) digests() map[string]digest {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.got
}

func (w *watch) follow(ctx context.Context, js jetstream.JetStream, stream string, start time.Time) error {
	cons, err := js.OrderedConsumer(ctx, stream, jetstream.OrderedConsumerConfig{DeliverPolicy: jetstream.DeliverByStartTimePolicy,
		OptStartTime: &start})
	if err != nil {
		return err
	}
	for ctx.Err() == nil {
		m, err := cons.Next(jetstream.FetchMaxWait(200 * time.Millisecond))
		if err != nil {
			continue
		}
		key := m.Headers().Get(wire.HeaderSessionKey)
		if !w.current(m.Headers()) || !w.wanted[key] {
			continue
		}
		w.mu.Lock()
		w.got[key] = sha256.Sum256(m.Data())
		w.mu.Unlock()
	}
	return ctx.Err()
}
