package consumer

import (
	"context"
	"errors"
	"testing"
	"time"
)

func TestPipelineStopWaitsForLoops(t *testing.T) {
	t.Parallel()
	bg, cancel := context.WithCancel(context.Background())
	p := &pipeline{cancel: func() {}, background: cancel}
	finished := make(chan struct{})
	p.goLoop(func() {
		<-bg.Done()
		time.Sleep(100 * time.Millisecond) // a round still publishing
		close(finished)
	})
	if err := p.stop(context.Background()); err != nil {
		t.Fatal(err)
	}
	select {
	case <-finished:
	default:
		t.Fatal("stop returned before the loop did")
	}

	// A loop that outlives the deadline is reported, not waited for forever.
	bg2, cancel2 := context.WithCancel(context.Background())
	p2 := &pipeline{cancel: func() {}, background: cancel2}
	release := make(chan struct{})
	defer close(release)
	p2.goLoop(func() { <-bg2.Done(); <-release })
	ctx, done := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer done()
	if err := p2.stop(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("stop = %v, want the deadline", err)
	}
}
