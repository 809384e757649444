package spool

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lkscore/lkscore/consumer/internal/facts"
	"github.com/lkscore/lkscore/store"
)

type sink struct {
	mu   sync.Mutex // Run adds from its own goroutine
	got  []facts.Update
	fail error
}

func (s *sink) Add(_ context.Context, u facts.Update) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.fail != nil {
		return s.fail
	}
	s.got = append(s.got, u)
	return nil
}

func (s *sink) count() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.got)
}

// TestPutThenDrain: facts spooled in a local store come back in order,
// each entry once, and leave the store; while the sink fails (NATS still
// away) the entry stays; an entry that does not decode is left for a person
// and does not block the others.
func TestPutThenDrain(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	root := t.TempDir()
	st, err := store.NewLocal(root)
	if err != nil {
		t.Fatal(err)
	}
	k := &sink{}
	sp, err := New(Options{Store: st, Sink: k, Connected: func() bool { return true }, Log: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	first := []facts.Update{{RoomID: "RM_a", JobID: "AJ_a", Observations: []facts.Observation{{Field: facts.FieldSDKVersion, Value: "1.9.0", Source: facts.SourceOTLP}}}}
	second := []facts.Update{{RoomID: "RM_b", JobID: "AJ_b", JobEnded: true}, {RoomID: "RM_c"}}
	if err := sp.Put(ctx, "logs", first); err != nil {
		t.Fatal(err)
	}
	if err := sp.Put(ctx, "traces", second); err != nil {
		t.Fatal(err)
	}
	// A damaged entry, as a crash mid-write cannot leave (commits are
	// atomic) but a disk can.
	bad := filepath.Join(root, "lkscore-spool", "logs", "0000000000000000000-bad")
	if err := os.MkdirAll(bad, 0o750); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(bad, object), []byte("{not json"), 0o640); err != nil {
		t.Fatal(err)
	}

	k.fail = errors.New("nats: timeout")
	if n, err := sp.Drain(ctx); err == nil || n != 0 {
		t.Fatalf("drain with the sink failing: %d, %v", n, err)
	}
	k.fail = nil
	n, err := sp.Drain(ctx)
	if err != nil || n != 2 {
		t.Fatalf("drain: %d entries, %v; want 2", n, err)
	}
	if len(k.got) != 3 || k.got[0].RoomID != "RM_a" || k.got[0].Observations[0].Value != "1.9.0" || !k.got[1].JobEnded || k.got[2].RoomID != "RM_c" {
		t.Fatalf("drained %+v", k.got)
	}
	if n, err := sp.Drain(ctx); err != nil || n != 0 {
		t.Fatalf("a second drain added %d (%v): entries must leave the store", n, err)
	}
	left, err := st.List(ctx, Prefix)
	if err != nil || len(left) != 1 {
		t.Fatalf("left in the store: %+v (%v); want only the damaged entry", left, err)
	}
}

type countingStore struct {
	Store
	lists atomic.Int32
}

func (c *countingStore) List(ctx context.Context, prefix string) ([]store.ObjectInfo, error) {
	c.lists.Add(1)
	return c.Store.List(ctx, prefix)
}

// TestRunListsOnlyWhenItMust: Run lists the store once at start, then
// only after a Put (not every interval), and Put refuses past MaxBytes
// until a drain frees them.
func TestRunListsOnlyWhenItMust(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	local, err := store.NewLocal(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	st := &countingStore{Store: local}
	k := &sink{}
	sp, err := New(Options{Store: st, Sink: k, Connected: func() bool { return true }, Interval: 5 * time.Millisecond, MaxBytes: 300,
		Log: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	big := []facts.Update{{RoomID: strings.Repeat("r", 200)}}
	if err := sp.Put(ctx, "logs", big); err != nil {
		t.Fatal(err)
	}
	if err := sp.Put(ctx, "logs", big); err == nil {
		t.Fatal("a Put past MaxBytes was kept")
	}
	done := make(chan struct{})
	go func() { defer close(done); sp.Run(ctx) }()
	time.Sleep(200 * time.Millisecond)
	if n := st.lists.Load(); n != 1 || k.count() != 1 {
		t.Fatalf("%d listings and %d drained in 200 ms with one entry: want 1 and 1", n, k.count())
	}
	if err := sp.Put(ctx, "logs", big); err != nil {
		t.Fatalf("the drain did not free the bytes: %v", err)
	}
	time.Sleep(100 * time.Millisecond)
	cancel()
	<-done
	if n := st.lists.Load(); n != 2 || k.count() != 2 {
		t.Errorf("after a second Put: %d listings, %d drained; want 2 and 2", n, k.count())
	}
}
