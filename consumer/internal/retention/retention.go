// Package retention deletes what retention.recordings no longer keeps from
// the local recording store (for S3 a bucket lifecycle rule does it).
package retention

import (
	"context"
	"errors"
	"log/slog"
	"path"
	"sort"
	"strconv"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/lkscore/lkscore/config"
	"github.com/lkscore/lkscore/consumer/broker"
	"github.com/lkscore/lkscore/consumer/internal/facts"
	"github.com/lkscore/lkscore/consumer/internal/factstore"
	"github.com/lkscore/lkscore/internal/retrylog"
	"github.com/lkscore/lkscore/recording"
	"github.com/lkscore/lkscore/store"
)

// Recordings deletes uploads older than retention.recordings from the local
// store. For S3, a bucket lifecycle rule does it (README, "Data and
// privacy"). A session whose work was not published yet (it still waits for
// a webhook or its settle window) is kept, however old. Every deletion is
// logged and counted.
type Recordings struct {
	store interface {
		store.Lister
		store.Deleter
	}
	facts    *factstore.Store
	layout   recording.Layout
	keep     time.Duration
	interval time.Duration
	deleted  *prometheus.CounterVec
	log      *slog.Logger
	now      func() time.Time
	retries  *retrylog.Log
}

// Options are what Recordings needs.
type Options struct {
	Store interface {
		store.Lister
		store.Deleter
	}
	Facts   *factstore.Store // says which sessions' work is published
	Layout  recording.Layout // the store's key layout (cfg.Layout)
	Deleted *prometheus.CounterVec
	// Retention: recordings (how long uploads are kept) and sweep_interval.
	Retention config.Retention
}

// New deletes from o.Store the sessions older than retention.recordings,
// every retention.sweep_interval, unless o.Facts says their work is not
// published yet.
func New(env broker.Env, o Options) (*Recordings, error) {
	if err := broker.Require("retention", map[string]bool{"store": o.Store == nil, "facts": o.Facts == nil,
		"metrics": o.Deleted == nil, "log": env.Log == nil, "now": env.Now == nil}); err != nil {
		return nil, err
	}
	if o.Retention.Recordings <= 0 || o.Retention.SweepInterval <= 0 {
		return nil, errors.New("retention: retention.recordings and retention.sweep_interval must be positive")
	}
	return &Recordings{store: o.Store, facts: o.Facts, layout: o.Layout, keep: o.Retention.Recordings,
		interval: o.Retention.SweepInterval, deleted: o.Deleted, log: env.Log, now: env.Now, retries: retrylog.New(env.Log, env.Now, 0)}, nil
}

// SweptKey holds, in the facts bucket, when the last sweep finished (Unix
// seconds): a sweep lists every stored session, so a restart sweeps when
// the next one is due instead of at once (start-up does not pay for the
// history, docs/performance.md).
const SweptKey = facts.InternalKeyPrefix + "retention_swept"

// firstSweepDelay is the least time from start to the first sweep: a
// restart's first seconds go to catching up, not to listing the store.
const firstSweepDelay = time.Minute

// Run sweeps when the next sweep is due (one interval after the last one
// any process finished, at least firstSweepDelay or one interval after
// the start, whichever is shorter), then every interval, until ctx ends.
func (r *Recordings) Run(ctx context.Context) {
	t := time.NewTimer(r.firstWait(ctx))
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if n, err := r.sweep(ctx); err != nil && ctx.Err() == nil {
			r.retries.Failed("retention sweep", "retention: sweep failed", err)
		} else if err == nil {
			r.retries.OK("retention sweep", "retention: sweep works again")
			r.saveSwept(ctx)
			if n > 0 {
				r.log.Info("retention: sweep done", "deleted_sessions", n)
			}
		}
		t.Reset(r.interval)
	}
}

// firstWait is how long Run waits for its first sweep: until one interval
// after the last sweep stored, but not less than firstSweepDelay (or the
// interval, if shorter); without a stored sweep (a new store, or one
// swept by an lkscore without the mark) one interval, after storing now
// as the last sweep.
func (r *Recordings) firstWait(ctx context.Context) time.Duration {
	least := min(firstSweepDelay, r.interval)
	rctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	e, err := r.facts.Bucket().Get(rctx, SweptKey)
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		r.saveSwept(ctx)
		return r.interval
	}
	var last int64
	if err == nil {
		last, err = strconv.ParseInt(string(e.Value()), 10, 64)
	}
	if err != nil {
		r.log.Warn("retention: last sweep's time not read; sweeping after one interval", "err", err)
		return r.interval
	}
	return max(time.Unix(last, 0).Add(r.interval).Sub(r.now()), least)
}

// saveSwept stores now as the last sweep's time.
func (r *Recordings) saveSwept(ctx context.Context) {
	wctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if _, err := r.facts.Bucket().Put(wctx, SweptKey, strconv.AppendInt(nil, r.now().Unix(), 10)); err != nil {
		r.log.Warn("retention: last sweep's time not stored; the next restart sweeps again when due", "err", err)
	}
}

// sweep deletes every expired session directory once; it returns how many.
func (r *Recordings) sweep(ctx context.Context) (int, error) {
	objs, err := r.store.List(ctx, r.layout.RoomPrefix(recording.Vars{}))
	if err != nil {
		return 0, err
	}
	type session struct {
		newest time.Time
		keys   []string
	}
	sessions := map[string]*session{}
	for _, o := range objs {
		dir := path.Dir(o.Key) + "/"
		if _, ok := r.layout.Match(dir + recording.ObjectHeader); !ok {
			continue
		}
		s := sessions[dir]
		if s == nil {
			s = &session{}
			sessions[dir] = s
		}
		s.keys = append(s.keys, o.Key)
		if o.Modified.After(s.newest) {
			s.newest = o.Modified
		}
	}
	dirs := make([]string, 0, len(sessions))
	for d := range sessions {
		dirs = append(dirs, d)
	}
	sort.Strings(dirs)
	cutoff := r.now().Add(-r.keep)
	n := 0
	for _, dir := range dirs {
		s := sessions[dir]
		if !s.newest.Before(cutoff) {
			continue
		}
		v, _ := r.layout.Match(dir + recording.ObjectHeader)
		f, _, err := r.facts.Get(ctx, facts.Key(v.RoomID, recording.FactsJobID(v.JobID)))
		if err != nil {
			return n, err
		}
		if f.Recording != nil && f.PublishedAt == nil {
			r.log.Info("retention: kept an old recording whose session is not scored yet", "dir", dir)
			continue
		}
		for _, k := range s.keys {
			if err := r.store.Delete(ctx, k); err != nil {
				return n, err
			}
		}
		n++
		r.deleted.WithLabelValues("retention").Inc()
		r.log.Info("retention: recording deleted", "dir", dir, "age", r.now().Sub(s.newest).Round(time.Hour).String(), "retention", r.keep.String())
	}
	return n, nil
}
