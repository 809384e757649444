// Package stage is the pipeline's machinery: a Stage runs one durable pull
// consumer with bounded concurrency and settles every message in one place
// (ack, retry with backoff, dead-letter); Health pauses every stage while
// NATS or the store is down; DeadLetters publishes what cannot be done,
// with why, and turns max-delivery advisories into dead letters.
package stage

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/lkscore/lkscore/consumer/internal/failure"
	"github.com/lkscore/lkscore/consumer/internal/metrics"
	"github.com/lkscore/lkscore/internal/retrylog"
)

// Spec is what a stage consumes and how it handles it: one row of the
// pipeline's table.
type Spec struct {
	Name     string // wire.StageLocate, …: dead letters and metrics
	Stream   string
	Consumer jetstream.ConsumerConfig
	Handle   func(ctx context.Context, m jetstream.Msg) error
	// Concurrency overrides the pipeline's (alert delivery: 1).
	Concurrency int
	// OnGiveUp decides what happens when a recording never arrives
	// (failure.ErrNotYet outlives the deadline): true dead-letters the
	// message, false acks it (nothing was expected). nil dead-letters.
	OnGiveUp func(m jetstream.Msg) bool
	// MaxBackoff caps the delay between retries of a transient failure
	// (0: failure.Backoff's own cap, 5 minutes); the tee's relays retry a
	// target that came back within it.
	MaxBackoff time.Duration
}

// Pacing is how a stage takes and retries work (config pipeline.*).
type Pacing struct {
	Concurrency int
	AckWait     time.Duration
	PullWait    time.Duration // how long one fetch waits for messages
	Deadline    time.Duration // failure.KindNotYet: how long after storage to keep retrying
	RetryBase   time.Duration
}

// Deps are what every stage of a process shares.
type Deps struct {
	Health  *Health
	DLQ     *DeadLetters
	Metrics *metrics.Pipeline
	Log     *slog.Logger
	Now     func() time.Time
}

// Stage runs one durable pull consumer: it fetches only as many messages
// as it has free slots and only while its dependencies are up, signals
// progress while a message is worked on, and settles (acks, retries or
// dead-letters) every message in one place.
type Stage struct {
	name         string
	consumerName string
	cons         jetstream.Consumer
	handle       func(ctx context.Context, m jetstream.Msg) error
	onGiveUp     func(m jetstream.Msg) bool
	maxBackoff   time.Duration
	Pacing
	health  *Health
	dlq     *DeadLetters
	metrics *metrics.Pipeline
	log     *slog.Logger
	now     func() time.Time

	// retries logs the stage's retry loops (its work, its fetches, its
	// consumer's info): the first failure, a summary a minute, the recovery.
	retries   *retrylog.Log
	stopFetch context.CancelFunc
	fetching  sync.WaitGroup
	inflight  sync.WaitGroup
	busy      atomic.Int64 // messages being worked on
	progress  atomic.Int64 // Unix ns of the last settled message
}

// New is the stage of spec on cons; a spec's concurrency overrides p's.
func New(spec Spec, cons jetstream.Consumer, p Pacing, d Deps) *Stage {
	if spec.Concurrency > 0 {
		p.Concurrency = spec.Concurrency
	}
	return &Stage{name: spec.Name, consumerName: spec.Consumer.Durable, cons: cons, handle: spec.Handle, onGiveUp: spec.OnGiveUp,
		maxBackoff: spec.MaxBackoff, retries: retrylog.New(d.Log, d.Now, 0),
		Pacing: p, health: d.Health, dlq: d.DLQ, metrics: d.Metrics, log: d.Log, now: d.Now}
}

// Start begins fetching. Work runs under workCtx, which outlives the
// shutdown signal so in-flight messages can finish; cancel it to abandon them.
func (s *Stage) Start(workCtx context.Context) error {
	if s.health == nil || s.Concurrency < 1 || s.PullWait <= 0 {
		return fmt.Errorf("stage %s: health, concurrency and pull wait are required", s.consumerName)
	}
	fetchCtx, cancel := context.WithCancel(workCtx)
	s.stopFetch = cancel
	s.progress.Store(s.now().UnixNano())
	s.fetching.Add(1)
	go func() {
		defer s.fetching.Done()
		s.fetchLoop(fetchCtx, workCtx)
	}()
	return nil
}

