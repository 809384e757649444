// Package spool keeps the session facts an OTLP request carried while NATS
// was down, in the recording store, until NATS is back.
//
// agents-js (1.9.0) posts a session's report logs, without retrying, before
// its recording upload, and gives the upload up when the logs are refused:
// a 503 while lkscore's NATS was down lost the whole session, recording
// included (consumer's TestAgentsJSUploadThroughNATSOutage). So an OTLP
// request that cannot reach NATS writes the facts it carries (never its raw
// body: the facts are what lkscore would store anyway) into the recording
// store under Prefix, durably (the store's own commit), and is answered
// 200; Run adds them to the session facts once NATS is back and deletes
// them. A store that is down too gets the 503 as before.
//
// It owns the objects under Prefix in the recording store and their
// format; it must not import ingest (ingest hands it the facts) nor the
// daemon's assembly (consumer).
package spool

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/lkscore/lkscore/consumer/broker"
	"github.com/lkscore/lkscore/consumer/internal/facts"
	"github.com/lkscore/lkscore/internal/retrylog"
	"github.com/lkscore/lkscore/recording"
	"github.com/lkscore/lkscore/store"
)

// Prefix is where spooled facts live in the recording store; it is no
// session's directory (the store sweep and retention look for headers).
const Prefix = "lkscore-spool/"

// object is the one object of a spooled entry.
const object = "updates.json"

// maxEntry bounds one spooled entry read back.
const maxEntry = 64 << 20

// Store is what the spool needs of the recording store.
type Store interface {
	recording.ObjectReader
	store.Writer
	store.Lister
	store.Deleter
}

// Sink takes the facts back (factstore.Store).
type Sink interface {
	Add(ctx context.Context, u facts.Update) error
}

// Options are what a Spool needs.
type Options struct {
	Store Store
	Sink  Sink
	// Connected says whether NATS is; Run drains only while it is.
	Connected func() bool
	// Interval is how often Run checks for work (1 s if zero). It lists
	// the store only when this process spooled something since its last
	// drain, at start, and every sweepEvery (entries another replica left).
	Interval time.Duration
	// MaxBytes bounds what this process keeps spooled at once (256 MiB if
	// zero); past it Put fails and the request gets 503, as without a spool.
	MaxBytes int64
	// Spooled and Drained count entries by signal; nil: not counted.
	Spooled, Drained *prometheus.CounterVec
	Log              *slog.Logger
}

// Spool keeps facts for later.
type Spool struct {
	o Options
	// pending: this process spooled something not drained yet (or has not
	// drained since it started); held: the bytes it spooled since then.
	pending atomic.Bool
	held    atomic.Int64
	retries *retrylog.Log // draining: the first failure, a summary a minute, the recovery
}

// sweepEvery is how often Run lists the spool with nothing of its own in
// it: entries a replica that stopped left behind.
const sweepEvery = 5 * time.Minute

// New spools into o.Store and drains into o.Sink.
func New(o Options) (*Spool, error) {
	if err := broker.Require("spool", map[string]bool{"store": o.Store == nil, "sink": o.Sink == nil,
		"connected": o.Connected == nil, "log": o.Log == nil}); err != nil {
		return nil, err
	}
	if o.Interval <= 0 {
		o.Interval = time.Second
	}
	if o.MaxBytes <= 0 {
		o.MaxBytes = 256 << 20
	}
	s := &Spool{o: o, retries: retrylog.New(o.Log, nil, 0)}
	s.pending.Store(true) // what an earlier run left
	return s, nil
}

// Put stores updates (what one request of signal carried) durably.
func (s *Spool) Put(ctx context.Context, signal string, updates []facts.Update) error {
	data, err := json.Marshal(updates)
	if err != nil {
		return fmt.Errorf("spool %s: %w", signal, err)
	}
	if s.held.Add(int64(len(data))) > s.o.MaxBytes {
		s.held.Add(-int64(len(data)))
		return fmt.Errorf("spool %s: %d bytes kept already while NATS is down, the most this process keeps", signal, s.o.MaxBytes)
	}
	var rnd [6]byte
	_, _ = rand.Read(rnd[:])
	dir := fmt.Sprintf("%s%s/%019d-%s/", Prefix, signal, time.Now().UnixNano(), hex.EncodeToString(rnd[:]))
	up, err := s.o.Store.Begin(ctx, dir)
	if err != nil {
		return fmt.Errorf("spool %s: %w", signal, err)
	}
	if _, err := up.Write(ctx, object, bytes.NewReader(data), int64(len(data))+1); err != nil {
		_ = up.Abort(ctx)
		s.held.Add(-int64(len(data)))
		return fmt.Errorf("spool %s: %w", signal, err)
	}
	if err := up.Commit(ctx); err != nil {
		_ = up.Abort(ctx)
		s.held.Add(-int64(len(data)))
		return fmt.Errorf("spool %s: %w", signal, err)
	}
	s.pending.Store(true)
	count(s.o.Spooled, signal)
	return nil
}

