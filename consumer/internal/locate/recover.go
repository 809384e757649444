package locate

import (
	"context"
	"errors"
	"log/slog"
	"maps"
	"slices"
	"sort"
	"time"

	"github.com/livekit/protocol/livekit"
	lksdk "github.com/livekit/server-sdk-go/v2"

	"github.com/lkscore/lkscore/config"
	"github.com/lkscore/lkscore/consumer/internal/failure"
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
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		n, err := round(ctx)
		if err != nil && !errors.Is(err, context.Canceled) {
			l.Log.Warn(kind+" failed", "err", err)
			continue
		}
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

// NewSweeper sweeps the store for loc as cfg says (sweep_interval,
// sweep_rate, dedup_window).
func NewSweeper(loc *Locator, cfg config.Pipeline) *Sweeper {
	return &Sweeper{loc: loc, interval: cfg.SweepInterval, rate: cfg.SweepRate, window: cfg.DedupWindow, log: loc.Log}
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

// NewReconciler asks the LiveKit API at pipeline.livekit_url for loc, with
// pipeline.livekit_api_key (by default the first of livekit.keys, sorted).
func NewReconciler(loc *Locator, cfg config.Config) *Reconciler {
	pc := cfg.Pipeline
	key := pc.LiveKitAPIKey
	if key == "" {
		key = firstKey(cfg.LiveKit.Keys)
	}
	return &Reconciler{loc: loc, client: lksdk.NewEgressClient(pc.LiveKitURL, key, cfg.LiveKit.Keys[key]), interval: pc.ReconcileInterval,
		timeout: pc.LiveKitTimeout, rate: pc.SweepRate, window: pc.DedupWindow, log: loc.Log}
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
