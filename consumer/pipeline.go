package consumer

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sort"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/lkscore/lkscore/config"
	"github.com/lkscore/lkscore/recording"
	"github.com/lkscore/lkscore/scoring"
)

// pipeline runs the worker role: the locator's two consumers, the scoring
// pool's consumer, and max-delivery advisories turned into dead letters.
type pipeline struct {
	stages     []*stage
	subs       []*nats.Subscription
	cancel     context.CancelFunc // abandons in-flight work past the deadline
	background context.CancelFunc // stops lag polling, sweep and reconcile
}

// locatorEvents are the webhooks the locator consumes.
var locatorEvents = []string{"agent_job_ended", "room_finished", "egress_ended"}

// consumerConfigs returns the durable consumers of the worker role, with
// explicit ack settings: AckWait covers a message between progress signals,
// MaxAckPending is the concurrency, MaxDeliver bounds retries before a
// max-deliveries advisory dead-letters the message.
func consumerConfigs(s Subjects, p config.Pipeline) map[string]jetstream.ConsumerConfig {
	base := jetstream.ConsumerConfig{
		AckPolicy: jetstream.AckExplicitPolicy, AckWait: p.AckWait, MaxDeliver: p.MaxDeliver,
		MaxAckPending: p.Concurrency, DeliverPolicy: jetstream.DeliverAllPolicy,
	}
	hooks := base
	hooks.Durable, hooks.Description = LocatorWebhooks, "lkscore locator: webhooks to session work"
	for _, e := range locatorEvents {
		hooks.FilterSubjects = append(hooks.FilterSubjects, s.Webhook(e))
	}
	uploads := base
	uploads.Durable, uploads.Description = LocatorUploads, "lkscore locator: collector uploads to session work"
	uploads.FilterSubjects = []string{s.UploadStored()}
	score := base
	score.Durable = ScoreConsumer(p.Pool)
	score.Description = "lkscore scoring pool " + p.Pool
	for _, r := range p.CloseReasons {
		score.FilterSubjects = append(score.FilterSubjects, s.Session(r))
	}
	return map[string]jetstream.ConsumerConfig{s.WebhookStream(): hooks, s.UploadStream(): uploads, s.SessionStream(): score}
}

// pipelineDeps is what the worker role needs from the daemon.
type pipelineDeps struct {
	cfg     config.Config
	nc      *nats.Conn
	js      jetstream.JetStream
	store   storeReader
	metrics *pipelineMetrics
	log     *slog.Logger
	now     func() time.Time
}

