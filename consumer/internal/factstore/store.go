// Package factstore keeps the session facts (package facts: the record and
// its pure rules) in the KV bucket <stream prefix>_SESSION_FACTS, every write
// a compare-and-set, so concurrent writers (ingest, locators, settlers)
// never lose each other's facts.
package factstore

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"time"

	gojson "github.com/goccy/go-json"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/lkscore/lkscore/config"
	"github.com/lkscore/lkscore/consumer/broker"
	"github.com/lkscore/lkscore/consumer/internal/facts"
	"github.com/lkscore/lkscore/consumer/internal/failure"
	"github.com/lkscore/lkscore/scoring"
	"github.com/lkscore/lkscore/wire"
)

// Store reads and merges session facts in the KV bucket, every write a
// compare-and-set (broker.KV).
type Store struct {
	kv broker.KV[facts.SessionFacts]
	// locks serialize this process's writers of one entry: each starts
	// from the last one's write (remembered) instead of losing a
	// compare-and-set to it and reading the entry again. One lock per
	// entry, not stripes: a write stuck until its timeout (NATS going
	// away mid-request) holds up only its own entry's writers.
	locks *keyLocks
	// listed are sessions this process listed in their room's entry whose
	// joined mark waits for their next write (Add).
	listed *broker.Recent
	now    func() time.Time
	// RedactAll keeps no error text of any session (privacy.redaction:
	// always): every session is redacted.
	RedactAll bool
}

// Remembered entries (broker.Recent): about 20 s of sessions at 100/s (a
// session's entry and its room's), each trusted for a minute.
const (
	recentEntries = 4096
	recentFor     = time.Minute
)

// New works on the facts bucket kv.
func New(kv jetstream.KeyValue, timeout time.Duration, now func() time.Time) *Store {
	return &Store{now: now, kv: broker.KV[facts.SessionFacts]{Bucket: kv, Timeout: timeout,
		Decode: func(_ string, _ uint64, data []byte, f *facts.SessionFacts) error { return Decode(data, f) },
		Recent: broker.NewRecent(recentEntries, recentFor)}, locks: &keyLocks{m: map[string]*keyLock{}},
		listed: broker.NewRecent(recentEntries, time.Hour)}
}

// modify is kv.Modify with key's lock held, or without it once the lock
// has been waited for lockWait.
func (s *Store) modify(ctx context.Context, key string, from *broker.Entry[facts.SessionFacts],
	change func(*facts.SessionFacts) bool) (broker.Entry[facts.SessionFacts], bool, error) {
	defer s.locks.lock(key, lockWait)()
	return s.kv.Modify(ctx, key, from, change)
}

// lockWait bounds the wait for an entry's lock. A write holds it for a round
// trip; one whose request was lost with a stopping NATS server holds it
// until nats.request_timeout, and the entry's other writers must not wait
// that long (TestNATSRestartBacklog saw them wait 10 s): past lockWait they
// go ahead, and the compare-and-set keeps both writes.
const lockWait = 100 * time.Millisecond

// keyLocks are a lock per key, kept while some goroutine holds or waits
// for it.
type keyLocks struct {
	mu sync.Mutex
	m  map[string]*keyLock
}

type keyLock struct {
	held  chan struct{} // a token while held
	users int
}

// lock takes key's lock, waiting at most wait, and returns its release
// (which releases nothing when the wait ran out).
func (l *keyLocks) lock(key string, wait time.Duration) func() {
	l.mu.Lock()
	k := l.m[key]
	if k == nil {
		k = &keyLock{held: make(chan struct{}, 1)}
		l.m[key] = k
	}
	k.users++
	l.mu.Unlock()
	got := false
	select {
	case k.held <- struct{}{}:
		got = true
	default:
		t := time.NewTimer(wait)
		select {
		case k.held <- struct{}{}:
			got = true
		case <-t.C:
		}
		t.Stop()
	}
	return func() {
		if got {
			<-k.held
		}
		l.mu.Lock()
		if k.users--; k.users == 0 {
			delete(l.m, key)
		}
		l.mu.Unlock()
	}
}

