package locate

import (
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/lkscore/lkscore/consumer/internal/failure"
	"github.com/lkscore/lkscore/consumer/internal/work"
)

// StoreCheck catches a misplaced store: an ingest process that stores
// uploads where this worker cannot read them (separate local data dirs, as a
// chart split into ingest and worker pods without S3 would have; another
// bucket). Upload notices carry the ingest's store identity; a notice from
// another store is dead-lettered at once with reason store_not_shared
// instead of waiting out recording_deadline, counted, logged as an error
// naming both stores, and shown on /readyz until a notice from this store
// arrives or storeMismatchShown passes. The dead letter replays once both
// processes share one store.
type StoreCheck struct {
	own    string // this process's store identity
	metric prometheus.Counter
	log    *slog.Logger
	now    func() time.Time

	mu    sync.Mutex
	other string // the last foreign store seen
	at    time.Time
}

// storeMismatchShown is how long /readyz reports the last mismatch.
const storeMismatchShown = 10 * time.Minute

// NewStoreCheck checks notices against own, this process's store identity,
// counting mismatches in metric.
func NewStoreCheck(own string, metric prometheus.Counter, log *slog.Logger, now func() time.Time) *StoreCheck {
	return &StoreCheck{own: own, metric: metric, log: log, now: now}
}

// check compares a notice's store with this process's.
func (c *StoreCheck) check(n *work.UploadNotice) error {
	if c == nil || n.Store == "" { // notices from before stores had identities
		return nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if n.Store == c.own {
		c.other = ""
		return nil
	}
	c.other, c.at = n.Store, c.now()
	c.metric.Inc()
	err := &failure.StoreNotSharedError{Ingest: n.Store, Worker: c.own}
	c.log.Error("recording store not shared: upload dead-lettered (store_not_shared); replay it with `lkscore dlq replay` once fixed",
		"session_key", n.SessionKey, "ingest_store", n.Store, "worker_store", c.own, "err", err)
	return err
}

// Status is the mismatch for /readyz, or "".
func (c *StoreCheck) Status() string {
	if c == nil {
		return ""
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.other == "" || c.now().Sub(c.at) > storeMismatchShown {
		return ""
	}
	return fmt.Sprintf("recording store not shared: ingest stored an upload in %s, this worker reads %s (set s3.bucket on both)", c.other, c.own)
}
