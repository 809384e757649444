package stage

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/lkscore/lkscore/consumer/broker"
	"github.com/lkscore/lkscore/consumer/internal/failure"
	"github.com/lkscore/lkscore/consumer/internal/metrics"
	"github.com/lkscore/lkscore/store"
	"github.com/lkscore/lkscore/wire"
)

// fakeMsg is a delivered message that records what the stage did with it.
type fakeMsg struct {
	meta    *jetstream.MsgMetadata // nil: Metadata fails
	ackErr  error
	did     string // ack, nak, nak_delay, term, in_progress
	delay   time.Duration
	reason  string
	subject string
}

func (m *fakeMsg) Metadata() (*jetstream.MsgMetadata, error) {
	if m.meta == nil {
		return nil, errors.New("not a JetStream message")
	}
	return m.meta, nil
}
func (m *fakeMsg) Data() []byte                    { return []byte(`{"x":1}`) }
func (m *fakeMsg) Headers() nats.Header            { return nats.Header{jetstream.MsgIDHeader: []string{"id-1"}} }
func (m *fakeMsg) Subject() string                 { return m.subject }
func (m *fakeMsg) Reply() string                   { return "" }
func (m *fakeMsg) Ack() error                      { m.did = "ack"; return m.ackErr }
func (m *fakeMsg) DoubleAck(context.Context) error { m.did = "ack"; return m.ackErr }
func (m *fakeMsg) Nak() error                      { m.did = "nak"; return nil }
func (m *fakeMsg) NakWithDelay(d time.Duration) error {
	m.did, m.delay = "nak_delay", d
	return nil
}
func (m *fakeMsg) InProgress() error { m.did = "in_progress"; return nil }
func (m *fakeMsg) Term() error       { m.did = "term"; return nil }
func (m *fakeMsg) TermWithReason(r string) error {
	m.did, m.reason = "term", r
	return nil
}

// fakeJS is the dead-letter stream: it takes or refuses the publish.
type fakeJS struct {
	jetstream.JetStream
	err       error
	published []*nats.Msg
}

func (f *fakeJS) PublishMsg(_ context.Context, m *nats.Msg, _ ...jetstream.PublishOpt) (*jetstream.PubAck, error) {
	if f.err != nil {
		return nil, f.err
	}
	f.published = append(f.published, m)
	return &jetstream.PubAck{}, nil
}

// TestDecide: the ack decision, every branch, on a hand-made
// message: what is done with it (ack, delayed nak with which delay,
// terminate), what is dead-lettered, and what is counted.
func TestDecide(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 12, 3, 12, 0, 0, 0, time.UTC)
	const deadline, base = 30 * time.Minute, time.Second
	meta := func(age time.Duration, delivered uint64) *jetstream.MsgMetadata {
		return &jetstream.MsgMetadata{Stream: "LKSCORE_WEBHOOKS", Sequence: jetstream.SequencePair{Stream: 42}, NumDelivered: delivered,
			Timestamp: now.Add(-age)}
	}
	giveUpAck := func(jetstream.Msg) bool { return false } // "nothing to score": ack
	for _, tc := range []struct {
		name      string
		err       error
		meta      *jetstream.MsgMetadata
		ackErr    error
		dlqErr    error
		giveUp    func(jetstream.Msg) bool
		did       string
		delay     time.Duration // the delay asked for; with jittered, before its ±20%
		jittered  bool
		dlq       bool   // a dead letter was published
		done      string // lkscore_pipeline_done_total outcome counted once, "" none
		retried   string // lkscore_pipeline_retried_total reason counted once, "" none
		storeDown bool   // the store is marked down
	}{
		{name: "done", meta: meta(time.Second, 1), did: "ack", done: "done"},
		{name: "done, ack lost", meta: meta(time.Second, 1), ackErr: errors.New("nats: timeout"), did: "ack"},
		{name: "not yet, young", err: failure.ErrNotYet, meta: meta(time.Minute, 3), did: "nak_delay",
			delay: 4 * base, jittered: true, retried: "recording_not_found"},
		{name: "not yet, the last retry lands at the deadline", err: failure.ErrNotYet, meta: meta(deadline-10*time.Second, 12),
			did: "nak_delay", delay: 11 * time.Second, retried: "recording_not_found"},
		{name: "not yet, past the deadline, nothing to score", err: failure.ErrNotYet, meta: meta(deadline, 20), giveUp: giveUpAck,
			did: "ack", done: "no_recording"},
		{name: "not yet, past the deadline: dead letter", err: failure.ErrNotYet, meta: meta(deadline+time.Minute, 20), did: "term",
			dlq: true, done: "dead_lettered"},
		{name: "not yet, no metadata: age 0, retried", err: failure.ErrNotYet, did: "nak_delay", delay: base, jittered: true,
			retried: "recording_not_found"},
		{name: "permanent: dead letter", err: failure.Permanent(errors.New("bad json")), meta: meta(time.Second, 1), did: "term",
			dlq: true, done: "dead_lettered"},
		{name: "permanent, dead-letter publish fails: retried, never dropped", err: failure.Permanent(errors.New("bad json")),
			meta: meta(time.Second, 1), dlqErr: errors.New("nats: no responders"), did: "nak_delay", delay: base, jittered: true},
		{name: "store down", err: fmt.Errorf("read: %w", store.ErrUnavailable), meta: meta(time.Second, 1), did: "nak_delay",
			delay: time.Second, storeDown: true},
		{name: "transient", err: errors.New("nats: timeout"), meta: meta(time.Second, 4), did: "nak_delay",
			delay: 8 * base, jittered: true, retried: "transient"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := metrics.NewPipeline(nil)
			log := slog.New(slog.NewTextHandler(io.Discard, nil))
			js := &fakeJS{err: tc.dlqErr}
			env := broker.Env{JS: js, Subjects: wire.NewSubjects("lkscore.", "LKSCORE"), Timeouts: broker.Timeouts{Publish: time.Second},
				Now: func() time.Time { return now }, Log: log}
			probed := 0
			health := mustHealth(t, HealthOptions{Probe: func(context.Context) error { probed++; return nil }, Interval: time.Second,
				ProbeTimeout: time.Second, Up: m.DependencyUp, Log: log})
			s := New(Spec{Name: wire.StageLocate, Consumer: jetstream.ConsumerConfig{Durable: "locate"}, OnGiveUp: tc.giveUp}, nil,
				Pacing{Concurrency: 1, Deadline: deadline, RetryBase: base},
				Deps{Metrics: m, Log: log, Health: health, DLQ: NewDeadLetters(env, m), Now: func() time.Time { return now }})
			msg := &fakeMsg{meta: tc.meta, ackErr: tc.ackErr, subject: "lkscore.webhook.agent_job_ended"}
			s.decide(context.Background(), msg, tc.err)
			lo, hi := tc.delay, tc.delay
			if tc.jittered {
				lo, hi = tc.delay*8/10, tc.delay*12/10
			}
			if msg.did != tc.did || (tc.delay != 0 && (msg.delay < lo || msg.delay > hi)) {
				t.Errorf("did %s (delay %s), want %s (delay %s)", msg.did, msg.delay, tc.did, tc.delay)
			}
			if got := len(js.published) == 1; got != tc.dlq {
				t.Errorf("dead letter published: %v, want %v", got, tc.dlq)
			}
			if tc.dlq && js.published[0].Header.Get(wire.HeaderDLQStage) != wire.StageLocate {
				t.Errorf("dead letter headers %v", js.published[0].Header)
			}
			for _, outcome := range []string{"done", "no_recording", "dead_lettered"} {
				want := 0.0
				if outcome == tc.done {
					want = 1
				}
				if v := testutil.ToFloat64(m.Done.WithLabelValues(wire.StageLocate, outcome)); v != want {
					t.Errorf("done{%s} = %v, want %v", outcome, v, want)
				}
			}
			for _, reason := range []string{"recording_not_found", "transient"} {
				want := 0.0
				if reason == tc.retried {
					want = 1
				}
				if v := testutil.ToFloat64(m.Retried.WithLabelValues(wire.StageLocate, reason)); v != want {
					t.Errorf("retried{%s} = %v, want %v", reason, v, want)
				}
			}
			if down := health.Status() != ""; down != tc.storeDown {
				t.Errorf("store marked down: %v, want %v", down, tc.storeDown)
			}
		})
	}
}

