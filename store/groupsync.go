package store

import "sync"

// groupSync makes local uploads durable together: every upload that asks
// for a sync while none runs, or while one runs, is covered by the next
// single sync (syncfs of the store's file system) instead of its own
// fsyncs. The caller that finds no sync running runs it for everyone
// waiting; the others wait for it. No goroutine of its own.
type groupSync struct {
	sync func() error

	mu      sync.Mutex
	cond    *sync.Cond
	running bool
	pending *syncBatch // the batch the next sync covers
	syncs   int64      // syncs run, for tests
}

type syncBatch struct {
	done bool
	err  error
}

func newGroupSync(f func() error) *groupSync {
	g := &groupSync{sync: f}
	g.cond = sync.NewCond(&g.mu)
	return g
}

// wait returns once a sync that started after the call has finished, with
// its error: everything written before the call is then durable.
func (g *groupSync) wait() error {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.pending == nil {
		g.pending = &syncBatch{}
	}
	b := g.pending
	for !b.done {
		if g.running {
			g.cond.Wait()
			continue
		}
		// Lead: this sync covers the pending batch; later callers join the next.
		g.running, g.pending = true, nil
		g.mu.Unlock()
		err := g.sync()
		g.mu.Lock()
		b.err, b.done = err, true
		g.running = false
		g.syncs++
		g.cond.Broadcast()
	}
	return b.err
}
