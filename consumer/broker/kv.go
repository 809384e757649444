package broker

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/lkscore/lkscore/consumer/internal/failure"
)

// DefaultAttempts bounds the compare-and-set rounds of one Modify: that
// many conflicting writers in a row fail it.
const DefaultAttempts = 16

// KV reads and writes values of type T in a key-value bucket, each write a
// compare-and-set on the revision read, so concurrent writers (replicas,
// stages) never lose each other's changes.
type KV[T any] struct {
	Bucket  jetstream.KeyValue
	Timeout time.Duration // one request
	// Attempts bounds Modify's compare-and-set rounds (0: DefaultAttempts).
	Attempts int
	// Encode and Decode convert values (nil: encoding/json). Decode gets
	// the entry's key and revision, so a caller may keep decoded values.
	Encode func(v *T) ([]byte, error)
	Decode func(key string, rev uint64, data []byte, v *T) error
}

// Get returns the value under key and its revision; an absent key gives the
// zero value and revision 0. A value that does not decode is permanent.
func (b KV[T]) Get(ctx context.Context, key string) (*T, uint64, error) {
	rctx, cancel := context.WithTimeout(ctx, b.Timeout)
	defer cancel()
	e, err := b.Bucket.Get(rctx, key)
	v := new(T)
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return v, 0, nil
	}
	if err != nil {
		return nil, 0, fmt.Errorf("read %s: %w", key, err)
	}
	if b.Decode != nil {
		err = b.Decode(key, e.Revision(), e.Value(), v)
	} else {
		err = json.Unmarshal(e.Value(), v)
	}
	if err != nil {
		return nil, 0, failure.Permanent(fmt.Errorf("%s is not valid JSON: %w", key, err))
	}
	return v, e.Revision(), nil
}

// Put writes v under key with compare-and-set: created when rev is 0
// (absent), else updated only if still at rev. It returns the new revision;
// IsConflict tells a lost race.
func (b KV[T]) Put(ctx context.Context, key string, v *T, rev uint64) (uint64, error) {
	var data []byte
	var err error
	if b.Encode != nil {
		data, err = b.Encode(v)
	} else {
		data, err = json.Marshal(v)
	}
	if err != nil {
		return 0, failure.Permanent(fmt.Errorf("encode %s: %w", key, err))
	}
	wctx, cancel := context.WithTimeout(ctx, b.Timeout)
	defer cancel()
	if rev == 0 {
		return b.Bucket.Create(wctx, key, data)
	}
	return b.Bucket.Update(wctx, key, data, rev)
}

// Entry is a value as read or written, with its revision (0: absent).
type Entry[T any] struct {
	Value *T
	Rev   uint64
}

// Modify applies change to the value under key and writes it if change
// returns true, with compare-and-set: on a conflict it reads the value again
// and applies change to that, up to Attempts times. from, when not nil, is
// the value to start from instead of reading it (the caller's own last
// write); change may modify it. It returns the value as written, or as read
// when change wrote nothing, and whether it wrote.
func (b KV[T]) Modify(ctx context.Context, key string, from *Entry[T], change func(v *T) bool) (Entry[T], bool, error) {
	attempts := b.Attempts
	if attempts <= 0 {
		attempts = DefaultAttempts
	}
	for attempt := range attempts {
		if attempt > 0 {
			// Writers that keep colliding spread out: a random pause up to
			// 2^attempt ms, at most 32 ms ("full jitter"). Without it four
			// writers adding to one session in a tight loop lost 16 rounds
			// in a row (factstore's TestConcurrentAddsKeepEverything); with
			// a pause of at most 8 ms they still did under -race.
			pause := time.Duration(rand.Int64N(int64(min(time.Millisecond<<attempt, 32*time.Millisecond))))
			select {
			case <-ctx.Done():
				return Entry[T]{}, false, fmt.Errorf("write %s: %w", key, ctx.Err())
			case <-time.After(pause):
			}
		}
		var cur Entry[T]
		if from != nil {
			cur, from = *from, nil // a conflict reads the entry afresh
		} else {
			v, rev, err := b.Get(ctx, key)
			if err != nil {
				return Entry[T]{}, false, err
			}
			cur = Entry[T]{Value: v, Rev: rev}
		}
		if !change(cur.Value) {
			return cur, false, nil
		}
		rev, err := b.Put(ctx, key, cur.Value, cur.Rev)
		if err == nil {
			return Entry[T]{Value: cur.Value, Rev: rev}, true, nil
		}
		if !IsConflict(err) {
			return Entry[T]{}, false, fmt.Errorf("write %s: %w", key, err)
		}
	}
	return Entry[T]{}, false, fmt.Errorf("write %s: %d conflicting writers in a row", key, attempts)
}

// IsConflict reports whether a write lost a compare-and-set: the key
// exists (create) or moved on (update).
func IsConflict(err error) bool {
	var apiErr *jetstream.APIError
	return errors.Is(err, jetstream.ErrKeyExists) ||
		(errors.As(err, &apiErr) && (apiErr.ErrorCode == jetstream.JSErrCodeStreamWrongLastSequence ||
			apiErr.ErrorCode == jetstream.JSErrCodeStreamWrongLastSequenceConstant))
}
