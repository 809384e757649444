package forward

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/lkscore/lkscore/config"
	"github.com/lkscore/lkscore/consumer/internal/failure"
	"github.com/lkscore/lkscore/recording"
	"github.com/lkscore/lkscore/store"
	"github.com/lkscore/lkscore/wire"
)

// RelayStore is what a relay needs of the recording store: read the copy,
// delete it once relayed.
type RelayStore interface {
	recording.ObjectReader
	store.Lister
	store.Deleter
}

// Relay relays one target's copies: the handler of its stage, one durable
// consumer (wire.ForwardConsumer) shared by every worker replica.
type Relay struct {
	target config.ForwardTarget
	client *http.Client
	store  RelayStore
	maxAge time.Duration
	tmo    time.Duration
	m      Metrics
	log    *slog.Logger
	now    func() time.Time
}

// Relays builds a relay per forward target.
func Relays(cfg config.Forward, client *http.Client, st RelayStore, m Metrics, log *slog.Logger) []*Relay {
	var out []*Relay
	for _, t := range cfg.Targets {
		out = append(out, &Relay{target: t, client: client, store: st, maxAge: cfg.MaxAge, tmo: cfg.Timeout, m: m, log: log, now: time.Now})
	}
	return out
}

// ID is the relay's durable consumer name.
func (r *Relay) ID() string { return wire.ForwardConsumer(r.target.Name) }

// Name names the target.
func (r *Relay) Name() string { return r.target.Name }

// Handle relays one copy: POST to the target's URL with the request's path,
// body and headers as the SDK sent them. 2xx: the copy is deleted. A
// network error, 408, 429 or 5xx: retried with the pipeline's backoff. Any
// other 4xx will not change by itself: the notice is dead-lettered with the
// target's answer. A copy older than forward.max_age is dropped, counted.
func (r *Relay) Handle(ctx context.Context, m jetstream.Msg) error {
	var req Request
	if err := json.Unmarshal(m.Data(), &req); err != nil || req.Dir == "" || !strings.HasPrefix(req.Dir, Prefix) {
		return failure.Permanent(fmt.Errorf("forward notice is not valid: %v", err))
	}
	if age := r.now().Sub(req.ReceivedAt); age > r.maxAge {
		r.m.Relays.WithLabelValues(r.target.Name, "expired").Inc()
		r.log.Warn("forward: copy dropped, older than forward.max_age", "target", r.target.Name, "path", req.Path, "age", age.Round(time.Second))
		r.remove(ctx, req.Dir)
		return nil
	}
	body, err := r.store.Open(ctx, req.Dir+objectBody, req.Size+1)
	if errors.Is(err, recording.ErrNotFound) {
		// lkscore forget removed it, or a relay before this one relayed it
		// and lost its ack.
		r.m.Relays.WithLabelValues(r.target.Name, "gone").Inc()
		return nil
	}
	if err != nil {
		return fmt.Errorf("forward: read copy %s: %w", req.Dir, err)
	}
	defer body.Close()
	ctx, cancel := context.WithTimeout(ctx, r.tmo)
	defer cancel()
	url := strings.TrimSuffix(r.target.URL, "/") + req.Path
	if req.Query != "" {
		url += "?" + req.Query
	}
	hreq, err := http.NewRequestWithContext(ctx, http.MethodPost, url, body)
	if err != nil {
		return failure.Permanent(fmt.Errorf("forward to %s: %w", r.target.Name, err))
	}
	hreq.ContentLength = req.Size
	for k, v := range req.Header {
		hreq.Header.Set(k, v)
	}
	resp, err := r.client.Do(hreq)
	if err != nil {
		r.m.Relays.WithLabelValues(r.target.Name, "retry").Inc()
		return fmt.Errorf("forward to %s: %w", r.target.Name, err)
	}
	msg, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
	_ = resp.Body.Close()
	switch c := resp.StatusCode; {
	case c/100 == 2:
		r.m.Relays.WithLabelValues(r.target.Name, "relayed").Inc()
		r.remove(ctx, req.Dir)
		return nil
	case c == http.StatusRequestTimeout || c == http.StatusTooManyRequests || c >= 500:
		r.m.Relays.WithLabelValues(r.target.Name, "retry").Inc()
		return fmt.Errorf("forward to %s: %s answered %d", r.target.Name, req.Path, c)
	default:
		r.m.Relays.WithLabelValues(r.target.Name, "refused").Inc()
		r.remove(ctx, req.Dir)
		return failure.Permanent(fmt.Errorf("forward to %s: %s answered %d: %s", r.target.Name, req.Path, c, strings.TrimSpace(string(msg))))
	}
}

// remove deletes a copy; one left behind is removed by Sweep.
func (r *Relay) remove(ctx context.Context, dir string) {
	ctx = context.WithoutCancel(ctx)
	for _, o := range []string{objectBody, objectRequest} {
		if err := r.store.Delete(ctx, dir+o); err != nil {
			r.log.Warn("forward: copy not deleted; the sweep will", "dir", dir, "err", err)
			return
		}
	}
}

// Sweep deletes the copies older than maxAge (their notices expired with
// the stream's max age, or were never published). It returns how many it
// deleted.
func Sweep(ctx context.Context, st RelayStore, maxAge time.Duration, now time.Time) (int, error) {
	objs, err := st.List(ctx, Prefix)
	if err != nil {
		return 0, fmt.Errorf("forward sweep: %w", err)
	}
	n := 0
	for _, o := range objs {
		if now.Sub(o.Modified) <= maxAge {
			continue
		}
		if err := st.Delete(ctx, o.Key); err != nil {
			return n, fmt.Errorf("forward sweep: %w", err)
		}
		n++
	}
	return n, nil
}

// Forget deletes every copy that concerned sessionKey, and reports how
// many objects it deleted.
func Forget(ctx context.Context, st RelayStore, sessionKey string) (int, error) {
	objs, err := st.List(ctx, Prefix)
	if err != nil {
		return 0, fmt.Errorf("forward copies: %w", err)
	}
	n := 0
	for _, o := range objs {
		dir, ok := strings.CutSuffix(o.Key, objectRequest)
		if !ok {
			continue
		}
		rc, err := st.Open(ctx, o.Key, 1<<20)
		if err != nil {
			continue // gone since the listing
		}
		var req Request
		err = json.NewDecoder(rc).Decode(&req)
		_ = rc.Close()
		if err != nil || !containsKey(req.Sessions, sessionKey) {
			continue
		}
		for _, obj := range []string{objectBody, objectRequest} {
			if err := st.Delete(ctx, dir+obj); err != nil {
				return n, fmt.Errorf("forward copies: %w", err)
			}
			n++
		}
	}
	return n, nil
}

func containsKey(keys []string, k string) bool {
	for _, x := range keys {
		if x == k {
			return true
		}
	}
	return false
}