func startPipeline(ctx context.Context, d pipelineDeps) (*pipeline, error) {
	cfg := d.cfg
	subj := NewSubjects(cfg.NATS.SubjectPrefix, cfg.NATS.StreamPrefix)
	layout, err := recording.NewLayout(cfg.S3.Prefix, cfg.Recordings.KeyTemplate)
	if err != nil {
		return nil, err
	}
	scorer, err := scoring.NewScorer(cfg.Scoring)
	if err != nil {
		return nil, err
	}
	kv, err := d.js.CreateOrUpdateKeyValue(ctx, jetstream.KeyValueConfig{
		Bucket: subj.EgressLinks(), Description: "egress files by room (room_id.egress_id)",
		TTL: cfg.NATS.MaxAge, Storage: storageType(cfg.NATS.Storage), Replicas: cfg.NATS.Replicas,
	})
	if err != nil {
		return nil, fmt.Errorf("egress links bucket: %w", err)
	}
	lim := recording.Limits{HeaderBytes: int(cfg.Limits.HeaderBytes),
		Chat: recording.ChatLimits{MaxBytes: cfg.Limits.ChatHistoryBytes, MaxItems: cfg.Limits.ChatItems}}
	selected := map[string]bool{}
	for _, r := range cfg.Pipeline.CloseReasons {
		selected[r] = true
	}
	dlq := &deadLetters{js: d.js, subjects: subj, metrics: d.metrics, log: d.log, now: d.now}
	loc := &Locator{js: d.js, kv: kv, store: d.store, layout: layout, subjects: subj, cfg: cfg.Pipeline, lim: lim,
		lp:       recording.LocationParser{Endpoint: cfg.S3.Endpoint, ForcePathStyle: cfg.S3.ForcePathStyle},
		selected: selected, metrics: d.metrics, log: d.log, now: d.now}
	w := &Worker{js: d.js, store: d.store, scorer: scorer, lim: lim, subjects: subj, log: d.log}

	workCtx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	p := &pipeline{cancel: cancel}
	for stream, cc := range consumerConfigs(subj, cfg.Pipeline) {
		cctx, ccancel := context.WithTimeout(ctx, 10*time.Second)
		cons, err := d.js.CreateOrUpdateConsumer(cctx, stream, cc)
		ccancel()
		if err != nil {
			p.stop(context.Background())
			return nil, fmt.Errorf("create consumer %s: %w", cc.Durable, err)
		}
		st := &stage{consumerName: cc.Durable, cons: cons, concurrency: cfg.Pipeline.Concurrency, ackWait: cfg.Pipeline.AckWait,
			deadline: cfg.Pipeline.RecordingDeadline, retryBase: cfg.Pipeline.RetryBase, dlq: dlq, metrics: d.metrics, log: d.log, now: d.now}
		if stream == subj.SessionStream() {
			st.name, st.handle = StageScore, w.handle
		} else {
			st.name, st.handle = StageLocate, loc.handle
			// A finished room need not have had an agent: when no recording
			// arrives, that is not an error. A finished job with none is.
			st.onGiveUp = func(m jetstream.Msg) bool { return m.Subject() != subj.Webhook("room_finished") }
		}
		sub, err := dlq.watchMaxDeliveries(d.nc, stream, cc.Durable, st.name)
		if err != nil {
			p.stop(context.Background())
			return nil, fmt.Errorf("watch max deliveries: %w", err)
		}
		p.subs = append(p.subs, sub)
		p.stages = append(p.stages, st)
	}
	bgCtx, bgCancel := context.WithCancel(context.WithoutCancel(ctx))
	p.background = bgCancel
	for _, st := range p.stages {
		if err := st.start(workCtx); err != nil {
			p.stop(context.Background())
			return nil, err
		}
		go st.watchLag(bgCtx, 15*time.Second)
	}
	pc := cfg.Pipeline
	if pc.SweepInterval > 0 {
		go (&sweeper{loc: loc, interval: pc.SweepInterval, rate: pc.SweepRate, window: pc.DedupWindow, log: d.log}).run(bgCtx)
	}
	if pc.LiveKitURL != "" {
		key := pc.LiveKitAPIKey
		if key == "" {
			key = firstKey(cfg.LiveKit.Keys)
		}
		client := newEgressClient(pc.LiveKitURL, key, cfg.LiveKit.Keys[key])
		go (&reconciler{loc: loc, client: client, interval: pc.ReconcileInterval, rate: pc.SweepRate, window: pc.DedupWindow, log: d.log}).run(bgCtx)
	}
	return p, nil
}

func firstKey(keys map[string]string) string {
	ks := make([]string, 0, len(keys))
	for k := range keys {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	if len(ks) == 0 {
		return ""
	}
	return ks[0]
}

// stop stops taking work, lets in-flight messages finish (and be acked)
// until ctx ends, then abandons what is left: unacked messages are
// redelivered after AckWait, so nothing is lost.
func (p *pipeline) stop(ctx context.Context) error {
	if p.background != nil {
		p.background()
	}
	var errs []error
	for _, st := range p.stages {
		errs = append(errs, st.drain(ctx))
	}
	p.cancel()
	for _, s := range p.subs {
		_ = s.Unsubscribe()
	}
	return errors.Join(errs...)
}

func storageType(s string) jetstream.StorageType {
	if s == "memory" {
		return jetstream.MemoryStorage
	}
	return jetstream.FileStorage
}
