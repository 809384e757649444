package broker

import (
	"context"
	"fmt"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/lkscore/lkscore/consumer/internal/failure"
)

// MaxSubjectLen bounds every subject and key-value key the daemon sends.
// A NATS server closes the connection of a client whose protocol line is
// over its max_control_line (4 KiB by default), and nats.go does not
// reconnect after it: one subject built from a hostile id once cut the
// whole process off from NATS (issue 65). The id rule (wire.CheckID) keeps
// such ids out; this is the last line, where every publish and key passes.
const MaxSubjectLen = 1024

// SubjectError is a subject or key refused before it was sent: permanent,
// so the work that made it is dead-lettered, not retried.
type SubjectError struct {
	What string // "subject", "key"
	Len  int
}

func (e *SubjectError) Error() string {
	return fmt.Sprintf("%s of %d bytes refused: over %d (NATS would close the connection)", e.What, e.Len, MaxSubjectLen)
}

func checkLen(what, s string) error {
	if len(s) > MaxSubjectLen {
		return failure.Permanent(&SubjectError{What: what, Len: len(s)})
	}
	return nil
}

// Guard wraps js so that no publish and no key-value operation sends a
// subject or key over MaxSubjectLen: each fails with a permanent
// SubjectError instead, and the connection stays up.
func Guard(js jetstream.JetStream) jetstream.JetStream {
	if g, ok := js.(guardedJS); ok {
		return g
	}
	return guardedJS{js}
}

type guardedJS struct{ jetstream.JetStream }

func (g guardedJS) Publish(ctx context.Context, subj string, data []byte, opts ...jetstream.PublishOpt) (*jetstream.PubAck, error) {
	if err := checkLen("subject", subj); err != nil {
		return nil, err
	}
	return g.JetStream.Publish(ctx, subj, data, opts...)
}

func (g guardedJS) PublishMsg(ctx context.Context, msg *nats.Msg, opts ...jetstream.PublishOpt) (*jetstream.PubAck, error) {
	if err := checkLen("subject", msg.Subject); err != nil {
		return nil, err
	}
	return g.JetStream.PublishMsg(ctx, msg, opts...)
}

func (g guardedJS) PublishAsync(subj string, data []byte, opts ...jetstream.PublishOpt) (jetstream.PubAckFuture, error) {
	if err := checkLen("subject", subj); err != nil {
		return nil, err
	}
	return g.JetStream.PublishAsync(subj, data, opts...)
}

func (g guardedJS) PublishMsgAsync(msg *nats.Msg, opts ...jetstream.PublishOpt) (jetstream.PubAckFuture, error) {
	if err := checkLen("subject", msg.Subject); err != nil {
		return nil, err
	}
	return g.JetStream.PublishMsgAsync(msg, opts...)
}

func (g guardedJS) KeyValue(ctx context.Context, bucket string) (jetstream.KeyValue, error) {
	return guardKV(g.JetStream.KeyValue(ctx, bucket))
}

func (g guardedJS) CreateKeyValue(ctx context.Context, cfg jetstream.KeyValueConfig) (jetstream.KeyValue, error) {
	return guardKV(g.JetStream.CreateKeyValue(ctx, cfg))
}

func (g guardedJS) UpdateKeyValue(ctx context.Context, cfg jetstream.KeyValueConfig) (jetstream.KeyValue, error) {
	return guardKV(g.JetStream.UpdateKeyValue(ctx, cfg))
}

func (g guardedJS) CreateOrUpdateKeyValue(ctx context.Context, cfg jetstream.KeyValueConfig) (jetstream.KeyValue, error) {
	return guardKV(g.JetStream.CreateOrUpdateKeyValue(ctx, cfg))
}

func guardKV(kv jetstream.KeyValue, err error) (jetstream.KeyValue, error) {
	if err != nil || kv == nil {
		return kv, err
	}
	return guardedKV{kv}, nil
}

// guardedKV checks every key (and watch filter) before it is sent.
type guardedKV struct{ jetstream.KeyValue }

func (g guardedKV) Get(ctx context.Context, key string) (jetstream.KeyValueEntry, error) {
	if err := checkLen("key", key); err != nil {
		return nil, err
	}
	return g.KeyValue.Get(ctx, key)
}

func (g guardedKV) GetRevision(ctx context.Context, key string, revision uint64) (jetstream.KeyValueEntry, error) {
	if err := checkLen("key", key); err != nil {
		return nil, err
	}
	return g.KeyValue.GetRevision(ctx, key, revision)
}

func (g guardedKV) Put(ctx context.Context, key string, value []byte) (uint64, error) {
	if err := checkLen("key", key); err != nil {
		return 0, err
	}
	return g.KeyValue.Put(ctx, key, value)
}

func (g guardedKV) PutString(ctx context.Context, key string, value string) (uint64, error) {
	if err := checkLen("key", key); err != nil {
		return 0, err
	}
	return g.KeyValue.PutString(ctx, key, value)
}

func (g guardedKV) Create(ctx context.Context, key string, value []byte, opts ...jetstream.KVCreateOpt) (uint64, error) {
	if err := checkLen("key", key); err != nil {
		return 0, err
	}
	return g.KeyValue.Create(ctx, key, value, opts...)
}

func (g guardedKV) Update(ctx context.Context, key string, value []byte, revision uint64) (uint64, error) {
	if err := checkLen("key", key); err != nil {
		return 0, err
	}
	return g.KeyValue.Update(ctx, key, value, revision)
}

func (g guardedKV) Delete(ctx context.Context, key string, opts ...jetstream.KVDeleteOpt) error {
	if err := checkLen("key", key); err != nil {
		return err
	}
	return g.KeyValue.Delete(ctx, key, opts...)
}

func (g guardedKV) Purge(ctx context.Context, key string, opts ...jetstream.KVDeleteOpt) error {
	if err := checkLen("key", key); err != nil {
		return err
	}
	return g.KeyValue.Purge(ctx, key, opts...)
}

func (g guardedKV) Watch(ctx context.Context, keys string, opts ...jetstream.WatchOpt) (jetstream.KeyWatcher, error) {
	if err := checkLen("key", keys); err != nil {
		return nil, err
	}
	return g.KeyValue.Watch(ctx, keys, opts...)
}

func (g guardedKV) History(ctx context.Context, key string, opts ...jetstream.WatchOpt) ([]jetstream.KeyValueEntry, error) {
	if err := checkLen("key", key); err != nil {
		return nil, err
	}
	return g.KeyValue.History(ctx, key, opts...)
}
