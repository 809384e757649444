// Package dashboard serves lkscore's web dashboard: server-rendered HTML
// with SVG charts (html/template, no JavaScript), read from an in-memory
// index of the most recent scorecards that follows the results stream. A
// request never reads the stream: it reads the bounded index (and, for one
// session's page, that session's scorecard and recording).
package dashboard

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"sort"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/lkscore/lkscore/scoring"
)

// Entry is what the index keeps of one scorecard.
type Entry struct {
	Seq         uint64
	At          time.Time
	Key         string
	AgentName   string
	Verdict     string
	Score       float64
	Components  [4]float64 // turn handling, transcript integrity, tool reliability, response latency
	CloseReason string
	Source      string // the close reason's source
}

// Index holds the last Window scorecards of the results stream.
type Index struct {
	window    int
	caughtUp  chan struct{} // closed once the first catch-up finished
	closeOnce sync.Once

	mu      sync.RWMutex
	entries []Entry // oldest first, at most window
	byKey   map[string]uint64
}

// NewIndex keeps at most window scorecards.
func NewIndex(window int) *Index {
	return &Index{window: window, byKey: map[string]uint64{}, caughtUp: make(chan struct{})}
}

// Follow fills the index from the stream, starting window messages before
// its end, until ctx ends. It recreates its ordered consumer when the
// connection resets.
func (x *Index) Follow(ctx context.Context, js jetstream.JetStream, stream string, log *slog.Logger) {
	for ctx.Err() == nil {
		if err := x.follow(ctx, js, stream); err != nil && ctx.Err() == nil {
			log.Warn("dashboard: following the results stream", "err", err)
			select {
			case <-ctx.Done():
			case <-time.After(time.Second):
			}
		}
	}
}

func (x *Index) follow(ctx context.Context, js jetstream.JetStream, stream string) error {
	s, err := js.Stream(ctx, stream)
	if err != nil {
		return err
	}
	info, err := s.Info(ctx)
	if err != nil {
		return err
	}
	start := info.State.FirstSeq
	x.mu.RLock()
	if n := len(x.entries); n > 0 {
		start = x.entries[n-1].Seq + 1 // resume after what we have
	} else if info.State.LastSeq >= uint64(x.window) && info.State.LastSeq-uint64(x.window)+1 > start {
		start = info.State.LastSeq - uint64(x.window) + 1
	}
	x.mu.RUnlock()
	if start == 0 {
		start = 1
	}
	// An ephemeral consumer of our own, fetched under ctx: shutdown ends a
	// fetch at once (an ordered consumer's reset can outlive its context).
	// The server removes the consumer once idle; Follow starts a new one
	// after any error.
	cons, err := js.CreateConsumer(ctx, stream, jetstream.ConsumerConfig{
		DeliverPolicy: jetstream.DeliverByStartSequencePolicy, OptStartSeq: start, AckPolicy: jetstream.AckNonePolicy,
		InactiveThreshold: time.Minute, MemoryStorage: true})
	if err != nil {
		return err
	}
	for {
		fctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		batch, err := cons.Fetch(256, jetstream.FetchContext(fctx))
		if err != nil {
			cancel()
			return err
		}
		got := 0
		for m := range batch.Messages() {
			got++
			meta, err := m.Metadata()
			if err != nil {
				continue
			}
			if meta.NumPending == 0 {
				x.closeOnce.Do(func() { close(x.caughtUp) })
			}
			var sc scoring.Scorecard
			if err := json.Unmarshal(m.Data(), &sc); err != nil {
				continue
			}
			x.add(entryOf(meta.Sequence.Stream, meta.Timestamp, sc))
		}
		err = batch.Error()
		cancel()
		if got == 0 && err == nil || errors.Is(err, context.DeadlineExceeded) {
			x.closeOnce.Do(func() { close(x.caughtUp) }) // nothing (more) to read
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if err != nil && !errors.Is(err, context.DeadlineExceeded) && !errors.Is(err, nats.ErrTimeout) {
			return err
		}
	}
}

func entryOf(seq uint64, at time.Time, sc scoring.Scorecard) Entry {
	e := Entry{Seq: seq, At: at, Key: sc.Session.Key, AgentName: sc.Session.AgentName, Verdict: sc.Overall.Verdict,
		Score: sc.Overall.Score, CloseReason: sc.Completion.CloseReason, Source: sc.Completion.CloseReasonSource}
	for i, c := range sc.Components {
		if i < len(e.Components) {
			e.Components[i] = c.Score
		}
	}
	return e
}

func (x *Index) add(e Entry) {
	x.mu.Lock()
	defer x.mu.Unlock()
	if n := len(x.entries); n > 0 && e.Seq <= x.entries[n-1].Seq {
		return // replayed after a reconnect
	}
	x.entries = append(x.entries, e)
	x.byKey[e.Key] = e.Seq
	if len(x.entries) > 2*x.window { // compact now and then, not on every add
		drop := len(x.entries) - x.window
		for _, old := range x.entries[:drop] {
			if x.byKey[old.Key] == old.Seq {
				delete(x.byKey, old.Key)
			}
		}
		x.entries = append(x.entries[:0:0], x.entries[drop:]...)
	}
}

// live is the window: the last x.window entries.
func (x *Index) live() []Entry {
	if len(x.entries) > x.window {
		return x.entries[len(x.entries)-x.window:]
	}
	return x.entries
}

// CaughtUp is closed once the index has read what the stream held when it
// started following it.
func (x *Index) CaughtUp() <-chan struct{} { return x.caughtUp }

// Filter selects entries; empty fields match all.
type Filter struct {
	Agent       string
	CloseReason string
	Verdict     string
	Since       time.Time
}

func (f Filter) match(e Entry) bool {
	return (f.Agent == "" || e.AgentName == f.Agent) && (f.CloseReason == "" || e.CloseReason == f.CloseReason) &&
		(f.Verdict == "" || e.Verdict == f.Verdict) && (f.Since.IsZero() || !e.At.Before(f.Since))
}

// Select returns the matching entries, oldest first, and how many the index holds.
func (x *Index) Select(f Filter) ([]Entry, int) {
	x.mu.RLock()
	defer x.mu.RUnlock()
	live := x.live()
	var out []Entry
	for _, e := range live {
		if f.match(e) {
			out = append(out, e)
		}
	}
	return out, len(live)
}

// Lookup finds a session's entry.
func (x *Index) Lookup(key string) (Entry, bool) {
	x.mu.RLock()
	defer x.mu.RUnlock()
	seq, ok := x.byKey[key]
	if !ok {
		return Entry{}, false
	}
	live := x.live()
	i := sort.Search(len(live), func(i int) bool { return live[i].Seq >= seq })
	if i == len(live) || live[i].Seq != seq {
		return Entry{}, false
	}
	return live[i], true
}

// Agents lists the agent names in the index.
func (x *Index) Agents() []string {
	x.mu.RLock()
	defer x.mu.RUnlock()
	set := map[string]bool{}
	for _, e := range x.live() {
		if e.AgentName != "" {
			set[e.AgentName] = true
		}
	}
	out := make([]string, 0, len(set))
	for a := range set {
		out = append(out, a)
	}
	sort.Strings(out)
	return out
}
