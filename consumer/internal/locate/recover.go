package locate

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"sort"
	"time"

	"github.com/livekit/protocol/livekit"
	lksdk "github.com/livekit/server-sdk-go/v2"

	"github.com/lkscore/lkscore/config"
	"github.com/lkscore/lkscore/consumer/broker"
	"github.com/lkscore/lkscore/consumer/internal/failure"
	"github.com/lkscore/lkscore/internal/retrylog"
	"github.com/lkscore/lkscore/recording"
)

// LiveKit's notifier drops webhooks under load (docs/formats.md, "Webhooks"). Two loops
// recover what it dropped, both feeding the locator's usual path, so the
// session stream's dedup (session key) absorbs anything already announced,
// and both bounded in rate.

// Sweeper lists the recording store for sessions never announced.
type Sweeper struct {
	loc      *Locator
	interval time.Duration
	rate     int
	// window bounds how old a session may be: older ones may already have
	// left the session stream's dedup window and would be scored twice.
	window time.Duration
	log    *slog.Logger
}

// periodically runs round every interval until ctx ends, counting and
// logging each round; kind names it (sweep, reconcile).
func periodically(ctx context.Context, interval time.Duration, kind string, l *Locator, round func(context.Context) (int, error)) {
	t := time.NewTicker(interval)
	defer t.Stop()
	retries := retrylog.New(l.Log, l.Now, 0)
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		n, err := round(ctx)
		if err != nil && !errors.Is(err, context.Canceled) {
			retries.Failed(kind, kind+" failed", err)
			continue
		}
		retries.OK(kind, kind+" works again")
		l.metrics.RecoveryRuns.WithLabelValues(kind).Inc()
		l.Log.Info(kind+" done", "submitted", n)
	}
}

func (s *Sweeper) Run(ctx context.Context) { periodically(ctx, s.interval, "sweep", s.loc, s.sweep) }

// sweep submits every recent session in the store once; it returns how many.
func (s *Sweeper) sweep(ctx context.Context) (int, error) {
	objs, err := s.loc.store.List(ctx, s.loc.layout.RoomPrefix(recording.Vars{}))
	if err != nil {
		return 0, err
	}
	cutoff := s.loc.Now().Add(-s.window)
	limiter := time.NewTicker(time.Second / time.Duration(s.rate))
	defer limiter.Stop()
	n := 0
	for _, o := range objs {
		if _, ok := s.loc.layout.Match(o.Key); !ok || o.Modified.Before(cutoff) {
			continue
		}
		select {
		case <-ctx.Done():
			return n, ctx.Err()
		case <-limiter.C:
		}
		n++
		err := s.loc.record(ctx, located{dir: recording.SessionDir(o.Key), origin: "sweep"})
		if err != nil && !errors.Is(err, failure.ErrNotYet) {
			s.log.Warn("sweep: session not submitted", "dir", recording.SessionDir(o.Key), "err", err)
		}
	}
	return n, nil
}

// RecoveryOptions are what the sweeper and the reconciler need: the
// locator they feed and the config sections they use.
type RecoveryOptions struct {
	Locator  *Locator
	Pipeline config.Pipeline // sweep_interval, sweep_rate, dedup_window; livekit_* for the reconciler
	LiveKit  config.LiveKit  // the reconciler's API key and secret (livekit.keys)
}

func (o RecoveryOptions) check(part string) error {
	if err := broker.Require(part, map[string]bool{"locator": o.Locator == nil}); err != nil {
		return err
	}
	if o.Pipeline.SweepRate <= 0 {
		return fmt.Errorf("%s: pipeline.sweep_rate must be positive", part)
	}
	return nil
}

// NewSweeper sweeps the store for o.Locator every pipeline.sweep_interval.
func NewSweeper(o RecoveryOptions) (*Sweeper, error) {
	if err := o.check("sweeper"); err != nil {
		return nil, err
	}
	if o.Pipeline.SweepInterval <= 0 {
		return nil, errors.New("sweeper: pipeline.sweep_interval must be positive")
	}
	pc := o.Pipeline
	return &Sweeper{loc: o.Locator, interval: pc.SweepInterval, rate: pc.SweepRate, window: pc.DedupWindow, log: o.Locator.Log}, nil
}

