package stage

import (
	"context"
	"testing"
	"time"
)

// TestGatherSlots: a backlogged stage holding one free slot of 16 waits for
// more (up to half) instead of fetching for one; it stops waiting after
// gatherWait, and at once when it holds enough or has at most two slots.
func TestGatherSlots(t *testing.T) {
	ctx := context.Background()
	slots := make(chan struct{}, 16)
	for range 15 { // 15 busy, the caller holds the 16th
		slots <- struct{}{}
	}
	go func() { // seven handlers finish one after another
		for range 7 {
			<-slots
		}
	}()
	if n := gatherSlots(ctx, slots, 1, 16); n != 8 {
		t.Errorf("gathered %d slots, want 8 (half of 16)", n)
	}

	start := time.Now()
	if n := gatherSlots(ctx, make(chan struct{}), 1, 16); n != 1 {
		t.Errorf("no slot freed: %d, want 1", n)
	}
	if waited := time.Since(start); waited < gatherWait {
		t.Errorf("gave up after %v, want gatherWait (%v)", waited, gatherWait)
	}
	if n := gatherSlots(ctx, make(chan struct{}), 8, 16); n != 8 {
		t.Errorf("holding half already: %d, want 8 at once", n)
	}
	if n := gatherSlots(ctx, make(chan struct{}), 1, 1); n != 1 {
		t.Errorf("one slot in all: %d, want 1", n)
	}
}
