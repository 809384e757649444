package dashboard

import (
	"context"
	"encoding/json"
	"log/slog"
	"sort"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/lkscore/lkscore/wire"
)

// AlertIndex holds the last alerts of the alerts stream: what fires now
// (an episode whose last message is firing) and what resolved lately.
type AlertIndex struct {
	window    int
	caughtUp  chan struct{}
	closeOnce sync.Once

	mu     sync.RWMutex
	seq    uint64                // the last message read
	latest map[string]AlertEntry // by episode id: its last state
}

// AlertEntry is an alert's last state, with the stream time it was published.
type AlertEntry struct {
	wire.Alert
	Seq uint64
	// Held is how long it fired (resolved), or fires so far.
	Held time.Duration
}

// NewAlertIndex keeps the episodes of the last window alert messages.
func NewAlertIndex(window int) *AlertIndex {
	return &AlertIndex{window: window, latest: map[string]AlertEntry{}, caughtUp: make(chan struct{})}
}

// CaughtUp is closed once the index read what the stream held.
func (a *AlertIndex) CaughtUp() <-chan struct{} { return a.caughtUp }

// Follow fills the index from the alerts stream until ctx ends.
func (a *AlertIndex) Follow(ctx context.Context, js jetstream.JetStream, stream string, log *slog.Logger) {
	for ctx.Err() == nil {
		start := func(first, last uint64) uint64 {
			a.mu.RLock()
			defer a.mu.RUnlock()
			return startSeq(first, last, a.window, a.seq)
		}
		err := tail(ctx, js, stream, start, a.add, func() { a.closeOnce.Do(func() { close(a.caughtUp) }) })
		if err != nil && ctx.Err() == nil {
			log.Warn("dashboard: following the alerts stream", "err", err)
			select {
			case <-ctx.Done():
			case <-time.After(time.Second):
			}
		}
	}
}

func (a *AlertIndex) add(seq uint64, _ time.Time, data []byte) {
	var al wire.Alert
	if err := json.Unmarshal(data, &al); err != nil || al.ID == "" {
		return
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if seq <= a.seq {
		return
	}
	a.seq = seq
	a.latest[al.ID] = AlertEntry{Alert: al, Seq: seq}
	if len(a.latest) > 2*a.window { // forget the oldest resolved episodes
		var resolved []AlertEntry
		for _, e := range a.latest {
			if e.Status == wire.AlertResolved {
				resolved = append(resolved, e)
			}
		}
		sort.Slice(resolved, func(i, j int) bool { return resolved[i].Seq < resolved[j].Seq })
		for _, e := range resolved[:max(0, len(a.latest)-a.window)] {
			delete(a.latest, e.ID)
		}
	}
}

// Alerts returns the firing alerts (longest firing first) and the resolved
// ones (latest first, at most n), of agent when it is not empty.
func (a *AlertIndex) Alerts(agent string, n int, now time.Time) (firing, resolved []AlertEntry) {
	a.mu.RLock()
	defer a.mu.RUnlock()
	for _, e := range a.latest {
		if agent != "" && e.Agent != agent {
			continue
		}
		if e.Status == wire.AlertFiring {
			e.Held = now.Sub(e.Since)
			firing = append(firing, e)
		} else {
			e.Held = e.At.Sub(e.Since)
			resolved = append(resolved, e)
		}
	}
	sort.Slice(firing, func(i, j int) bool { return firing[i].Seq < firing[j].Seq })
	sort.Slice(resolved, func(i, j int) bool { return resolved[i].Seq > resolved[j].Seq })
	return firing, resolved[:min(n, len(resolved))]
}