// egressLister is the LiveKit API the reconciler needs (lksdk.EgressClient).
type egressLister interface {
	ListEgress(ctx context.Context, req *livekit.ListEgressRequest) (*livekit.ListEgressResponse, error)
}

// Reconciler asks LiveKit for ended egresses and handles each like an
// egress_ended webhook, in case that webhook never arrived.
type Reconciler struct {
	loc      *Locator
	client   egressLister
	interval time.Duration
	timeout  time.Duration // one ListEgress call
	rate     int
	window   time.Duration
	log      *slog.Logger
}

// NewReconciler asks the LiveKit API at pipeline.livekit_url for
// o.Locator every pipeline.reconcile_interval, with pipeline.livekit_api_key
// (by default the first of livekit.keys, sorted) and its secret.
func NewReconciler(o RecoveryOptions) (*Reconciler, error) {
	if err := o.check("reconciler"); err != nil {
		return nil, err
	}
	pc := o.Pipeline
	key := pc.LiveKitAPIKey
	if key == "" {
		key = firstKey(o.LiveKit.Keys)
	}
	switch {
	case pc.LiveKitURL == "":
		return nil, errors.New("reconciler: pipeline.livekit_url is required")
	case o.LiveKit.Keys[key] == "":
		return nil, fmt.Errorf("reconciler: no secret for API key %q in livekit.keys", key)
	case pc.ReconcileInterval <= 0:
		return nil, errors.New("reconciler: pipeline.reconcile_interval must be positive")
	}
	return &Reconciler{loc: o.Locator, client: lksdk.NewEgressClient(pc.LiveKitURL, key, o.LiveKit.Keys[key]),
		interval: pc.ReconcileInterval, timeout: pc.LiveKitTimeout, rate: pc.SweepRate, window: pc.DedupWindow, log: o.Locator.Log}, nil
}

func firstKey(keys map[string]string) string {
	ks := slices.Sorted(maps.Keys(keys))
	if len(ks) == 0 {
		return ""
	}
	return ks[0]
}

func (r *Reconciler) Run(ctx context.Context) {
	periodically(ctx, r.interval, "reconcile", r.loc, r.reconcile)
}

// ended are the terminal egress states.
var ended = map[livekit.EgressStatus]bool{livekit.EgressStatus_EGRESS_COMPLETE: true, livekit.EgressStatus_EGRESS_FAILED: true,
	livekit.EgressStatus_EGRESS_ABORTED: true, livekit.EgressStatus_EGRESS_LIMIT_REACHED: true}

// reconcile handles every egress that ended within the window; it returns how many.
func (r *Reconciler) reconcile(ctx context.Context) (int, error) {
	lctx, cancel := context.WithTimeout(ctx, r.timeout)
	resp, err := r.client.ListEgress(lctx, &livekit.ListEgressRequest{})
	cancel()
	if err != nil {
		return 0, err
	}
	items := resp.GetItems()
	sort.Slice(items, func(i, j int) bool { return items[i].GetEgressId() < items[j].GetEgressId() })
	cutoff := r.loc.Now().Add(-r.window).UnixNano()
	limiter := time.NewTicker(time.Second / time.Duration(r.rate))
	defer limiter.Stop()
	n := 0
	for _, info := range items {
		if !ended[info.GetStatus()] || info.GetEndedAt() < cutoff {
			continue
		}
		select {
		case <-ctx.Done():
			return n, ctx.Err()
		case <-limiter.C:
		}
		n++
		ev := &livekit.WebhookEvent{Event: "egress_ended", Id: "reconcile/" + info.GetEgressId(), EgressInfo: info}
		if err := r.loc.egressEnded(ctx, ev); err != nil && !errors.Is(err, failure.ErrNotYet) {
			r.log.Warn("reconcile: egress not handled", "egress_id", info.GetEgressId(), "err", err)
		}
	}
	return n, nil
}
