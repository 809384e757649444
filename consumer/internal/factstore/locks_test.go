package factstore

import (
	"testing"
	"time"
)

// TestKeyLocks: a key held holds up that key's next writer (for at most
// the wait: a write stuck until its timeout must not hold the others that
// long) and no other key's; nothing is kept once released.
func TestKeyLocks(t *testing.T) {
	l := &keyLocks{m: map[string]*keyLock{}}
	unlockA := l.lock("a", time.Minute)
	done := make(chan struct{})
	go func() { l.lock("b", time.Minute)(); close(done) }()
	select {
	case <-done:
	case <-time.After(time.Second):
		t.Fatal("key b waited for key a")
	}
	second := make(chan struct{})
	go func() { l.lock("a", time.Minute)(); close(second) }()
	select {
	case <-second:
		t.Fatal("a second writer of a got in while the first held it")
	case <-time.After(50 * time.Millisecond):
	}
	unlockA()
	<-second
	if len(l.m) != 0 {
		t.Fatalf("%d locks kept after release", len(l.m))
	}

	unlockA = l.lock("a", time.Minute)
	start := time.Now()
	l.lock("a", 20*time.Millisecond)() // gives up waiting, goes ahead
	if waited := time.Since(start); waited < 20*time.Millisecond || waited > time.Second {
		t.Errorf("waited %v for a held lock, want its 20ms bound", waited)
	}
	unlockA()
	l.lock("a", 0)() // free again: the one that gave up released nothing
	if len(l.m) != 0 {
		t.Fatalf("%d locks kept after release", len(l.m))
	}
}
