package consumer

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/lkscore/lkscore/config"
	"github.com/lkscore/lkscore/consumer/broker"
	"github.com/lkscore/lkscore/consumer/internal/deliver"
	"github.com/lkscore/lkscore/consumer/internal/detect"
	"github.com/lkscore/lkscore/consumer/internal/facts"
	"github.com/lkscore/lkscore/consumer/internal/locate"
	"github.com/lkscore/lkscore/consumer/internal/metrics"
	"github.com/lkscore/lkscore/consumer/internal/score"
	"github.com/lkscore/lkscore/consumer/internal/stage"
	"github.com/lkscore/lkscore/recording"
	"github.com/lkscore/lkscore/scoring"
	"github.com/lkscore/lkscore/wire"
)

// pipeline runs the worker role: the locator's two consumers, the scoring
// pool's consumer, max-delivery advisories turned into dead letters, and the
// background loops (lag polling, sweep, reconcile).
type pipeline struct {
	health     *stage.Health
	shared     *locate.StoreCheck // a misplaced store, shown on /readyz
	settler    *locate.Settler
	stages     []*stage.Stage
	subs       []*nats.Subscription
	cancel     context.CancelFunc // abandons in-flight work past the deadline
	background context.CancelFunc // stops lag polling, sweep and reconcile
	loops      sync.WaitGroup     // the background loops
}

// deadLetterReasons are the reason labels of lkscore_pipeline_dead_lettered_total.
var deadLetterReasons = []string{"recording_not_found", "malformed_recording", "bad_message", "store", "store_not_shared", "max_deliveries"}

// retryReasons are the reason labels of lkscore_pipeline_retried_total.
var retryReasons = []string{"recording_not_found", "transient", "dependency_down"}

// locatorEvents are the webhooks the locator consumes.
var locatorEvents = []string{"agent_job_started", "agent_job_ended", "participant_left", "participant_connection_aborted",
	"room_finished", "egress_ended"}

// stageSpec is one row of the pipeline table: the role that runs the stage
// (config.RoleWorker) and the stage.
type stageSpec struct {
	role string
	stage.Spec
}

// stageTable is the whole pipeline, in the order stages start. Every
// consumer has explicit ack settings: AckWait covers a message between
// progress signals (a dead worker's messages return after it);
// MaxAckPending is the pool-wide budget of delivered, unacknowledged
// messages, retries waiting their delay included, so no worker's crash can
// fill it; MaxDeliver bounds retries before a max-deliveries advisory
// dead-letters the message. Each process bounds its own share with
// pipeline.concurrency.
func stageTable(s wire.Subjects, p config.Pipeline, loc *locate.Locator, w *score.Worker, reg *detect.Detector, targets []*deliver.Target) []stageSpec {
	base := jetstream.ConsumerConfig{
		AckPolicy: jetstream.AckExplicitPolicy, AckWait: p.AckWait, MaxDeliver: p.MaxDeliver,
		MaxAckPending: p.MaxAckPending, DeliverPolicy: jetstream.DeliverAllPolicy,
	}
	with := func(durable, description string, filters []string) jetstream.ConsumerConfig {
		c := base
		c.Durable, c.Description, c.FilterSubjects = durable, description, filters
		return c
	}
	var hooks, sessions []string
	for _, e := range locatorEvents {
		hooks = append(hooks, s.Webhook(e))
	}
	for _, r := range p.CloseReasons {
		sessions = append(sessions, s.Session(r))
	}
	// A finished room need not have had an agent: when no recording arrives,
	// that is not an error. A finished job with none is.
	roomMayBeEmpty := func(m jetstream.Msg) bool { return m.Subject() != s.Webhook("room_finished") }
	// participant_left and agent_job_started never wait for a recording.
	worker := func(spec stage.Spec) stageSpec { return stageSpec{role: config.RoleWorker, Spec: spec} }
	table := []stageSpec{
		worker(stage.Spec{Name: wire.StageLocate, Stream: s.WebhookStream(), Handle: loc.Handle, OnGiveUp: roomMayBeEmpty,
			Consumer: with(wire.LocatorWebhooks, "lkscore locator: webhooks to session work", hooks)}),
		worker(stage.Spec{Name: wire.StageLocate, Stream: s.UploadStream(), Handle: loc.Handle, OnGiveUp: roomMayBeEmpty,
			Consumer: with(wire.LocatorUploads, "lkscore locator: collector uploads to session work", []string{s.UploadStored()})}),
		worker(stage.Spec{Name: wire.StageScore, Stream: s.SessionStream(), Handle: w.Handle,
			Consumer: with(wire.ScoreConsumer(p.Pool), "lkscore scoring pool "+p.Pool, sessions)}),
	}
	if reg != nil { // regression.enabled
		table = append(table, worker(stage.Spec{Name: wire.StageRegress, Stream: s.ResultStream(), Handle: reg.Handle,
			Consumer: with(wire.RegressConsumer, "lkscore regression detection over every scorecard", nil)}))
	}
	// Alert delivery: one message at a time per target, so each target sees
	// firing before resolved; a target configured later starts with the
	// alerts published from then on (the resender brings Alertmanager the
	// ones firing).
	for _, t := range targets {
		c := with(t.ID(), "lkscore alert delivery to "+t.Name(), nil)
		c.MaxAckPending, c.DeliverPolicy = 1, jetstream.DeliverNewPolicy
		table = append(table, worker(stage.Spec{Name: wire.StageNotify, Stream: s.AlertStream(), Handle: t.Handle,
			Concurrency: 1, Consumer: c}))
	}
	return table
}

