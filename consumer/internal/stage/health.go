package stage

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/lkscore/lkscore/consumer/broker"
	"github.com/lkscore/lkscore/internal/retrylog"
	"github.com/lkscore/lkscore/store"
)

// Health tracks the pipeline's dependencies. A stage takes work only while
// NATS is connected and the store is up: during an outage messages stay in
// their stream (nothing cycles through retries and delivery counts), and
// work resumes within one probe interval of the dependency's return. The
// store is probed every upEvery while up (so /readyz notices an outage
// before any work meets it) and every interval while down.
type Health struct {
	nc       *nats.Conn
	probe    func(ctx context.Context) error // nil: the store is always up
	interval time.Duration
	upEvery  time.Duration
	// probeTimeout bounds one probe (config s3.request_timeout; the local
	// store answers at once).
	probeTimeout time.Duration
	up           *prometheus.GaugeVec // dependency
	log          *slog.Logger
	retries      *retrylog.Log // the store's outage: first failure, a summary a minute, recovery

	mu        sync.Mutex
	storeErr  error         // non-nil while the store is down
	storeBack chan struct{} // closed when the store comes back
	wake      chan struct{}
}

// storeTarget names the recording store in the retry log.
const storeTarget = "recording store"

// HealthOptions are what Health needs.
type HealthOptions struct {
	Conn  *nats.Conn                      // nil: NATS is not watched
	Probe func(ctx context.Context) error // reads the store once; nil: the store is always up
	// Interval is the probe interval while the store is down
	// (pipeline.health_interval); ProbeTimeout bounds one probe
	// (s3.request_timeout).
	Interval, ProbeTimeout time.Duration
	Up                     *prometheus.GaugeVec // lkscore_dependency_up
	Log                    *slog.Logger
}

// NewHealth watches the dependencies as o says.
func NewHealth(o HealthOptions) (*Health, error) {
	if err := broker.Require("health", map[string]bool{"metrics": o.Up == nil, "log": o.Log == nil}); err != nil {
		return nil, err
	}
	if o.Probe != nil && (o.Interval <= 0 || o.ProbeTimeout <= 0) {
		return nil, errors.New("health: pipeline.health_interval and the probe timeout must be positive")
	}
	up := o.Up
	h := &Health{nc: o.Conn, probe: o.Probe, interval: o.Interval, probeTimeout: o.ProbeTimeout, upEvery: max(5*time.Second, o.Interval),
		up: up, log: o.Log, wake: make(chan struct{}, 1), retries: retrylog.New(o.Log, nil, 0)}
	up.WithLabelValues("store").Set(1)
	up.WithLabelValues("nats").Set(1)
	return h, nil
}

// Run probes the store until ctx ends.
func (h *Health) Run(ctx context.Context) {
	if h.probe == nil {
		return
	}
	for {
		h.mu.Lock()
		wait := h.upEvery
		if h.storeErr != nil {
			wait = h.interval
		}
		h.mu.Unlock()
		select {
		case <-ctx.Done():
			return
		case <-time.After(wait):
		case <-h.wake:
			continue // just marked down: probe on the short interval
		}
		pctx, cancel := context.WithTimeout(ctx, h.probeTimeout)
		err := h.probe(pctx)
		cancel()
		if ctx.Err() != nil {
			return
		}
		switch {
		case err == nil, errors.Is(err, store.ErrNotFound), errors.Is(err, store.ErrPermanent):
			h.storeUp() // reachable: a denied probe is a configuration problem, not an outage
		default:
			h.StoreDown(err)
		}
	}
}

// StoreDown records that the store failed with a transient error.
func (h *Health) StoreDown(err error) {
	if h.probe == nil {
		return
	}
	// Every failed probe and every stage's store error is a try: the first
	// is logged, then a summary a minute, then the recovery (storeUp).
	h.retries.Failed(storeTarget, "recording store unavailable: pausing the pipeline until it answers", err)
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.storeErr != nil {
		return
	}
	h.storeErr, h.storeBack = err, make(chan struct{})
	h.up.WithLabelValues("store").Set(0)
	select {
	case h.wake <- struct{}{}:
	default:
	}
}

func (h *Health) storeUp() {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.storeErr == nil {
		return
	}
	h.storeErr = nil
	close(h.storeBack)
	h.up.WithLabelValues("store").Set(1)
	h.retries.OK(storeTarget, "recording store is back: resuming the pipeline")
}

// Wait blocks until NATS is connected and the store is up, or ctx ends.
func (h *Health) Wait(ctx context.Context) error {
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

// Status says what is down, or "" when all is up.
func (h *Health) Status() string {
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

// Interval is how often a down store is probed.
func (h *Health) Interval() time.Duration { return h.interval }
