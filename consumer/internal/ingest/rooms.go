package ingest

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/lkscore/lkscore/config"
	"github.com/lkscore/lkscore/consumer/broker"
	"github.com/lkscore/lkscore/internal/retrylog"
)

// RedactedRooms remembers, across ingest replicas, the rooms a signal said
// are redacted (the job's enable_redaction, the upload header's
// redaction_enabled, the SDK's lk.redaction.enabled), so that the room's
// later participant, room and egress webhooks, which say nothing of
// redaction, keep its name only as its keyed hash. The bucket holds room
// ids only, for nats.max_age. An event stored before any signal said the
// room is redacted keeps the name (docs/security.md, "Room names").
//
// Every replica watches the bucket (Run) and answers from memory: a room
// webhook costs no NATS request. The memory holds what the bucket holds
// (the rooms marked in the last nats.max_age, when each was marked), at
// most maxKnownRooms of them; past that, or before the watch has caught up,
// a room not in memory is looked up in the bucket.
type RedactedRooms struct {
	kv     jetstream.KeyValue
	log    *slog.Logger
	maxAge time.Duration // the bucket's TTL

	mu sync.Mutex
	// marked is when each room (by key) was marked.
	marked map[string]time.Time
	// exact: the memory holds every room the bucket does (the watch caught
	// up and none was left out for the bound); else misses are looked up.
	exact bool
}

// maxKnownRooms bounds the rooms in memory (about 100 bytes each).
const maxKnownRooms = 1_000_000

// OpenRedactedRooms creates or updates the bucket.
func OpenRedactedRooms(ctx context.Context, env broker.Env, n config.NATS) (*RedactedRooms, error) {
	var kv jetstream.KeyValue
	err := broker.RetrySetup(ctx, env.Log, "redacted rooms bucket", env.Timeouts.Request, func(ctx context.Context) (err error) {
		kv, err = env.JS.CreateOrUpdateKeyValue(ctx, jetstream.KeyValueConfig{
			Bucket: env.Subjects.RedactedRooms(), Description: "rooms a signal said are redacted (room ids only)",
			TTL: n.MaxAge, Storage: broker.StorageType(n.Storage), Replicas: n.Replicas, History: 1,
		})
		return err
	})
	if err != nil {
		return nil, err
	}
	return &RedactedRooms{kv: kv, log: env.Log, maxAge: n.MaxAge, marked: map[string]time.Time{}}, nil
}

// Run watches the bucket until ctx ends, so that every replica's marks
// reach this process's memory; a watch that fails is started again.
func (r *RedactedRooms) Run(ctx context.Context) {
	retries := retrylog.New(r.log, nil, 0)
	for ctx.Err() == nil {
		err := r.watch(ctx)
		if ctx.Err() != nil {
			return
		}
		// Memory stays as it was: the next watch delivers every entry again,
		// so only a mark another replica makes meanwhile arrives late. Looking
		// every room up instead would put a request that waits out a leader
		// election on each webhook (a rolling NATS restart showed 2 s).
		retries.Failed("redacted rooms watch", "redacted rooms: watch failed; marks by other replicas arrive when it is back", err)
		select {
		case <-ctx.Done():
			return
		case <-time.After(time.Second):
		}
	}
}

func (r *RedactedRooms) watch(ctx context.Context) error {
	w, err := r.kv.WatchAll(ctx, jetstream.IgnoreDeletes())
	if err != nil {
		return err
	}
	defer func() { _ = w.Stop() }()
	for {
		select {
		case <-ctx.Done():
			return nil
		case e, ok := <-w.Updates():
			switch {
			case !ok:
				return errors.New("the watch ended")
			case e == nil: // caught up with what the bucket held
				r.setExact(true)
			default:
				r.remember(e.Key(), e.Created())
			}
		}
	}
}

func (r *RedactedRooms) setExact(v bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.exact = v && len(r.marked) < maxKnownRooms
}

// Mark records room as redacted.
func (r *RedactedRooms) Mark(ctx context.Context, room string) error {
	if r == nil || room == "" {
		return nil
	}
	key := kvKey(room)
	if known, _ := r.known(key); known {
		return nil
	}
	if _, err := r.kv.Put(ctx, key, []byte("1")); err != nil {
		return fmt.Errorf("redacted rooms: %w", err)
	}
	r.remember(key, time.Now())
	return nil
}

// Redacted reports whether a signal said room is redacted.
func (r *RedactedRooms) Redacted(ctx context.Context, room string) (bool, error) {
	if r == nil || room == "" {
		return false, nil
	}
	key := kvKey(room)
	known, exact := r.known(key)
	if known || exact {
		return known, nil
	}
	_, err := r.kv.Get(ctx, key)
	switch {
	case errors.Is(err, jetstream.ErrKeyNotFound):
		return false, nil
	case err != nil:
		return false, fmt.Errorf("redacted rooms: %w", err)
	}
	r.remember(key, time.Now())
	return true, nil
}

// known reports whether key is in memory, and whether memory is exact.
func (r *RedactedRooms) known(key string) (known, exact bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	at, ok := r.marked[key]
	if ok && r.maxAge > 0 && time.Since(at) > r.maxAge {
		delete(r.marked, key) // gone from the bucket too
		ok = false
	}
	return ok, r.exact
}

// remember keeps key, marked at; past the bound the oldest half goes and
// misses are looked up from then on.
func (r *RedactedRooms) remember(key string, at time.Time) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if _, ok := r.marked[key]; !ok && len(r.marked) >= maxKnownRooms {
		r.exact = false
		r.prune()
	}
	r.marked[key] = at
}

// prune drops the rooms marked before the bucket's TTL, and when that frees
// too little, the older half. mu is held.
func (r *RedactedRooms) prune() {
	cut := time.Now().Add(-r.maxAge)
	if r.maxAge <= 0 || len(r.marked) >= maxKnownRooms {
		times := make([]time.Time, 0, len(r.marked))
		for _, t := range r.marked {
			times = append(times, t)
		}
		slices.SortFunc(times, func(a, b time.Time) int { return a.Compare(b) })
		cut = times[len(times)/2]
	}
	for k, t := range r.marked {
		if t.Before(cut) {
			delete(r.marked, k)
		}
	}
}

// kvKey is a room id as a key: the ids LiveKit gives (RM_…) as they are;
// anything else hex-encoded after "h." (a dot no plain key has), so that
// no id can name another's key.
func kvKey(room string) string {
	for _, c := range room {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-') {
			return fmt.Sprintf("h.%x", room)
		}
	}
	return room
}