// WithoutMemory makes every change read its entry first (no broker.Recent):
// for a process without the settler's watch (the ingest role), whose memory
// of entries that other processes write would mostly be stale, each stale
// one costing a lost compare-and-set.
func (s *Store) WithoutMemory() { s.kv.Recent, s.listed = nil, nil }

// Observe records an entry the bucket's watch delivered (the settler's),
// so that this process's next change to it starts from it without a read,
// whichever process wrote it.
func (s *Store) Observe(e jetstream.KeyValueEntry) {
	if e.Operation() != jetstream.KeyValuePut {
		s.kv.Recent.Forget(e.Key())
		return
	}
	s.kv.Recent.Remember(e.Key(), e.Revision(), e.Value())
}

// Bucket is the facts bucket, for watching it.
func (s *Store) Bucket() jetstream.KeyValue { return s.kv.Bucket }

// Add merges u into the session's entry with compare-and-swap, so
// concurrent writers (ingest, locators, settlers) never lose each other's
// facts. An update that adds nothing writes nothing.
func (s *Store) Add(ctx context.Context, u facts.Update) error {
	if u.RoomID == "" {
		return failure.Permanent(errors.New("session facts need a room id"))
	}
	if s.RedactAll {
		u.Observations = slices.DeleteFunc(slices.Clone(u.Observations), func(o facts.Observation) bool { return o.Field == facts.FieldErrorText })
	}
	key := facts.Key(u.RoomID, u.JobID)
	joined := true
	written, _, err := s.modify(ctx, key, nil, func(f *facts.SessionFacts) bool {
		if f.RoomID == "" {
			f.RoomID, f.JobID = u.RoomID, u.JobID
		}
		listed := s.listed.Has(key)
		joined = f.RoomJoined || facts.IsRoomKey(key) || listed
		if !facts.Merge(f, u) {
			return false
		}
		f.RoomJoined = f.RoomJoined || listed
		f.LastInputAt = s.now().UTC()
		return true
	})
	if err != nil || joined {
		return err
	}
	// A session new to its room: register it in the room's entry and take
	// what the room's webhooks said so far (locate's roomEvent does the converse).
	obs, err := s.joinRoom(ctx, u.RoomID, key)
	if err != nil {
		return err
	}
	if len(obs) == 0 {
		// The room had nothing to give: the session is listed, so every
		// room fact from now on is copied to it (roomEvent). Marking it
		// joined can wait for its next write (in this process; another
		// process finds it listed and marks it then): one write fewer.
		s.listed.Remember(key, 1, nil)
		return nil
	}
	// Continue from the entry just written: no read of it, unless another
	// writer changed it meanwhile (the compare-and-set says so).
	_, _, err = s.modify(ctx, key, &written, func(f *facts.SessionFacts) bool {
		if f.RoomID == "" || f.RoomJoined {
			return false
		}
		f.RoomJoined = true
		if facts.Merge(f, facts.Update{Observations: obs}) {
			f.LastInputAt = s.now().UTC()
		}
		return true
	})
	return err
}

// maxRoomSessions bounds the sessions a room's entry lists (a room runs
// one agent session, rarely a few).
const maxRoomSessions = 64

// joinRoom lists session key in its room's entry and returns the room's
// observations as of that write. Room webhooks (locate's roomEvent) add to the same
// entry with compare-and-swap and then copy to every session it lists, so
// whichever of the two writes second sees the other: no room fact is missed.
func (s *Store) joinRoom(ctx context.Context, roomID, key string) ([]facts.Observation, error) {
	var obs []facts.Observation
	err := s.Modify(ctx, facts.RoomKey(roomID), func(f *facts.SessionFacts) bool {
		obs = slices.Clone(f.Observations)
		if f.RoomID == "" {
			f.RoomID, f.JobID = roomID, facts.RoomKeyJob
		}
		i, found := slices.BinarySearch(f.Sessions, key)
		if found || len(f.Sessions) >= maxRoomSessions {
			return false
		}
		f.Sessions = slices.Insert(f.Sessions, i, key)
		return true
	})
	return obs, err
}

// AddTo adds observations to an existing entry; an absent one stays absent.
func (s *Store) AddTo(ctx context.Context, key string, obs []facts.Observation) error {
	return s.Modify(ctx, key, func(f *facts.SessionFacts) bool {
		if f.RoomID == "" || !facts.Merge(f, facts.Update{Observations: obs}) {
			return false
		}
		f.LastInputAt = s.now().UTC()
		return true
	})
}