// fetchLoop pulls work while slots are free and dependencies are up. A
// message is only ever fetched for a free slot, so nothing waits in a client
// buffer while its ack timer runs.
func (s *Stage) fetchLoop(ctx, workCtx context.Context) {
	slots := make(chan struct{}, s.Concurrency)
	backlogged := false
	for {
		select { // one free slot at least
		case slots <- struct{}{}:
		case <-ctx.Done():
			return
		}
		n := 1
		for n < s.Concurrency { // and every other free one
			select {
			case slots <- struct{}{}:
				n++
				continue
			default:
			}
			break
		}
		if backlogged {
			n = gatherSlots(ctx, slots, n, s.Concurrency)
		}
		if err := s.health.Wait(ctx); err != nil {
			return
		}
		// A shutdown cancels the fetch; otherwise it waits up to pullWait.
		fctx, cancel := context.WithTimeout(ctx, s.PullWait)
		batch, err := s.cons.Fetch(n, jetstream.FetchContext(fctx))
		got := 0
		if err == nil {
			for m := range batch.Messages() {
				got++
				s.inflight.Add(1)
				s.busy.Add(1)
				go func() {
					defer func() { s.busy.Add(-1); <-slots; s.inflight.Done() }()
					s.process(workCtx, ctx, m)
				}()
			}
			err = batch.Error()
		}
		cancel()
		// A fetch that came back full left messages waiting: the next
		// one gathers slots first (gatherSlots).
		backlogged = err == nil && got == n
		for range n - got {
			<-slots
		}
		failed := err != nil && !errors.Is(err, nats.ErrTimeout) && !errors.Is(err, context.DeadlineExceeded) &&
			!errors.Is(err, context.Canceled) && ctx.Err() == nil
		s.noteFetch(failed, got)
		if failed {
			s.consumerError(s.fetchTarget(), err)
			select { // do not spin on a broken connection
			case <-time.After(100 * time.Millisecond):
			case <-ctx.Done():
				return
			}
		}
	}
}

// gatherWait bounds how long a backlogged stage waits for more free slots
// before it fetches.
const gatherWait = 5 * time.Millisecond

// gatherSlots takes more free slots, up to half of them (or all when there are
// two at most), for at most gatherWait, and returns how many it holds. A
// backlogged stage whose slots free one at a time (a handler that
// serializes, as regression detection does one agent's cards) would
// otherwise send a pull request for every message; the messages it waits
// for are queued on the server, not fetched, so no ack timer runs meanwhile.
func gatherSlots(ctx context.Context, slots chan struct{}, n, concurrency int) int {
	want := max(concurrency/2, min(concurrency, 2))
	if n >= want {
		return n
	}
	timer := time.NewTimer(gatherWait)
	defer timer.Stop()
	for n < want {
		select {
		case slots <- struct{}{}:
			n++
		case <-timer.C:
			return n
		case <-ctx.Done():
			return n
		}
	}
	return n
}

// noteFetch logs when a stage's fetches resume after failing (a NATS
// restart, a consumer leader's election): how long they failed and whether
// the first good fetch brought work. The restart tests read it to tell
// lkscore's share of a stall from the server's (docs/guarantees.md).
func (s *Stage) noteFetch(failed bool, got int) {
	if !failed {
		s.retries.OK(s.fetchTarget(), "fetch resumed", "consumer", s.consumerName, "messages", got)
	}
}

// fetchTarget and infoTarget name the stage's fetch and consumer-info
// loops in its retry log.
func (s *Stage) fetchTarget() string { return s.consumerName + " fetch" }
func (s *Stage) infoTarget() string  { return s.consumerName + " info" }