// pipelineDeps is what the worker role needs from the daemon.
type pipelineDeps struct {
	cfg     config.Config
	nc      *nats.Conn
	js      jetstream.JetStream
	store   locate.Recordings
	facts   *facts.Store
	metrics *metrics.Pipeline
	log     *slog.Logger
	now     func() time.Time
}

func startPipeline(ctx context.Context, d pipelineDeps) (*pipeline, error) {
	cfg := d.cfg
	subj := wire.NewSubjects(cfg.NATS.SubjectPrefix, cfg.NATS.StreamPrefix)
	to := broker.TimeoutsFrom(cfg.NATS)
	env := broker.Env{JS: d.js, Subjects: subj, Timeouts: to, Now: d.now, Log: d.log}
	layout, err := recording.NewLayout(cfg.S3.Prefix, cfg.Recordings.KeyTemplate)
	if err != nil {
		return nil, err
	}
	scorer, err := scoring.NewScorer(cfg.Scoring)
	if err != nil {
		return nil, err
	}
	var kv jetstream.KeyValue
	err = broker.RetrySetup(ctx, d.log, "egress links bucket", to.Request, func(ctx context.Context) (err error) {
		kv, err = d.js.CreateOrUpdateKeyValue(ctx, jetstream.KeyValueConfig{
			Bucket: subj.EgressLinks(), Description: "egress files by room (room_id.egress_id)",
			TTL: cfg.NATS.MaxAge, Storage: broker.StorageType(cfg.NATS.Storage), Replicas: cfg.NATS.Replicas,
		})
		return err
	})
	if err != nil {
		return nil, err
	}
	d.metrics.Quality.SetMaxAgents(cfg.Metrics.MaxAgents)
	shared := locate.NewStoreCheck(d.store.Identity(), d.metrics.StoreNotShared, d.log, d.now)
	loc, err := locate.New(env, d.facts, d.store, kv, cfg, shared, d.metrics)
	if err != nil {
		return nil, err
	}
	w, err := score.New(env, d.facts, d.store, scorer, cfg, d.metrics)
	if err != nil {
		return nil, err
	}
	dlq := stage.NewDeadLetters(env, d.metrics)
	var reg *detect.Detector
	if cfg.Regression.Enabled && cfg.Runs(config.RoleWorker) {
		var rkv jetstream.KeyValue
		err := broker.RetrySetup(ctx, d.log, "regression bucket", to.Request, func(ctx context.Context) (err error) {
			rkv, err = detect.OpenBucket(ctx, d.js, subj, cfg.NATS)
			return err
		})
		if err != nil {
			return nil, err
		}
		reg = detect.New(env, rkv, cfg.Regression, d.metrics)
	}

	workCtx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	bgCtx, bgCancel := context.WithCancel(context.WithoutCancel(ctx))
	st := d.store
	probe := func(ctx context.Context) error {
		rc, err := st.Open(ctx, "lkscore-health/probe", 1)
		if err == nil {
			_ = rc.Close()
		}
		return err
	}
	h := stage.NewHealth(d.nc, probe, cfg.Pipeline.HealthInterval, cfg.S3.RequestTimeout, d.metrics.DependencyUp, d.log)
	p := &pipeline{cancel: cancel, background: bgCancel, health: h, shared: shared}
	fail := func(err error) (*pipeline, error) {
		_ = p.stop(context.Background())
		return nil, err
	}
	var targets []*deliver.Target
	// One client for every alert target: its transport keeps connections
	// to each; every POST is bounded by alerts.timeout.
	alertClient := &http.Client{Timeout: cfg.Alerts.Timeout}
	if reg != nil {
		targets = deliver.Targets(cfg.Alerts, alertClient, d.metrics.AlertDelivery(), d.log)
	}
	pacing := stage.Pacing{Concurrency: cfg.Pipeline.Concurrency, AckWait: cfg.Pipeline.AckWait,
		PullWait: min(5*time.Second, cfg.Pipeline.AckWait/2), Deadline: cfg.Pipeline.RecordingDeadline, RetryBase: cfg.Pipeline.RetryBase}
	deps := stage.Deps{Health: h, DLQ: dlq, Metrics: d.metrics, Log: d.log, Now: d.now}
	for _, spec := range stageTable(subj, cfg.Pipeline, loc, w, reg, targets) {
		if !cfg.Runs(spec.role) {
			continue
		}
		// Every dead-letter reason from zero, so increase() sees the first one.
		for _, reason := range deadLetterReasons {
			d.metrics.DeadLettered.WithLabelValues(spec.Name, reason).Add(0)
		}
		for _, reason := range retryReasons {
			d.metrics.Retried.WithLabelValues(spec.Name, reason).Add(0)
		}
		var cons jetstream.Consumer
		err := broker.RetrySetup(ctx, d.log, "create consumer "+spec.Consumer.Durable, to.Request, func(ctx context.Context) (err error) {
			cons, err = d.js.CreateOrUpdateConsumer(ctx, spec.Stream, spec.Consumer)
			return err
		})
		if err != nil {
			return fail(err)
		}
		sub, err := dlq.WatchMaxDeliveries(workCtx, d.nc, spec.Stream, spec.Consumer.Durable, spec.Name)
		if err != nil {
			return fail(fmt.Errorf("watch max deliveries: %w", err))
		}
		p.subs = append(p.subs, sub)
		p.stages = append(p.stages, stage.New(spec.Spec, cons, pacing, deps))
	}
	lagEvery := min(15*time.Second, cfg.Pipeline.StallAfter/2)
	for _, st := range p.stages {
		if err := st.Start(workCtx); err != nil {
			return fail(err)
		}
		p.goLoop(func() { st.WatchLag(bgCtx, lagEvery, to.Request, cfg.Pipeline.StallAfter) })
	}
	pc := cfg.Pipeline
	p.goLoop(func() { h.Run(bgCtx) })
	set := locate.NewSettler(env, d.nc, d.facts, pc, d.metrics)
	p.settler = set
	p.goLoop(func() { set.Run(bgCtx) })
	if r := cfg.Retention; r.Recordings > 0 && cfg.S3.Bucket == "" {
		ret := locate.NewRetention(d.store, d.facts, layout, r.Recordings, r.SweepInterval, d.metrics.RecordingsDeleted, d.log, d.now)
		p.goLoop(func() { ret.Run(bgCtx) })
	}
	if am := cfg.Alerts.Alertmanager; reg != nil && len(am.URLs) > 0 {
		rs := deliver.NewResender(reg.Bucket(), cfg.Alerts, alertClient, d.metrics.AlertDelivery(), d.log, d.now)
		p.goLoop(func() { rs.Run(bgCtx) })
	}
	if pc.SweepInterval > 0 {
		sw := locate.NewSweeper(loc, pc)
		p.goLoop(func() { sw.Run(bgCtx) })
	}
	if pc.LiveKitURL != "" {
		rc := locate.NewReconciler(loc, cfg)
		p.goLoop(func() { rc.Run(bgCtx) })
	}
	return p, nil
}

