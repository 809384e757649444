package consumer

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// stage runs one durable pull consumer: bounded concurrency, a progress
// signal while a message is worked on, and one place that settles (acks,
// retries or dead-letters) every message.
type stage struct {
	name         string
	consumerName string
	cons         jetstream.Consumer
	concurrency  int
	ackWait      time.Duration
	deadline     time.Duration // kindNotYet: how long after storage to keep retrying
	retryBase    time.Duration
	handle       func(ctx context.Context, m jetstream.Msg) error
	// onGiveUp decides what happens when errNotYet outlives the deadline:
	// true dead-letters the message, false acks it (nothing was expected).
	onGiveUp func(m jetstream.Msg) bool
	dlq      *deadLetters
	metrics  *pipelineMetrics
	log      *slog.Logger
	now      func() time.Time

	cc       jetstream.ConsumeContext
	inflight sync.WaitGroup
}

// start begins consuming. Work runs under workCtx, which outlives the
// shutdown signal so in-flight messages can finish; cancel it to abandon them.
func (s *stage) start(workCtx context.Context) error {
	sem := make(chan struct{}, s.concurrency)
	cc, err := s.cons.Consume(func(m jetstream.Msg) {
		sem <- struct{}{} // blocks delivery while every slot is busy
		s.inflight.Add(1)
		go func() {
			defer func() { <-sem; s.inflight.Done() }()
			s.process(workCtx, m)
		}()
	}, jetstream.PullMaxMessages(s.concurrency), jetstream.ConsumeErrHandler(func(_ jetstream.ConsumeContext, err error) {
		if !errors.Is(err, jetstream.ErrNoHeartbeat) {
			s.log.Debug("consume", "consumer", s.consumerName, "err", err)
		}
	}))
	if err != nil {
		return fmt.Errorf("consume %s: %w", s.consumerName, err)
	}
	s.cc = cc
	return nil
}

// drain stops taking work and waits for in-flight messages, or ctx.
func (s *stage) drain(ctx context.Context) error {
	if s.cc == nil {
		return nil
	}
	s.cc.Drain()
	done := make(chan struct{})
	go func() {
		<-s.cc.Closed()
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

func (s *stage) process(ctx context.Context, m jetstream.Msg) {
	s.metrics.received.WithLabelValues(s.name).Inc()
	start := time.Now()
	// Tell the server we are alive while a large fetch runs, so AckWait
	// need not cover the worst case.
	stop := make(chan struct{})
	go func() {
		t := time.NewTicker(s.ackWait / 3)
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
	err := s.handle(ctx, m)
	close(stop)
	s.settle(ctx, m, err)
	s.metrics.duration.WithLabelValues(s.name).Observe(time.Since(start).Seconds())
}

// settle is the only place a message is acked, retried or dead-lettered;
// classify decides which.
func (s *stage) settle(ctx context.Context, m jetstream.Msg, err error) {
	if err == nil {
		s.ack(m, "done")
		return
	}
	meta, merr := m.Metadata()
	var delivered uint64 = 1
	if merr == nil {
		delivered = meta.NumDelivered
	}
	f := classify(err)
	switch f.kind {
	case kindNotYet:
		age := time.Duration(0)
		if merr == nil {
			age = s.now().Sub(meta.Timestamp)
		}
		if age < s.deadline {
			s.metrics.retried.WithLabelValues(s.name, "recording_not_found").Inc()
			_ = m.NakWithDelay(min(backoff(s.retryBase, delivered), s.deadline-age+time.Second))
			return
		}
		if s.onGiveUp != nil && !s.onGiveUp(m) {
			s.log.Info("no recording arrived; nothing to score", "subject", m.Subject(), "waited", age.Round(time.Second).String())
			s.ack(m, "no_recording")
			return
		}
		s.deadLetter(ctx, m, f.label, fmt.Sprintf("recording not found after %s", age.Round(time.Second)))
	case kindPermanent:
		s.deadLetter(ctx, m, f.label, err.Error())
	default:
		s.log.Warn("retrying", "stage", s.name, "subject", m.Subject(), "deliveries", delivered, "err", err)
		s.metrics.retried.WithLabelValues(s.name, "transient").Inc()
		_ = m.NakWithDelay(backoff(s.retryBase, delivered))
	}
}

func (s *stage) ack(m jetstream.Msg, outcome string) {
	if err := m.Ack(); err != nil {
		s.log.Warn("ack failed; the message will be redelivered", "subject", m.Subject(), "err", err)
		return
	}
	s.metrics.done.WithLabelValues(s.name, outcome).Inc()
}

// deadLetter publishes to the DLQ, then terminates. If the DLQ publish
// fails, the message is retried instead: it is never dropped.
func (s *stage) deadLetter(ctx context.Context, m jetstream.Msg, kind, reason string) {
	if err := s.dlq.send(ctx, letterFrom(s.name, m, kind, reason)); err != nil {
		s.log.Error("dead letter failed; retrying the message", "err", err)
		_ = m.NakWithDelay(backoff(s.retryBase, 1))
		return
	}
	_ = m.TermWithReason(truncateHeader(reason))
	s.metrics.done.WithLabelValues(s.name, "dead_lettered").Inc()
}

// watchLag polls the consumer's pending counts into gauges until ctx ends;
// each poll is bounded by timeout.
func (s *stage) watchLag(ctx context.Context, every, timeout time.Duration) {
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		ictx, cancel := context.WithTimeout(ctx, timeout)
		if info, err := s.cons.Info(ictx); err == nil {
			s.metrics.pending.WithLabelValues(s.consumerName).Set(float64(info.NumPending))
			s.metrics.ackPending.WithLabelValues(s.consumerName).Set(float64(info.NumAckPending))
		}
		cancel()
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}
