package rescore

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"time"

	"github.com/lkscore/lkscore/consumer/internal/work"
	"github.com/lkscore/lkscore/session"
	"github.com/lkscore/lkscore/wire"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// ReadScorecards hands every scorecard the results stream holds since
// since to fn, in order, with its stream sequence.
func ReadScorecards(ctx context.Context, js jetstream.JetStream, s wire.Subjects, since time.Time, wait time.Duration,
	fn func(card *session.Scorecard, seq uint64)) error {
	return readSince(ctx, js, s.ResultStream(), since, wait, func(m jetstream.Msg, seq uint64) {
		var card session.Scorecard
		if json.Unmarshal(m.Data(), &card) == nil {
			fn(&card, seq)
		}
	})
}

// readSince hands every message a stream stored at or after since to fn,
// in order.
func readSince(ctx context.Context, js jetstream.JetStream, stream string, since time.Time, wait time.Duration,
	fn func(jetstream.Msg, uint64)) error {
	st, err := js.Stream(ctx, stream)
	if errors.Is(err, jetstream.ErrStreamNotFound) {
		return nil
	}
	if err != nil {
		return err
	}
	info, err := st.Info(ctx)
	if err != nil {
		return err
	}
	if info.State.Msgs == 0 || info.State.LastTime.Before(since) {
		return nil
	}
	cons, err := js.OrderedConsumer(ctx, stream, jetstream.OrderedConsumerConfig{DeliverPolicy: jetstream.DeliverByStartTimePolicy,
		OptStartTime: &since})
	if err != nil {
		return err
	}
	// The first message says how many follow; then batches of what is
	// there, so no fetch waits for messages that will not come.
	first, err := cons.Next(jetstream.FetchMaxWait(wait))
	if errors.Is(err, nats.ErrTimeout) || errors.Is(err, jetstream.ErrNoMessages) {
		return nil
	}
	if err != nil {
		return err
	}
	handle := func(m jetstream.Msg) uint64 {
		meta, err := m.Metadata()
		if err != nil {
			return 0
		}
		fn(m, meta.Sequence.Stream)
		return meta.NumPending
	}
	pending := handle(first)
	for pending > 0 {
		batch, err := cons.Fetch(int(min(pending, 500)), jetstream.FetchMaxWait(wait))
		if err != nil {
			return err
		}
		n := 0
		for m := range batch.Messages() {
			n++
			pending = handle(m)
		}
		if err := batch.Error(); err != nil && !errors.Is(err, nats.ErrTimeout) {
			return err
		}
		if n == 0 {
			return fmt.Errorf("%s: %d messages pending, none delivered within %s", stream, pending, wait)
		}
	}
	return nil
}

// cardsRead is what a run keeps of the results stream: the latest
// scorecard of each session under another version (the diff's old side)
// and the sessions already published under this one.
type cardsRead struct {
	old       map[string]*oldCard
	published map[string]bool
}

// versions are the old scoring versions, sorted.
func (c cardsRead) versions() []string {
	seen := map[string]bool{}
	out := []string{}
	for _, o := range c.old {
		if !seen[o.version] {
			seen[o.version] = true
			out = append(out, o.version)
		}
	}
	sort.Strings(out)
	return out
}

// readCards reads the results stream since o.Since (of o.Agent).
func (r *run) readCards(ctx context.Context) (cardsRead, error) {
	c := cardsRead{old: map[string]*oldCard{}, published: map[string]bool{}}
	err := readSince(ctx, r.js, r.s.ResultStream(), r.o.Since, r.wait, func(m jetstream.Msg, seq uint64) {
		h := m.Headers()
		if r.o.Agent != "" && h.Get(wire.HeaderAgentName) != r.o.Agent {
			return
		}
		key := h.Get(wire.HeaderSessionKey)
		if r.current(h) {
			c.published[key] = true
			return
		}
		var card session.Scorecard
		if json.Unmarshal(m.Data(), &card) != nil {
			return
		}
		c.old[key] = briefOf(&card, seq)
	})
	if err != nil {
		return c, fmt.Errorf("read %s: %w", r.s.ResultStream(), err)
	}
	return c, nil
}

// workRead is what a run keeps of the sessions stream: the sequence of
// each session's latest original work item (the item itself is read back
// when the session's turn comes: memory stays a few words a session, not
// a work item with its facts and spans), and the sessions whose rescore
// item of this version is already enqueued.
type workRead struct {
	latest   map[string]uint64
	enqueued map[string]bool
}

// readWork reads the sessions stream since o.Since (of o.Agent).
func (r *run) readWork(ctx context.Context) (workRead, error) {
	w := workRead{latest: map[string]uint64{}, enqueued: map[string]bool{}}
	err := readSince(ctx, r.js, r.s.SessionStream(), r.o.Since, r.wait, func(m jetstream.Msg, seq uint64) {
		var item work.Item
		if json.Unmarshal(m.Data(), &item) != nil || item.SessionKey == "" {
			return
		}
		if r.o.Agent != "" && item.AgentName != r.o.Agent {
			return
		}
		switch item.ScoringVersion {
		case "":
			w.latest[item.SessionKey] = seq
		case r.version:
			w.enqueued[item.SessionKey] = true
		}
	})
	if err != nil {
		return w, fmt.Errorf("read %s: %w", r.s.SessionStream(), err)
	}
	return w, nil
}

// item reads back the work item at seq in the sessions stream.
func (r *run) item(ctx context.Context, seq uint64) (work.Item, error) {
	var item work.Item
	if r.sessions == nil {
		st, err := r.js.Stream(ctx, r.s.SessionStream())
		if err != nil {
			return item, fmt.Errorf("%s: %w", r.s.SessionStream(), err)
		}
		r.sessions = st
	}
	gctx, cancel := context.WithTimeout(ctx, r.wait)
	defer cancel()
	m, err := r.sessions.GetMsg(gctx, seq)
	if err != nil {
		return item, fmt.Errorf("%s #%d: %w", r.s.SessionStream(), seq, err)
	}
	if err := json.Unmarshal(m.Data, &item); err != nil {
		return item, fmt.Errorf("%s #%d: %w", r.s.SessionStream(), seq, err)
	}
	return item, nil
}