// goLoop runs a background loop that stop waits for.
func (p *pipeline) goLoop(f func()) {
	p.loops.Add(1)
	go func() {
		defer p.loops.Done()
		f()
	}()
}

// stop shuts the pipeline down in order, within ctx:
//  1. the background loops (lag polls, sweep, reconcile) are cancelled and
//     waited for, so none publishes after this point;
//  2. every stage stops taking work and finishes, publishes and acks what
//     it holds;
//  3. work still running at the deadline is abandoned: unacked messages
//     are redelivered after AckWait, so nothing is lost;
//  4. the advisory subscriptions end.
func (p *pipeline) stop(ctx context.Context) error {
	var errs []error
	if p.background != nil {
		p.background()
		errs = append(errs, waitCtx(ctx, &p.loops, "background loops"))
	}
	for _, st := range p.stages {
		errs = append(errs, st.Drain(ctx))
	}
	p.cancel()

	for _, s := range p.subs {
		_ = s.Unsubscribe()
	}
	return errors.Join(errs...)
}

// waitCtx waits for wg, or fails when ctx ends first.
func waitCtx(ctx context.Context, wg *sync.WaitGroup, what string) error {
	done := make(chan struct{})
	go func() {
		wg.Wait()
		close(done)
	}()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("wait for %s: %w", what, ctx.Err())
	}
}
