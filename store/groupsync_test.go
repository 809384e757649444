package store

import (
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// TestGroupSyncCoversEveryCaller: many uploads committing at once share a
// few syncs, and each caller returns only after a sync that began after
// its call (so what it wrote before calling is covered).
func TestGroupSyncCoversEveryCaller(t *testing.T) {
	var written atomic.Int64 // callers that have "written" and called wait
	var mu sync.Mutex
	var covered []int64 // per sync: how many callers had called when it began
	g := newGroupSync(func() error {
		n := written.Load()
		time.Sleep(2 * time.Millisecond) // a disk flush
		mu.Lock()
		covered = append(covered, n)
		mu.Unlock()
		return nil
	})
	const callers = 64
	var wg sync.WaitGroup
	bad := atomic.Int64{}
	for range callers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			me := written.Add(1)
			if err := g.wait(); err != nil {
				t.Error(err)
			}
			// The syncs that finished: one of them must have begun after me.
			mu.Lock()
			ok := false
			for _, n := range covered {
				if n >= me {
					ok = true
				}
			}
			mu.Unlock()
			if !ok {
				bad.Add(1)
			}
		}()
	}
	wg.Wait()
	if bad.Load() > 0 {
		t.Errorf("%d callers returned before a sync covered them", bad.Load())
	}
	if g.syncs >= callers/2 || g.syncs < 1 {
		t.Errorf("%d syncs for %d callers: not grouped", g.syncs, callers)
	}
	t.Logf("%d callers, %d syncs", callers, g.syncs)
}

// TestGroupSyncError: every caller covered by a failed sync gets its error;
// the next sync is tried afresh.
func TestGroupSyncError(t *testing.T) {
	fail := errors.New("disk gone")
	var calls atomic.Int64
	g := newGroupSync(func() error {
		if calls.Add(1) == 1 {
			return fail
		}
		return nil
	})
	if err := g.wait(); !errors.Is(err, fail) {
		t.Fatalf("first: %v", err)
	}
	if err := g.wait(); err != nil {
		t.Fatalf("second: %v", err)
	}
}

// TestLocalUploadGroupSync: an upload committed with group sync is whole
// in place, and both modes refuse an unknown mode name.
func TestLocalUploadGroupSync(t *testing.T) {
	if !haveSyncFS {
		t.Skip("no syncfs(2) here")
	}
	for _, mode := range []string{SyncGroup, SyncEach} {
		s, err := NewLocal(t.TempDir())
		if err != nil {
			t.Fatal(err)
		}
		if err := s.SetSync(mode); err != nil {
			t.Fatal(err)
		}
		var wg sync.WaitGroup
		for i := range 8 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				writeUpload(t, s, "RM_g/AJ_"+string(rune('a'+i))+"/")
			}()
		}
		wg.Wait()
		objs, err := s.List(t.Context(), "RM_g/")
		if err != nil || len(objs) != 16 {
			t.Fatalf("%s: %d objects, %v", mode, len(objs), err)
		}
		if mode == SyncGroup && (s.group.syncs < 2 || s.group.syncs > 16) {
			t.Errorf("8 uploads took %d syncs", s.group.syncs)
		}
	}
	s, _ := NewLocal(t.TempDir())
	if err := s.SetSync("sometimes"); err == nil {
		t.Error("an unknown sync mode was accepted")
	}
}

// writeUpload stores a header and a chat history under dir and commits.
func writeUpload(t *testing.T, s *Local, dir string) {
	t.Helper()
	up, err := s.Begin(t.Context(), dir)
	if err != nil {
		t.Error(err)
		return
	}
	for _, name := range []string{"chat_history.json", "header.binpb"} {
		if _, err := up.Write(t.Context(), name, strings.NewReader("{}"), 1<<20); err != nil {
			t.Error(err)
			return
		}
	}
	if err := up.Commit(t.Context()); err != nil {
		t.Error(err)
	}
}
