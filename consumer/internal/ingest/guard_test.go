package ingest

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"
)

// TestSlotsBoundTheWaiters: with every slot taken, up to maxWaitersPerSlot
// per slot wait their turn; the next is told at once that the endpoint is
// full, and a waiter gets the slot given back.
func TestSlotsBoundTheWaiters(t *testing.T) {
	s := newSlots(1)
	if !s.take() {
		t.Fatal("the free slot was not taken")
	}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	results := make(chan error, maxWaitersPerSlot)
	for range maxWaitersPerSlot {
		wg.Go(func() { results <- s.takeWithin(ctx, time.Minute, nil) })
	}
	for s.waiting.Load() < maxWaitersPerSlot {
		time.Sleep(time.Millisecond)
	}
	start := time.Now()
	if err := s.takeWithin(context.Background(), time.Minute, nil); !errors.Is(err, errBusy) || time.Since(start) > time.Second {
		t.Errorf("a waiter past the bound: %v after %s, want errBusy at once", err, time.Since(start))
	}
	s.give()
	if err := <-results; err != nil {
		t.Errorf("a waiter did not get the slot given back: %v", err)
	}
	cancel()
	wg.Wait()
	close(results)
	for err := range results {
		if !errors.Is(err, context.Canceled) {
			t.Errorf("a waiter whose client left: %v", err)
		}
	}
	if err := (newSlots(1)).takeWithin(context.Background(), 10*time.Millisecond, nil); err != nil {
		t.Errorf("a free slot: %v", err)
	}
	full := newSlots(1)
	full.take()
	if err := full.takeWithin(context.Background(), 10*time.Millisecond, nil); !errors.Is(err, errSlotWait) {
		t.Errorf("a wait that runs out: %v", err)
	}
}