// roomKeys lists the session entries of a room (not its own entry) for a
// legacy upload without a job id.
func (s *Store) roomKeys(ctx context.Context, roomID string) ([]string, error) {
	rctx, cancel := context.WithTimeout(ctx, s.kv.Timeout)
	defer cancel()
	lister, err := s.kv.Bucket.ListKeysFiltered(rctx, facts.RoomFilter(roomID))
	if errors.Is(err, jetstream.ErrNoKeysFound) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("list session facts of room %s: %w", roomID, err)
	}
	var keys []string
	for k := range lister.Keys() {
		if !facts.IsRoomKey(k) {
			keys = append(keys, k)
		}
	}
	return keys, nil
}

// Modify applies change to the entry under key (a zero entry when absent)
// and writes it if change returns true.
func (s *Store) Modify(ctx context.Context, key string, change func(*facts.SessionFacts) bool) error {
	_, _, err := s.modify(ctx, key, nil, change)
	return err
}

// ModifyFrom is Modify starting from a known entry (the caller's last read
// or write) instead of reading it; change may modify it.
func (s *Store) ModifyFrom(ctx context.Context, key string, from broker.Entry[facts.SessionFacts],
	change func(*facts.SessionFacts) bool) error {
	_, _, err := s.modify(ctx, key, &from, change)
	return err
}

// Decode decodes a facts entry. The entries are lkscore's own writing
// and read several times a session (the store, the settler's watch), so
// goccy/go-json decodes them: a quarter of encoding/json's CPU on an entry
// with spans (BenchmarkFactsDecode, docs/performance.md).
func Decode(data []byte, f *facts.SessionFacts) error { return gojson.Unmarshal(data, f) }

// Get returns the entry under key and its revision (0 when absent).
func (s *Store) Get(ctx context.Context, key string) (*facts.SessionFacts, uint64, error) {
	return s.kv.Get(ctx, key)
}

// RoomSignals returns the observations and the spans of every session of a
// room but skip: an upload without a job id (SDKs before 1.6.6) borrows what
// other signals said about its room, its spans included (the agents-py
// 1.5.17 fixture's spans were lost without them: TestAgentsPyVersions).
//
// The room's entry lists its sessions (joinRoom). Only a room whose entry
// lists none (entries written before sessions joined their room) is listed
// with ListKeysFiltered, which under concurrent writes was seen to return
// no keys although they existed.
func (s *Store) RoomSignals(ctx context.Context, roomID, skip string) ([]facts.Observation, []scoring.Span, error) {
	room, _, err := s.Get(ctx, facts.RoomKey(roomID))
	if err != nil {
		return nil, nil, err
	}
	keys := room.Sessions
	if len(keys) == 0 {
		if keys, err = s.roomKeys(ctx, roomID); err != nil {
			return nil, nil, err
		}
	}
	var out []facts.Observation
	var spans []scoring.Span
	for _, k := range keys {
		if k == skip {
			continue
		}
		f, _, err := s.Get(ctx, k)
		if err != nil {
			return nil, nil, err
		}
		out = append(out, f.Observations...)
		spans, _ = facts.MergeSpans(spans, f.Spans)
	}
	return out, spans, nil
}

// Open creates or updates the session facts bucket. Entries live as
// long as the streams keep messages (nats.max_age).
func Open(ctx context.Context, js jetstream.JetStream, s wire.Subjects, n config.NATS, log *slog.Logger) (*Store, error) {
	var kv jetstream.KeyValue
	err := broker.RetrySetup(ctx, log, "session facts bucket", n.RequestTimeout, func(ctx context.Context) (err error) {
		kv, err = js.CreateOrUpdateKeyValue(ctx, jetstream.KeyValueConfig{
			Bucket: s.SessionFacts(), Description: "session facts from every signal (room_id.job_id)",
			TTL: n.MaxAge, Storage: broker.StorageType(n.Storage), Replicas: n.Replicas, History: 1,
		})
		return err
	})
	if err != nil {
		return nil, err
	}
	return New(kv, n.RequestTimeout, time.Now), nil
}
