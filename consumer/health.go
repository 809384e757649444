package consumer

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/lkscore/lkscore/store"
)

// health tracks the pipeline's dependencies. A stage takes work only while
// NATS is connected and the store is up: during an outage messages stay in
// their stream (nothing cycles through retries and delivery counts), and
// work resumes within one probe interval of the dependency's return.
type health struct {
	nc       *nats.Conn
	probe    func(ctx context.Context) error // nil: the store is always up
	interval time.Duration
	up       *prometheus.GaugeVec // dependency
	log      *slog.Logger

	mu        sync.Mutex
	storeErr  error         // non-nil while the store is down
	storeBack chan struct{} // closed when the store comes back
	probing   bool
	wg        sync.WaitGroup
}

func newHealth(nc *nats.Conn, probe func(context.Context) error, interval time.Duration, up *prometheus.GaugeVec, log *slog.Logger) *health {
	h := &health{nc: nc, probe: probe, interval: interval, up: up, log: log}
	up.WithLabelValues("store").Set(1)
	up.WithLabelValues("nats").Set(1)
	return h
}

// storeDown records that the store failed with a transient error and
// starts probing it until it answers again (ctx ends the probing).
func (h *health) storeDown(ctx context.Context, err error) {
	if h.probe == nil {
		return
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.storeErr == nil {
		h.storeErr = err
		h.storeBack = make(chan struct{})
		h.up.WithLabelValues("store").Set(0)
		h.log.Warn("recording store unavailable: pausing the pipeline until it answers", "err", err)
	}
	if h.probing {
		return
	}
	h.probing = true
	h.wg.Add(1)
	go h.probeUntilUp(ctx)
}

func (h *health) probeUntilUp(ctx context.Context) {
	defer h.wg.Done()
	t := time.NewTicker(h.interval)
	defer t.Stop()
	down := time.Now()
	for {
		select {
		case <-ctx.Done():
			h.mu.Lock()
			h.probing = false
			h.mu.Unlock()
			return
		case <-t.C:
		}
		pctx, cancel := context.WithTimeout(ctx, h.interval)
		err := h.probe(pctx)
		cancel()
		if err != nil && !errors.Is(err, store.ErrNotFound) {
			continue
		}
		h.mu.Lock()
		h.storeErr, h.probing = nil, false
		close(h.storeBack)
		h.mu.Unlock()
		h.up.WithLabelValues("store").Set(1)
		h.log.Info("recording store is back: resuming the pipeline", "down_for", time.Since(down).Round(time.Millisecond).String())
		return
	}
}

// wait blocks until NATS is connected and the store is up, or ctx ends.
func (h *health) wait(ctx context.Context) error {
	for {
		h.mu.Lock()
		back := h.storeBack
		down := h.storeErr != nil
		h.mu.Unlock()
		if down {
			select {
			case <-back:
				continue
			case <-ctx.Done():
				return ctx.Err()
			}
		}
		if h.nc == nil || h.nc.IsConnected() {
			h.up.WithLabelValues("nats").Set(1)
			return nil
		}
		h.up.WithLabelValues("nats").Set(0)
		select {
		case <-time.After(min(h.interval, 100*time.Millisecond)):
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// status says what is down, or "" when all is up.
func (h *health) status() string {
	if h.nc != nil && !h.nc.IsConnected() {
		return "nats not connected"
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.storeErr != nil {
		return "recording store unavailable"
	}
	return ""
}

// stop waits for the prober after its context ended.
func (h *health) stop() { h.wg.Wait() }
