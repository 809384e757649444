package consumer

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// settler publishes session work once a session's facts are settled: at
// once when they are complete (recording stored, job ended, close reason
// named outright), roomSettle after the last signal once the room has
// finished, else when the settle window has passed since the last signal. It watches the facts bucket, so it sees every signal whoever wrote
// it; every worker replica runs one, and the session stream's dedup on the
// session key keeps their publications to one. Once published, an entry is
// marked, so a restart or a late signal does not publish it again.
type settler struct {
	nc       *nats.Conn // nil in tests without reconnects
	facts    *factStore
	js       jetstream.JetStream
	subjects Subjects
	window   time.Duration
	tick     time.Duration
	selected map[string]bool // close reasons this deployment's pool scores
	timeouts timeouts
	metrics  *pipelineMetrics
	log      *slog.Logger
	now      func() time.Time

	pending map[string]time.Time // facts key → when to publish at the latest
}

// run watches the facts until ctx ends.
func (s *settler) run(ctx context.Context) {
	s.pending = map[string]time.Time{}
	t := time.NewTicker(s.tick)
	defer t.Stop()
	for ctx.Err() == nil {
		w, err := s.facts.kv.WatchAll(ctx)
		if err != nil {
			s.log.Warn("settler: watch session facts", "err", err)
			select {
			case <-ctx.Done():
				return
			case <-time.After(s.tick):
				continue
			}
		}
		s.watch(ctx, w, t.C)
		_ = w.Stop()
	}
}

// watch follows one watcher. After a NATS reconnect it returns, so run
// starts a fresh watcher at once instead of waiting for the old one's
// missed heartbeats (about 10 s) to notice.
func (s *settler) watch(ctx context.Context, w jetstream.KeyWatcher, tick <-chan time.Time) {
	reconnects := s.reconnects()
	for {
		select {
		case <-ctx.Done():
			return
		case e, ok := <-w.Updates():
			if !ok {
				return // the watcher ended; run starts another
			}
			if e != nil {
				s.consider(ctx, e)
			}
		case <-tick:
			if s.reconnects() != reconnects {
				s.log.Info("settler: nats reconnected, watching the session facts again")
				return
			}
			s.publishDue(ctx)
		}
	}
}

func (s *settler) reconnects() uint64 {
	if s.nc == nil {
		return 0
	}
	return s.nc.Stats().Reconnects
}

// consider looks at one changed entry.
func (s *settler) consider(ctx context.Context, e jetstream.KeyValueEntry) {
	key := e.Key()
	if e.Operation() != jetstream.KeyValuePut {
		delete(s.pending, key)
		return
	}
	var f SessionFacts
	if err := json.Unmarshal(e.Value(), &f); err != nil {
		s.log.Error("settler: session facts are not valid JSON", "key", key, "err", err)
		delete(s.pending, key)
		return
	}
	switch {
	case f.PublishedAt != nil || f.Recording == nil:
		delete(s.pending, key) // done, or nothing to score yet
	case f.complete():
		s.publish(ctx, key, &f) // the watch delivered the latest entry: no need to read it again
	case f.roomFinished():
		s.pending[key] = f.LastInputAt.Add(min(roomSettle, s.window))
	default:
		s.pending[key] = f.LastInputAt.Add(s.window)
	}
}

// publishDue publishes every session whose settle window has passed.
func (s *settler) publishDue(ctx context.Context) {
	now := s.now()
	for key, at := range s.pending {
		if !now.Before(at) {
			s.publish(ctx, key, nil)
		}
	}
}

// publish publishes one session's work and marks its facts published. On
// failure the session stays pending and is tried again on the next tick.
// f is the entry when the caller has it fresh, else nil.
func (s *settler) publish(ctx context.Context, key string, f *SessionFacts) {
	if err := s.publishKey(ctx, key, f); err != nil {
		if inProcess(err) {
			// Another replica's settler is publishing the same session at this
			// moment: it wins, and the next tick sees the duplicate and marks it.
			s.log.Debug("settler: another replica is publishing this session", "key", key)
		} else {
			s.log.Warn("settler: session work not published; retrying", "key", key, "err", err)
		}
		if _, ok := s.pending[key]; !ok {
			s.pending[key] = s.now()
		}
		return
	}
	delete(s.pending, key)
}

func (s *settler) publishKey(ctx context.Context, key string, f *SessionFacts) error {
	if f == nil {
		var err error
		if f, _, err = s.facts.get(ctx, key); err != nil {
			return err
		}
	}
	if f.PublishedAt != nil || f.Recording == nil {
		return nil
	}
	obs := f.Observations
	if f.JobID == "" {
		// No job id in the header (SDKs before 1.6.6): what other signals
		// said about the room is all there is.
		more, err := s.facts.roomObservations(ctx, f.RoomID, key)
		if err != nil {
			return err
		}
		obs = append(append([]Observation(nil), obs...), more...)
	}
	r := resolve(obs)
	item := workItemFrom(f, r, s.now())
	data, err := json.Marshal(item)
	if err != nil {
		return fmt.Errorf("encode work item: %w", err)
	}
	msg := nats.NewMsg(s.subjects.Session(item.CloseReason))
	msg.Data = data
	msg.Header.Set(HeaderSessionKey, item.SessionKey)
	pctx, cancel := context.WithTimeout(ctx, s.timeouts.publish)
	ack, err := s.js.PublishMsg(pctx, msg, jetstream.WithMsgID(item.SessionKey), jetstream.WithExpectStream(s.subjects.SessionStream()))
	cancel()
	if err != nil {
		return fmt.Errorf("publish session %s: %w", item.SessionKey, err)
	}
	if !ack.Duplicate {
		s.metrics.sessions.WithLabelValues(item.CloseReason, fmt.Sprint(s.selected[item.CloseReason])).Inc()
		s.log.Info("session located", "session_key", item.SessionKey, "close_reason", item.CloseReason,
			"close_reason_source", item.CloseReasonSource, "agent_name", r.AgentName, "origin", item.Origin)
	}
	published := s.now().UTC()
	return s.facts.modify(ctx, key, func(f *SessionFacts) bool {
		if f.PublishedAt != nil {
			return false
		}
		f.PublishedAt = &published
		return true
	})
}

// errCodeDuplicateInProcess is nats-server's JSStreamDuplicateMessageConflict
// (409, "duplicate message id is in process"): a publish with the same
// message id is being stored right now.
const errCodeDuplicateInProcess jetstream.ErrorCode = 10158

func inProcess(err error) bool {
	var apiErr *jetstream.APIError
	return errors.As(err, &apiErr) && apiErr.ErrorCode == errCodeDuplicateInProcess
}

// workItemFrom is the work for a session with settled facts.
func workItemFrom(f *SessionFacts, r Resolved, now time.Time) WorkItem {
	ref := f.Recording
	return WorkItem{
		SessionKey: ref.SessionKey, RoomID: f.RoomID, RoomName: ref.RoomName, JobID: f.JobID,
		AgentName: r.AgentName, CloseReason: r.CloseReason, CloseReasonSource: r.CloseReasonSource,
		Dir: ref.Dir, Object: ref.Object, Bucket: ref.Bucket, Location: ref.Location, Origin: ref.Origin,
		Problems: ref.Problems, LocatedAt: now.UTC(), Facts: &r,
	}
}
