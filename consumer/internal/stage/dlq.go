package stage

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/lkscore/lkscore/consumer/broker"
	"github.com/lkscore/lkscore/consumer/internal/failure"
	"github.com/lkscore/lkscore/consumer/internal/metrics"
	"github.com/lkscore/lkscore/wire"
)

// DeadLetters publishes messages that could not be processed to
// lkscore.dlq.<stage>, with why.
type DeadLetters struct {
	env     broker.Env
	metrics *metrics.Pipeline
}

// NewDeadLetters publishes dead letters through env.
func NewDeadLetters(env broker.Env, m *metrics.Pipeline) *DeadLetters {
	return &DeadLetters{env: env, metrics: m}
}

// letter is one dead letter's content.
type letter struct {
	stage, subject, stream string
	seq, deliveries        uint64
	header                 nats.Header
	data                   []byte
	reason                 string
	kind                   string // bounded metric label: recording_not_found, malformed, bad_message, store, max_deliveries
}

// send publishes l; its msg id (stream + sequence) makes it idempotent, so
// a crash between the publish and the Term, or two workers reacting to the
// same advisory, leave one dead letter.
func (d *DeadLetters) send(ctx context.Context, l letter) error {
	msg := nats.NewMsg(d.env.Subjects.DLQ(l.stage))
	msg.Data = l.data
	for k, v := range l.header {
		switch {
		case k == jetstream.MsgIDHeader:
			msg.Header.Set(wire.HeaderDLQMsgID, v[0]) // kept for replay, not reused: it would be deduplicated
		case strings.HasPrefix(k, "Nats-"):
			// Publish expectations (Nats-Expected-Stream…) were for the original stream.
		default:
			msg.Header[k] = v
		}
	}
	msg.Header.Set(wire.HeaderDLQStage, l.stage)
	msg.Header.Set(wire.HeaderDLQError, failure.TruncateHeader(l.reason))
	msg.Header.Set(wire.HeaderDLQSubject, l.subject)
	msg.Header.Set(wire.HeaderDLQStream, l.stream)
	msg.Header.Set(wire.HeaderDLQSeq, strconv.FormatUint(l.seq, 10))
	msg.Header.Set(wire.HeaderDLQDeliveries, strconv.FormatUint(l.deliveries, 10))
	msg.Header.Set(wire.HeaderDLQAt, d.env.Now().UTC().Format(time.RFC3339Nano))
	ctx, cancel := context.WithTimeout(ctx, d.env.Timeouts.Publish)
	defer cancel()
	id := fmt.Sprintf("dlq/%s/%d", l.stream, l.seq)
	if _, err := d.env.JS.PublishMsg(ctx, msg, jetstream.WithMsgID(id)); err != nil {
		return fmt.Errorf("publish dead letter: %w", err)
	}
	d.metrics.DeadLettered.WithLabelValues(l.stage, l.kind).Inc()
	d.env.Log.Warn("dead-lettered", "stage", l.stage, "subject", l.subject, "stream_seq", l.seq, "deliveries", l.deliveries, "reason", l.reason)
	return nil
}

// letterFrom builds a dead letter for a delivered message.
func letterFrom(stage string, m jetstream.Msg, kind, reason string) letter {
	l := letter{stage: stage, subject: m.Subject(), header: m.Headers(), data: m.Data(), kind: kind, reason: reason}
	if meta, err := m.Metadata(); err == nil {
		l.stream, l.seq, l.deliveries = meta.Stream, meta.Sequence.Stream, meta.NumDelivered
	}
	return l
}

// maxDeliveriesAdvisory is the JetStream advisory sent when a message has
// been delivered MaxDeliver times without an ack.
type maxDeliveriesAdvisory struct {
	Stream     string `json:"stream"`
	Consumer   string `json:"consumer"`
	StreamSeq  uint64 `json:"stream_seq"`
	Deliveries uint64 `json:"deliveries"`
}

// WatchMaxDeliveries turns max-delivery advisories for a consumer into dead
// letters, under ctx (the pipeline's work context, so shutdown can abandon
// a lookup). Advisories are core NATS messages: one sent while no lkscore
// process listens is lost, but the message stays in its stream.
func (d *DeadLetters) WatchMaxDeliveries(ctx context.Context, nc *nats.Conn, stream, consumer, stage string) (*nats.Subscription, error) {
	subject := fmt.Sprintf("$JS.EVENT.ADVISORY.CONSUMER.MAX_DELIVERIES.%s.%s", stream, consumer)
	return nc.Subscribe(subject, func(m *nats.Msg) {
		var adv maxDeliveriesAdvisory
		if err := json.Unmarshal(m.Data, &adv); err != nil {
			d.env.Log.Error("bad max-deliveries advisory", "err", err)
			return
		}
		ctx, cancel := context.WithTimeout(ctx, d.env.Timeouts.Request)
		defer cancel()
		s, err := d.env.JS.Stream(ctx, adv.Stream)
		if err != nil {
			d.env.Log.Error("max deliveries: stream", "stream", adv.Stream, "err", err)
			return
		}
		raw, err := s.GetMsg(ctx, adv.StreamSeq)
		if err != nil {
			d.env.Log.Error("max deliveries: get message", "stream", adv.Stream, "seq", adv.StreamSeq, "err", err)
			return
		}
		l := letter{stage: stage, subject: raw.Subject, stream: adv.Stream, seq: adv.StreamSeq, deliveries: adv.Deliveries,
			header: raw.Header, data: raw.Data, kind: "max_deliveries", reason: fmt.Sprintf("max deliveries (%d) exceeded", adv.Deliveries)}
		if err := d.send(ctx, l); err != nil {
			d.env.Log.Error("max deliveries: dead letter", "err", err)
		}
	})
}
