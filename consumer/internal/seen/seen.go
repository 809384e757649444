// Package seen keeps what ingest saw, for "is my webhook arriving?": per
// endpoint and API key the last request accepted and how many, per
// endpoint and reason the requests refused, the last time and the key they
// named. Every process keeps its own; the dashboard's ingestion view asks
// them all over NATS (Serve, Gather) and merges the answers, and /metrics
// has the same figures per process.
//
// It owns the ingestion request subject's question and answer (wire's
// IngestionReport); it imports nothing of lkscore but wire, so that ingest,
// the settler and the dashboard can all use it.
package seen

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/lkscore/lkscore/wire"
)

// maxRows bounds the rows kept: accepted keys are verified (the configured
// set), but a refused request's key is the client's unverified claim.
const maxRows = 256

// otherKey stands for the keys past maxRows.
const otherKey = "(other)"

// Tracker counts what one process's ingest accepted and refused.
type Tracker struct {
	now     func() time.Time
	since   time.Time
	last    *prometheus.GaugeVec   // lkscore_ingest_last_accepted_timestamp_seconds{endpoint,api_key}
	refused *prometheus.CounterVec // lkscore_ingest_refused_total{endpoint,reason}

	mu       sync.Mutex
	accepted map[[2]string]*wire.IngestAccepted
	refusals map[[2]string]*wire.IngestRefused
	waiting  func() ([]wire.IngestWaiting, int) // the settler's, when this process runs one
}

// NewTracker counts from now on and registers its metrics with reg (nil: none).
func NewTracker(reg prometheus.Registerer, now func() time.Time) *Tracker {
	if now == nil {
		now = time.Now
	}
	t := &Tracker{now: now, since: now(), accepted: map[[2]string]*wire.IngestAccepted{}, refusals: map[[2]string]*wire.IngestRefused{},
		last: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "lkscore_ingest_last_accepted_timestamp_seconds",
			Help: "When this process last accepted a request, per endpoint and the API key that signed it (Unix seconds)."},
			[]string{"endpoint", "api_key"}),
		refused: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "lkscore_ingest_refused_total",
			Help: "Requests refused before anything was stored, per endpoint and reason (no_token, bad_token, unknown_key, " +
				"bad_signature, bad_checksum, no_grant, bad_upload, unknown_path)."},
			[]string{"endpoint", "reason"}),
	}
	if reg != nil {
		reg.MustRegister(t.last, t.refused)
	}
	return t
}

// Accept counts one accepted request of endpoint signed by apiKey.
func (t *Tracker) Accept(endpoint, apiKey string) {
	if t == nil {
		return
	}
	now := t.now()
	t.mu.Lock()
	k := [2]string{endpoint, apiKey}
	a := t.accepted[k]
	if a == nil {
		if len(t.accepted) >= maxRows {
			k[1] = otherKey
			if a = t.accepted[k]; a == nil {
				a = &wire.IngestAccepted{Endpoint: endpoint, APIKey: otherKey}
				t.accepted[k] = a
			}
		} else {
			a = &wire.IngestAccepted{Endpoint: endpoint, APIKey: apiKey}
			t.accepted[k] = a
		}
	}
	a.Count++
	a.Last = now
	label := a.APIKey
	t.mu.Unlock()
	t.last.WithLabelValues(endpoint, label).Set(float64(now.UnixNano()) / 1e9)
}

// Refuse counts one request of endpoint refused for reason; apiKey is the
// key it named, if any (unverified: bounded by the caller).
func (t *Tracker) Refuse(endpoint, reason, apiKey string) {
	if t == nil {
		return
	}
	now := t.now()
	t.mu.Lock()
	k := [2]string{endpoint, reason}
	r := t.refusals[k]
	if r == nil && len(t.refusals) < maxRows { // endpoints × reasons: a closed set
		r = &wire.IngestRefused{Endpoint: endpoint, Reason: reason}
		t.refusals[k] = r
	}
	if r != nil {
		r.Count++
		r.Last, r.LastKey = now, apiKey
	}
	t.mu.Unlock()
	t.refused.WithLabelValues(endpoint, reason).Inc()
}

