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
	// Recent, when set, remembers the entries this process wrote or read
	// last; Modify starts from them instead of reading (see Recent).
	Recent *Recent
}

// Get returns the value under key and its revision; an absent key gives the
// zero value and revision 0. A value that does not decode is permanent.
func (b KV[T]) Get(ctx context.Context, key string) (*T, uint64, error) {
	rctx, cancel := context.WithTimeout(ctx, b.Timeout)
	defer cancel()
	e, err := b.Bucket.Get(rctx, key)
	v := new(T)
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		b.Recent.Forget(key)
		return v, 0, nil
	}
	if err != nil {
		return nil, 0, fmt.Errorf("read %s: %w", key, err)
	}
	if err := b.decode(key, e.Revision(), e.Value(), v); err != nil {
		return nil, 0, err
	}
	b.Recent.Remember(key, e.Revision(), e.Value())
	return v, e.Revision(), nil
}

func (b KV[T]) decode(key string, rev uint64, data []byte, v *T) error {
	var err error
	if b.Decode != nil {
		err = b.Decode(key, rev, data, v)
	} else {
		err = json.Unmarshal(data, v)
	}
	if err != nil {
		return failure.Permanent(fmt.Errorf("%s is not valid JSON: %w", key, err))
	}
	return nil
}

// Put writes v under key with compare-and-set: created when rev is 0
// (absent), else updated only if still at rev. It returns the new revision;
// IsConflict tells a lost race.
func (b KV[T]) Put(ctx context.Context, key string, v *T, rev uint64) (uint64, error) {
	return b.put(ctx, key, v, rev, false)
}

// put is Put; absent says the entry is only guessed absent (nothing
// remembered): written on "no revision yet" (a deleted entry's marker
// conflicts, and the caller reads it).
func (b KV[T]) put(ctx context.Context, key string, v *T, rev uint64, absent bool) (uint64, error) {
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
	var written uint64
	switch {
	case absent:
		written, err = b.Bucket.Update(wctx, key, data, 0)
	case rev == 0:
		written, err = b.Bucket.Create(wctx, key, data)
	default:
		written, err = b.Bucket.Update(wctx, key, data, rev)
	}
	if err != nil {
		b.Recent.Forget(key)
		return 0, err
	}
	b.Recent.Remember(key, written, data)
	return written, nil
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
		cur, guessed, err := b.start(ctx, key, from, attempt)
		if err != nil {
			return Entry[T]{}, false, err
		}
		from = nil // a conflict reads the entry afresh
		if !change(cur.Value) {
			if !guessed {
				return cur, false, nil
			}
			// Nothing to write to an empty entry: the real one decides.
			if cur, err = b.read(ctx, key); err != nil {
				return Entry[T]{}, false, err
			}
			if guessed = false; !change(cur.Value) {
				return cur, false, nil
			}
		}
		rev, err := b.put(ctx, key, cur.Value, cur.Rev, guessed)
		if err == nil {
			return Entry[T]{Value: cur.Value, Rev: rev}, true, nil
		}
		if !IsConflict(err) {
			return Entry[T]{}, false, fmt.Errorf("write %s: %w", key, err)
		}
	}
	return Entry[T]{}, false, fmt.Errorf("write %s: %d conflicting writers in a row", key, attempts)
}

// start is the entry Modify applies its change to on attempt: on the first
// attempt, the one remembered if newer than from (Recent), else from, else
// (with Recent, nothing remembered) a guess that it is absent (guessed:
// written as new, read on a conflict); on a later attempt, the one read now.
func (b KV[T]) start(ctx context.Context, key string, from *Entry[T], attempt int) (e Entry[T], guessed bool, err error) {
	if attempt == 0 && b.Recent != nil {
		data, rev, ok := b.Recent.get(key)
		switch {
		case ok && (from == nil || rev > from.Rev): // newer than the caller's
			v := new(T)
			if err := b.decode(key, rev, data, v); err == nil {
				return Entry[T]{Value: v, Rev: rev}, false, nil
			}
		case !ok && from == nil:
			return Entry[T]{Value: new(T)}, true, nil
		}
	}
	if from != nil {
		return *from, false, nil
	}
	e, err = b.read(ctx, key)
	return e, false, err
}

// read is Get as an Entry.
func (b KV[T]) read(ctx context.Context, key string) (Entry[T], error) {
	v, rev, err := b.Get(ctx, key)
	if err != nil {
		return Entry[T]{}, err
	}
	return Entry[T]{Value: v, Rev: rev}, nil
}

// IsConflict reports whether a write lost a compare-and-set: the key
// exists (create) or moved on (update).
func IsConflict(err error) bool {
	var apiErr *jetstream.APIError
	return errors.Is(err, jetstream.ErrKeyExists) ||
		(errors.As(err, &apiErr) && (apiErr.ErrorCode == jetstream.JSErrCodeStreamWrongLastSequence ||
			apiErr.ErrorCode == jetstream.JSErrCodeStreamWrongLastSequenceConstant))
}