// TestRetryLogTenMinutes: a stage whose target is down for 10 minutes of
// its clock, its messages failing 648 times a minute: the retry loop logs
// the first failure, a summary a minute (at most 12 warn lines in all) and
// one recovery line when work succeeds again; the metric counts every try.
// A store outage (failed probes and stage errors alike) logs the same way.
func TestRetryLogTenMinutes(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 12, 3, 12, 0, 0, 0, time.UTC)
	clock := func() time.Time { return now }
	var logs strings.Builder
	log := slog.New(slog.NewTextHandler(&logs, nil))
	m := metrics.NewPipeline(nil)
	health := mustHealth(t, HealthOptions{Probe: func(context.Context) error { return nil }, Interval: time.Second,
		ProbeTimeout: time.Second, Up: m.DependencyUp, Log: log})
	s := New(Spec{Name: wire.StageForward, Consumer: jetstream.ConsumerConfig{Durable: "forward-insights"}}, nil,
		Pacing{Concurrency: 8, Deadline: time.Hour, RetryBase: time.Second}, Deps{Metrics: m, Log: log, Health: health, Now: clock})
	meta := &jetstream.MsgMetadata{NumDelivered: 3, Timestamp: now}
	tries := 0
	for end := now.Add(10 * time.Minute); now.Before(end); now = now.Add(time.Minute / 648) {
		s.decide(context.Background(), &fakeMsg{meta: meta, subject: "lkscore.forward.x"}, fmt.Errorf("forward to insights: answered 503 (%d)", tries))
		tries++
	}
	s.decide(context.Background(), &fakeMsg{meta: meta, subject: "lkscore.forward.x"}, nil)
	warn := strings.Count(logs.String(), "level=WARN")
	recovered := strings.Count(logs.String(), `msg="work succeeds again"`)
	if warn < 10 || warn > 12 || recovered != 1 {
		t.Fatalf("%d tries in 10 minutes: %d warn lines, %d recovery lines\n%s", tries, warn, recovered, logs.String())
	}
	if v := testutil.ToFloat64(m.Retried.WithLabelValues(wire.StageForward, "transient")); v != float64(tries) {
		t.Errorf("retried{transient} = %v, want every one of the %d tries", v, tries)
	}
	if !strings.Contains(logs.String(), `msg="retrying: still failing" target=forward-insights`) ||
		!strings.Contains(logs.String(), fmt.Sprintf("failed_tries=%d", tries)) {
		t.Errorf("no summary or recovery count:\n%s", logs.String())
	}

	logs.Reset()
	for range 600 { // the store: a probe a second for 10 minutes (the health loop's own clock is real time)
		health.StoreDown(errors.New("s3: connection refused"))
	}
	health.storeUp()
	if w, r := strings.Count(logs.String(), "level=WARN"), strings.Count(logs.String(), "recording store is back"); w != 1 || r != 1 {
		t.Errorf("a store outage: %d warn lines, %d recovery lines\n%s", w, r, logs.String())
	}
}