// consumerError counts every consumer error (target: the fetch or the
// info loop) and logs the first, a summary a minute and the recovery.
func (s *Stage) consumerError(target string, err error) {
	s.metrics.ConsumerErrs.WithLabelValues(s.consumerName).Inc()
	s.retries.Failed(target, "fetch failed", err, "consumer", s.consumerName)
}

// Drain stops taking work and waits for in-flight messages, or ctx.
func (s *Stage) Drain(ctx context.Context) error {
	if s.stopFetch == nil {
		return nil
	}
	s.stopFetch()
	done := make(chan struct{})
	go func() {
		s.fetching.Wait()
		s.inflight.Wait()
		close(done)
	}()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("drain %s: %w", s.consumerName, ctx.Err())
	}
}

// process works on one message under ctx (the work context). A message
// that meets a dependency outage (the store, NATS) is held, with progress
// signals, and tried again when the dependency is back: an outage costs no
// delivery and no backoff. stopCtx ends the holding at shutdown.
func (s *Stage) process(ctx, stopCtx context.Context, m jetstream.Msg) {
	s.metrics.Received.WithLabelValues(s.name).Inc()
	start := time.Now()
	if meta, err := m.Metadata(); err == nil && meta.NumDelivered == 1 && s.metrics.Queued != nil {
		// How long a first delivery waited in the stream for this stage.
		s.metrics.Queued.WithLabelValues(s.name).Observe(max(start.Sub(meta.Timestamp), 0).Seconds())
	}
	// Tell the server we are alive while the work runs, so AckWait need not
	// cover the worst case: only a dead worker's messages wait it out.
	stop := make(chan struct{})
	go func() {
		t := time.NewTicker(s.AckWait / 3)
		defer t.Stop()
		for {
			select {
			case <-stop:
				return
			case <-t.C:
				_ = m.InProgress()
			}
		}
	}()
	defer close(stop)
	var err error
	for {
		err = s.handle(ctx, m)
		if !s.dependencyDown(ctx, err) {
			break
		}
		s.metrics.Retried.WithLabelValues(s.name, "dependency_down").Inc()
		if werr := s.health.Wait(stopCtx); werr != nil {
			// Shutting down while the dependency is still down: hand the
			// message back for another worker, or this one after a restart.
			_ = m.Nak()
			return
		}
	}
	s.decide(ctx, m, err)
	s.progress.Store(s.now().UnixNano())
	s.metrics.Duration.WithLabelValues(s.name).Observe(time.Since(start).Seconds())
}

// dependencyDown reports whether err means the store or NATS is down; the
// store is then marked down, so every stage pauses.
func (s *Stage) dependencyDown(ctx context.Context, err error) bool {
	if err == nil {
		return false
	}
	switch failure.Classify(err).Kind {
	case failure.KindStoreDown:
		s.health.StoreDown(err)
		return true
	case failure.KindTransient:
		return s.health.Status() != "" // NATS dropped while we worked
	}
	return false
}

// decide is the ack decision, the only place a message is acked, retried or dead-lettered;
// failure.Classify decides which.
func (s *Stage) decide(ctx context.Context, m jetstream.Msg, err error) {
	if err == nil {
		s.retries.OK(s.consumerName, "work succeeds again", "stage", s.name)
		s.ack(m, "done")
		return
	}
	meta, merr := m.Metadata()
	var delivered uint64 = 1
	if merr == nil {
		delivered = meta.NumDelivered
	}
	f := failure.Classify(err)
	switch f.Kind {
	case failure.KindNotYet:
		age := time.Duration(0)
		if merr == nil {
			age = s.now().Sub(meta.Timestamp)
		}
		if age < s.Deadline {
			s.metrics.Retried.WithLabelValues(s.name, "recording_not_found").Inc()
			_ = m.NakWithDelay(min(failure.Backoff(s.RetryBase, delivered), s.Deadline-age+time.Second))
			return
		}
		if s.onGiveUp != nil && !s.onGiveUp(m) {
			s.log.Info("no recording arrived; nothing to score", "subject", m.Subject(), "waited", age.Round(time.Second).String())
			s.ack(m, "no_recording")
			return
		}
		s.deadLetter(ctx, m, f.Label, fmt.Sprintf("recording not found after %s", age.Round(time.Second)))
	case failure.KindPermanent:
		s.deadLetter(ctx, m, f.Label, err.Error())
	case failure.KindStoreDown: // process holds these; reached only if the store fails between probes
		s.health.StoreDown(err)
		_ = m.NakWithDelay(s.health.Interval())
	default:
		s.retries.Failed(s.consumerName, "retrying", err, "stage", s.name, "subject", m.Subject(), "deliveries", delivered)
		s.metrics.Retried.WithLabelValues(s.name, "transient").Inc()
		d := failure.Backoff(s.RetryBase, delivered)
		if s.maxBackoff > 0 {
			d = min(d, s.maxBackoff)
		}
		_ = m.NakWithDelay(d)
	}
}

