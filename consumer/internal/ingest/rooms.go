package ingest

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/lkscore/lkscore/config"
	"github.com/lkscore/lkscore/consumer/broker"
)

// RedactedRooms remembers, across ingest replicas, the rooms a signal said
// are redacted (the job's enable_redaction, the upload header's
// redaction_enabled, the SDK's lk.redaction.enabled), so that the room's
// later participant, room and egress webhooks, which say nothing of
// redaction, keep its name only as its keyed hash. The bucket holds room
// ids only, for nats.max_age. An event stored before any signal said the
// room is redacted keeps the name (docs/security.md, "Room names").
type RedactedRooms struct {
	kv jetstream.KeyValue
	mu sync.Mutex
	// known caches the rooms seen redacted by this process (at most
	// maxKnownRooms; past it the bucket answers).
	known map[string]bool
}

const maxKnownRooms = 10_000

// OpenRedactedRooms creates or updates the bucket.
func OpenRedactedRooms(ctx context.Context, env broker.Env, n config.NATS) (*RedactedRooms, error) {
	var kv jetstream.KeyValue
	err := broker.RetrySetup(ctx, env.Log, "redacted rooms bucket", env.Timeouts.Request, func(ctx context.Context) (err error) {
		kv, err = env.JS.CreateOrUpdateKeyValue(ctx, jetstream.KeyValueConfig{
			Bucket: env.Subjects.RedactedRooms(), Description: "rooms a signal said are redacted (room ids only)",
			TTL: n.MaxAge, Storage: broker.StorageType(n.Storage), Replicas: n.Replicas, History: 1,
		})
		return err
	})
	if err != nil {
		return nil, err
	}
	return &RedactedRooms{kv: kv, known: map[string]bool{}}, nil
}

// Mark records room as redacted.
func (r *RedactedRooms) Mark(ctx context.Context, room string) error {
	if r == nil || room == "" || r.has(room) {
		return nil
	}
	if _, err := r.kv.Put(ctx, kvKey(room), []byte("1")); err != nil {
		return fmt.Errorf("redacted rooms: %w", err)
	}
	r.remember(room)
	return nil
}

// Redacted reports whether a signal said room is redacted.
func (r *RedactedRooms) Redacted(ctx context.Context, room string) (bool, error) {
	if r == nil || room == "" {
		return false, nil
	}
	if r.has(room) {
		return true, nil
	}
	_, err := r.kv.Get(ctx, kvKey(room))
	switch {
	case errors.Is(err, jetstream.ErrKeyNotFound):
		return false, nil
	case err != nil:
		return false, fmt.Errorf("redacted rooms: %w", err)
	}
	r.remember(room)
	return true, nil
}

func (r *RedactedRooms) has(room string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.known[room]
}

func (r *RedactedRooms) remember(room string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.known) >= maxKnownRooms {
		clear(r.known)
	}
	r.known[room] = true
}

// kvKey is a room id as a key: the ids LiveKit gives (RM_…) as they are;
// anything else hex-encoded after "h." (a dot no plain key has), so that
// no id can name another's key.
func kvKey(room string) string {
	for _, c := range room {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-') {
			return fmt.Sprintf("h.%x", room)
		}
	}
	return room
}