// Run drains the spool every interval while NATS is connected, until ctx
// ends.
func (s *Spool) Run(ctx context.Context) {
	t := time.NewTicker(s.o.Interval)
	defer t.Stop()
	var swept time.Time
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if !s.o.Connected() || (!s.pending.Load() && time.Since(swept) < sweepEvery) {
			continue // nothing of ours to drain: no store listing every second
		}
		swept = time.Now()
		s.pending.Store(false) // a Put from here on sets it again
		held := s.held.Load()
		n, err := s.Drain(ctx)
		if err != nil {
			s.pending.Store(true)
		} else {
			s.held.Add(-held)
		}
		if err != nil && ctx.Err() == nil {
			s.retries.Failed("spool drain", "spool: facts not added yet", err, "added", n)
		} else if err == nil {
			s.retries.OK("spool drain", "spool: facts added again")
			if n > 0 {
				s.o.Log.Info("spool: facts kept during a NATS outage added", "entries", n)
			}
		}
	}
}

// Drain adds every spooled entry to the sink, oldest first, and deletes it;
// it returns how many it added. An entry stays until all its updates were
// added (adding twice adds nothing: facts are a set).
func (s *Spool) Drain(ctx context.Context) (int, error) {
	objs, err := s.o.Store.List(ctx, Prefix)
	if err != nil {
		return 0, err
	}
	n := 0
	for _, o := range objs {
		if !strings.HasSuffix(o.Key, "/"+object) {
			continue
		}
		updates, err := s.read(ctx, o.Key)
		if errors.Is(err, errUnreadable) {
			// Written by lkscore, so this is damage, not input: it stays
			// for a person to look at, and the rest of the spool drains.
			s.o.Log.Error("spool: entry unreadable, left in the store", "key", o.Key, "err", err)
			continue
		}
		if err != nil {
			return n, err
		}
		for _, u := range updates {
			if err := s.o.Sink.Add(ctx, u); err != nil {
				return n, err
			}
		}
		if err := s.o.Store.Delete(ctx, o.Key); err != nil {
			return n, err
		}
		count(s.o.Drained, strings.SplitN(strings.TrimPrefix(o.Key, Prefix), "/", 2)[0])
		n++
	}
	return n, nil
}

func (s *Spool) read(ctx context.Context, key string) ([]facts.Update, error) {
	rc, err := s.o.Store.Open(ctx, key, maxEntry)
	if err != nil {
		return nil, err
	}
	defer rc.Close()
	var updates []facts.Update
	if err := json.NewDecoder(rc).Decode(&updates); err != nil {
		if errors.Is(err, recording.ErrLimit) || errors.Is(err, store.ErrUnavailable) {
			return nil, err
		}
		return nil, fmt.Errorf("%w: %s: %w", errUnreadable, key, err)
	}
	return updates, nil
}

// errUnreadable marks a spooled entry that does not decode.
var errUnreadable = errors.New("spooled entry unreadable")

func count(c *prometheus.CounterVec, signal string) {
	if c != nil {
		c.WithLabelValues(signal).Inc()
	}
}

// Forget takes one session's facts out of the spool (lkscore forget): an
// entry that holds only them is deleted, one that holds other sessions'
// too is written again without them (a new entry, then the old one
// deleted). It returns how many entries named the session.
func Forget(ctx context.Context, st Store, roomID, factsJobID string) (int, error) {
	objs, err := st.List(ctx, Prefix)
	if err != nil {
		return 0, fmt.Errorf("spool: %w", err)
	}
	sp := &Spool{o: Options{Store: st, MaxBytes: math.MaxInt64}}
	n := 0
	for _, o := range objs {
		if !strings.HasSuffix(o.Key, "/"+object) {
			continue
		}
		updates, err := sp.read(ctx, o.Key)
		if errors.Is(err, store.ErrNotFound) {
			continue // drained since the listing
		}
		if err != nil {
			return n, fmt.Errorf("spool entry %s: %w", o.Key, err)
		}
		rest := slices.DeleteFunc(slices.Clone(updates), func(u facts.Update) bool { return u.RoomID == roomID && u.JobID == factsJobID })
		if len(rest) == len(updates) {
			continue
		}
		if len(rest) > 0 {
			signal, _, _ := strings.Cut(strings.TrimPrefix(o.Key, Prefix), "/")
			if err := sp.Put(ctx, signal, rest); err != nil {
				return n, err
			}
		}
		if err := st.Delete(ctx, o.Key); err != nil {
			return n, fmt.Errorf("spool: %w", err)
		}
		n++
	}
	return n, nil
}