func (s *Stage) ack(m jetstream.Msg, outcome string) {
	if err := m.Ack(); err != nil {
		s.log.Warn("ack failed; the message will be redelivered", "subject", m.Subject(), "err", err)
		return
	}
	s.metrics.Done.WithLabelValues(s.name, outcome).Inc()
}

// deadLetter publishes to the DLQ, then terminates. If the DLQ publish
// fails, the message is retried instead: it is never dropped.
func (s *Stage) deadLetter(ctx context.Context, m jetstream.Msg, kind, reason string) {
	if err := s.dlq.send(ctx, letterFrom(s.name, m, kind, reason)); err != nil {
		s.retries.Failed(s.consumerName+" dead letter", "dead letter failed; retrying the message", err)
		_ = m.NakWithDelay(failure.Backoff(s.RetryBase, 1))
		return
	}
	s.retries.OK(s.consumerName+" dead letter", "dead letters published again")
	_ = m.TermWithReason(failure.TruncateHeader(reason))
	s.metrics.Done.WithLabelValues(s.name, "dead_lettered").Inc()
}

// WatchLag polls the consumer's pending counts into gauges until ctx ends,
// each poll bounded by timeout. It is also the stage's watchdog: work
// pending and nothing settled for stallAfter is logged with what is known
// of why, and flagged in lkscore_stage_stalled.
func (s *Stage) WatchLag(ctx context.Context, every, timeout, stallAfter time.Duration) {
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		ictx, cancel := context.WithTimeout(ctx, timeout)
		info, err := s.cons.Info(ictx)
		cancel()
		if err == nil {
			s.retries.OK(s.infoTarget(), "consumer info answered again", "consumer", s.consumerName)
			s.metrics.Pending.WithLabelValues(s.consumerName).Set(float64(info.NumPending))
			s.metrics.AckPending.WithLabelValues(s.consumerName).Set(float64(info.NumAckPending))
			s.checkStall(info, stallAfter)
		} else if ctx.Err() == nil {
			s.consumerError(s.infoTarget(), fmt.Errorf("consumer info: %w", err))
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

func (s *Stage) checkStall(info *jetstream.ConsumerInfo, stallAfter time.Duration) {
	idle := s.now().Sub(time.Unix(0, s.progress.Load()))
	stalled := info.NumPending > 0 && idle > stallAfter
	gauge := s.metrics.Stalled.WithLabelValues(s.name, s.consumerName)
	if !stalled {
		gauge.Set(0)
		return
	}
	gauge.Set(1)
	why := s.health.Status()
	switch {
	case why != "":
	case s.busy.Load() >= int64(s.Concurrency):
		why = "every slot is busy with a message that has not finished"
	case info.Config.MaxAckPending > 0 && info.NumAckPending >= info.Config.MaxAckPending:
		why = "max_ack_pending reached: messages delivered elsewhere are not acknowledged"
	default:
		why = "fetches return nothing although messages are pending"
	}
	s.log.Warn("stage making no progress", "stage", s.name, "consumer", s.consumerName, "pending", info.NumPending,
		"ack_pending", info.NumAckPending, "idle", idle.Round(time.Second).String(), "why", why)
}