// WatchWaiting makes reports include the sessions waiting for a recording,
// as waiting lists them (the oldest first, at most maxWaiting, and how many).
func (t *Tracker) WatchWaiting(waiting func() ([]wire.IngestWaiting, int)) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.waiting = waiting
}

// maxWaiting bounds the waiting sessions a report names.
const maxWaiting = 20

// Report is what this process saw, rows in a stable order.
func (t *Tracker) Report(process, roles string) wire.IngestionReport {
	rep := wire.IngestionReport{Process: process, Roles: roles, Since: t.since}
	t.mu.Lock()
	for _, a := range t.accepted {
		rep.Accepted = append(rep.Accepted, *a)
	}
	for _, r := range t.refusals {
		rep.Refused = append(rep.Refused, *r)
	}
	waiting := t.waiting
	t.mu.Unlock()
	if waiting != nil {
		rep.Waiting, rep.WaitingTotal = waiting()
	}
	sort.Slice(rep.Accepted, func(i, j int) bool {
		a, b := rep.Accepted[i], rep.Accepted[j]
		return a.Endpoint < b.Endpoint || a.Endpoint == b.Endpoint && a.APIKey < b.APIKey
	})
	sort.Slice(rep.Refused, func(i, j int) bool {
		a, b := rep.Refused[i], rep.Refused[j]
		return a.Endpoint < b.Endpoint || a.Endpoint == b.Endpoint && a.Reason < b.Reason
	})
	return rep
}

// Oldest is the n oldest of waiting (by Since, then key) and how many there are.
func Oldest(waiting map[string]time.Time, n int) ([]wire.IngestWaiting, int) {
	out := make([]wire.IngestWaiting, 0, len(waiting))
	for k, at := range waiting {
		out = append(out, wire.IngestWaiting{Key: k, Since: at})
	}
	sort.Slice(out, func(i, j int) bool {
		return out[i].Since.Before(out[j].Since) || out[i].Since.Equal(out[j].Since) && out[i].Key < out[j].Key
	})
	return out[:min(n, len(out))], len(out)
}

// conn is what Serve and Gather need of a NATS connection.
type conn interface {
	Subscribe(subj string, cb nats.MsgHandler) (*nats.Subscription, error)
	SubscribeSync(subj string) (*nats.Subscription, error)
	PublishRequest(subj, reply string, data []byte) error
	NewRespInbox() string
}

// Serve answers every ingestion request on subject with report's JSON,
// until the subscription is unsubscribed.
func Serve(nc conn, subject string, report func() wire.IngestionReport) (*nats.Subscription, error) {
	sub, err := nc.Subscribe(subject, func(m *nats.Msg) {
		b, err := json.Marshal(report())
		if err == nil {
			_ = m.Respond(b)
		}
	})
	if err != nil {
		return nil, fmt.Errorf("ingestion reports: subscribe %s: %w", subject, err)
	}
	return sub, nil
}

// Gather asks every process on subject for its report and collects the
// answers that come within wait (or until ctx ends), at most maxReports.
func Gather(ctx context.Context, nc conn, subject string, wait time.Duration) ([]wire.IngestionReport, error) {
	inbox := nc.NewRespInbox()
	sub, err := nc.SubscribeSync(inbox)
	if err != nil {
		return nil, fmt.Errorf("ingestion reports: %w", err)
	}
	defer func() { _ = sub.Unsubscribe() }()
	if err := nc.PublishRequest(subject, inbox, nil); err != nil {
		return nil, fmt.Errorf("ingestion reports: ask %s: %w", subject, err)
	}
	ctx, cancel := context.WithTimeout(ctx, wait)
	defer cancel()
	var out []wire.IngestionReport
	for len(out) < maxReports {
		m, err := sub.NextMsgWithContext(ctx)
		if err != nil {
			break // the wait is over
		}
		var r wire.IngestionReport
		if json.Unmarshal(m.Data, &r) == nil {
			out = append(out, r)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Process < out[j].Process })
	return out, nil
}

// maxReports bounds the reports one view collects.
const maxReports = 256
