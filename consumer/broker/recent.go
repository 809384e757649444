package broker

import (
	"sync"
	"time"
)

// Recent remembers the entries a process last wrote or read in a bucket
// (the bytes and their revision), so that a compare-and-set can start from
// them instead of reading the entry again: KV.Modify writes on the
// remembered revision and reads only when the write loses (another writer
// moved the entry on). It saves the read of every entry the process itself
// wrote last — most of them where one process handles a session's signals.
//
// Remembered entries are trusted for a no-op too (the change finds nothing
// to write), for at most ttl: KV.Modify is used for merges where what was
// once in an entry stays in it until the entry is deleted, and an entry
// deleted within ttl of its write (forget, retention) only leaves a change
// unwritten that would have re-created data just deleted.
type Recent struct {
	mu   sync.Mutex
	ttl  time.Duration
	now  func() time.Time
	m    map[string]recentEntry
	ring []string // keys in insertion order, for eviction
	next int
}

type recentEntry struct {
	data []byte
	rev  uint64
	at   time.Time
}

// NewRecent remembers up to size entries, each for ttl.
func NewRecent(size int, ttl time.Duration) *Recent {
	return &Recent{ttl: ttl, now: time.Now, m: make(map[string]recentEntry, size), ring: make([]string, max(size, 1))}
}

// get returns key's remembered bytes and revision, unless older than ttl.
func (r *Recent) get(key string) ([]byte, uint64, bool) {
	if r == nil {
		return nil, 0, false
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	e, ok := r.m[key]
	if !ok || r.now().Sub(e.at) > r.ttl {
		return nil, 0, false
	}
	return e.data, e.rev, true
}

// Remember records key at rev (data is kept, not copied: the caller must
// not modify it). An older revision than the one remembered is ignored.
func (r *Recent) Remember(key string, rev uint64, data []byte) {
	if r == nil {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if e, ok := r.m[key]; ok {
		if e.rev <= rev {
			r.m[key] = recentEntry{data: data, rev: rev, at: r.now()}
		}
		return
	}
	if old := r.ring[r.next]; old != "" {
		delete(r.m, old)
	}
	r.ring[r.next] = key
	r.next = (r.next + 1) % len(r.ring)
	r.m[key] = recentEntry{data: data, rev: rev, at: r.now()}
}

// Forget drops key (deleted, or lost a compare-and-set).
func (r *Recent) Forget(key string) {
	if r == nil {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.m, key)
}

// Has reports whether key is remembered (and not older than ttl).
func (r *Recent) Has(key string) bool {
	_, _, ok := r.get(key)
	return ok
}
