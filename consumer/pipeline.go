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
	"github.com/lkscore/lkscore/consumer/internal/factstore"
	"github.com/lkscore/lkscore/consumer/internal/forward"
	"github.com/lkscore/lkscore/consumer/internal/locate"
	"github.com/lkscore/lkscore/consumer/internal/metrics"
	"github.com/lkscore/lkscore/consumer/internal/retention"
	"github.com/lkscore/lkscore/consumer/internal/score"
	"github.com/lkscore/lkscore/consumer/internal/settle"
	"github.com/lkscore/lkscore/consumer/internal/stage"
	"github.com/lkscore/lkscore/internal/retrylog"
	"github.com/lkscore/lkscore/wire"
)

// pipeline runs the worker role: the locator's two consumers, the scoring
// pool's consumer, max-delivery advisories turned into dead letters, and the
// background loops (the store probe, the settler, lag polls, retention of
// local uploads, the alert resender, the store sweep, the egress
// reconciler).
type pipeline struct {
	health     *stage.Health
	shared     *locate.StoreCheck // a misplaced store, shown on /readyz
	settler    *settle.Settler
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
func stageTable(s wire.Subjects, p config.Pipeline, h handlers) []stageSpec {
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
		worker(stage.Spec{Name: wire.StageLocate, Stream: s.WebhookStream(), Handle: h.loc.Handle, OnGiveUp: roomMayBeEmpty,
			Consumer: with(wire.LocatorWebhooks, "lkscore locator: webhooks to session work", hooks)}),
		worker(stage.Spec{Name: wire.StageLocate, Stream: s.UploadStream(), Handle: h.loc.Handle, OnGiveUp: roomMayBeEmpty,
			Consumer: with(wire.LocatorUploads, "lkscore locator: collector uploads to session work", []string{s.UploadStored()})}),
		worker(stage.Spec{Name: wire.StageScore, Stream: s.SessionStream(), Handle: h.score.Handle,
			Consumer: with(wire.ScoreConsumer(p.Pool), "lkscore scoring pool "+p.Pool, sessions)}),
	}
	if h.detect != nil { // regression.enabled
		table = append(table, worker(stage.Spec{Name: wire.StageRegress, Stream: s.ResultStream(), Handle: h.detect.Handle,
			Consumer: with(wire.RegressConsumer, "lkscore regression detection over every scorecard", nil)}))
	}
	// Alert delivery: one message at a time per target, so each target sees
	// firing before resolved; a target configured later starts with the
	// alerts published from then on (the resender brings Alertmanager the
	// ones firing).
	for _, t := range h.targets {
		c := with(t.ID(), "lkscore alert delivery to "+t.Name(), nil)
		c.MaxAckPending, c.DeliverPolicy = 1, jetstream.DeliverNewPolicy
		table = append(table, worker(stage.Spec{Name: wire.StageNotify, Stream: s.AlertStream(), Handle: t.Handle,
			Concurrency: 1, Consumer: c}))
	}
	// The tee's relays: one consumer per forward target, its own subject
	// of the work-queue stream; copies are relayed in any order.
	for _, r := range h.relays {
		c := with(r.ID(), "lkscore forward relay to "+r.Name(), []string{s.Forward(r.ID())})
		c.MaxDeliver = -1 // retried until forward.max_age (the stream's max age, and the relay's own check)
		table = append(table, worker(stage.Spec{Name: wire.StageForward, Stream: s.ForwardStream(), Handle: r.Handle,
			Concurrency: forwardConcurrency, Consumer: c, MaxBackoff: forwardMaxBackoff}))
	}
	return table
}

// forwardConcurrency is how many relays to one target a process has in
// flight: relays wait on the target, not on CPU.
const forwardConcurrency = 8

// forwardMaxBackoff caps the wait between relays to a target that is down:
// one that comes back gets them within it.
const forwardMaxBackoff = 30 * time.Second

// pipelineDeps is what the worker role needs from the daemon.
type pipelineDeps struct {
	cfg     config.Config
	nc      *nats.Conn
	env     broker.Env
	store   locate.Recordings
	facts   *factstore.Store
	metrics *metrics.Pipeline
	forward forward.Metrics
}

// handlers are the stages' handlers and what the background loops share
// with them.
type handlers struct {
	loc     *locate.Locator
	score   *score.Worker
	detect  *detect.Detector // nil unless regression.enabled
	targets []*deliver.Target
	relays  []*forward.Relay
	shared  *locate.StoreCheck
	// alertClient is one client for every alert target: its transport keeps
	// connections to each; every POST is bounded by alerts.timeout.
	alertClient *http.Client
}

func newHandlers(ctx context.Context, d pipelineDeps) (handlers, error) {
	cfg, env := d.cfg, d.env
	scorer, err := cfg.Scorer()
	if err != nil {
		return handlers{}, err
	}
	links, err := locate.OpenEgressLinks(ctx, env, cfg.NATS)
	if err != nil {
		return handlers{}, err
	}
	d.metrics.Quality.SetMaxAgents(cfg.Metrics.MaxAgents)
	d.metrics.AgentVersions.SetMax(cfg.Metrics.MaxAgents)
	h := handlers{shared: locate.NewStoreCheck(d.store.Identity(), d.metrics.StoreNotShared, env.Log, env.Now),
		alertClient: &http.Client{Timeout: cfg.Alerts.Timeout}}
	h.loc, err = locate.New(env, locate.Options{Facts: d.facts, Store: d.store, Egress: links, Shared: h.shared, Metrics: d.metrics,
		Pipeline: cfg.Pipeline, Limits: cfg.Limits, S3: cfg.S3, Recordings: cfg.Recordings,
		VersionMetadataKey: cfg.Regression.VersionMetadataKey})
	if err != nil {
		return handlers{}, err
	}
	h.score, err = score.New(env, score.Options{Store: d.store, Facts: d.facts, Scorer: scorer, Metrics: d.metrics,
		Privacy: cfg.Privacy, Limits: cfg.Limits, Audio: cfg.Audio, AudioThresholds: cfg.Scoring.Audio, AgentResults: cfg.Pipeline.AgentResults})
	if err != nil {
		return handlers{}, err
	}
	if cfg.Regression.Enabled {
		var rkv jetstream.KeyValue
		err := broker.RetrySetup(ctx, env.Log, "regression bucket", env.Timeouts.Request, func(ctx context.Context) (err error) {
			rkv, err = detect.OpenBucket(ctx, env.JS, env.Subjects, cfg.NATS)
			return err
		})
		if err != nil {
			return handlers{}, err
		}
		if h.detect, err = detect.New(env, detect.Options{Bucket: rkv, Metrics: d.metrics, Regression: cfg.Regression}); err != nil {
			return handlers{}, err
		}
		h.targets, err = deliver.Targets(env, deliver.Options{Client: h.alertClient, Metrics: d.metrics.AlertDelivery(), Alerts: cfg.Alerts})
		if err != nil {
			return handlers{}, err
		}
	}
	h.relays = forward.Relays(cfg.Forward, &http.Client{}, d.store, d.forward, env.Log)
	return h, nil
}

func startPipeline(ctx context.Context, d pipelineDeps) (*pipeline, error) {
	h, err := newHandlers(ctx, d)
	if err != nil {
		return nil, err
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
	health, err := stage.NewHealth(stage.HealthOptions{Conn: d.nc, Probe: probe, Interval: d.cfg.Pipeline.HealthInterval,
		ProbeTimeout: d.cfg.S3.RequestTimeout, Up: d.metrics.DependencyUp, Log: d.env.Log})
	if err != nil {
		cancel()
		bgCancel()
		return nil, err
	}
	p := &pipeline{cancel: cancel, background: bgCancel, health: health, shared: h.shared}
	if err := p.startStages(ctx, workCtx, bgCtx, d, h); err != nil {
		_ = p.stop(context.Background())
		return nil, err
	}
	if err := p.startLoops(bgCtx, d, h); err != nil {
		_ = p.stop(context.Background())
		return nil, err
	}
	return p, nil
}

// startStages creates the table's consumers and starts a stage on each,
// with its lag watch.
func (p *pipeline) startStages(ctx, workCtx, bgCtx context.Context, d pipelineDeps, h handlers) error {
	cfg, env := d.cfg, d.env
	pc := cfg.Pipeline
	pacing := stage.Pacing{Concurrency: pc.Concurrency, AckWait: pc.AckWait, PullWait: min(5*time.Second, pc.AckWait/2),
		Deadline: pc.RecordingDeadline, RetryBase: pc.RetryBase}
	dlq := stage.NewDeadLetters(env, d.metrics)
	deps := stage.Deps{Health: p.health, DLQ: dlq, Metrics: d.metrics, Log: env.Log, Now: env.Now}
	for _, spec := range stageTable(env.Subjects, pc, h) {
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
		err := broker.RetrySetup(ctx, env.Log, "create consumer "+spec.Consumer.Durable, env.Timeouts.Request, func(ctx context.Context) (err error) {
			cons, err = env.JS.CreateOrUpdateConsumer(ctx, spec.Stream, spec.Consumer)
			return err
		})
		if err != nil {
			return err
		}
		sub, err := dlq.WatchMaxDeliveries(workCtx, d.nc, spec.Stream, spec.Consumer.Durable, spec.Name)
		if err != nil {
			return fmt.Errorf("watch max deliveries: %w", err)
		}
		p.subs = append(p.subs, sub)
		p.stages = append(p.stages, stage.New(spec.Spec, cons, pacing, deps))
	}
	lagEvery := min(15*time.Second, pc.StallAfter/2)
	for _, st := range p.stages {
		if err := st.Start(workCtx); err != nil {
			return err
		}
		p.goLoop(func() { st.WatchLag(bgCtx, lagEvery, env.Timeouts.Request, pc.StallAfter) })
	}
	return nil
}

// startLoops starts the background loops: the store probe, the settler,
// retention of local uploads, the alert resender, the store sweep and the
// egress reconciler, each as configured.
func (p *pipeline) startLoops(bgCtx context.Context, d pipelineDeps, h handlers) error {
	cfg, env := d.cfg, d.env
	pc := cfg.Pipeline
	p.goLoop(func() { p.health.Run(bgCtx) })
	settler, err := settle.New(env, settle.Options{Facts: d.facts, Conn: d.nc, Metrics: d.metrics, Pipeline: pc})
	if err != nil {
		return err
	}
	p.settler = settler
	p.goLoop(func() { p.settler.Run(bgCtx) })
	if r := cfg.Retention; r.Recordings > 0 && cfg.S3.Bucket == "" {
		layout, err := cfg.Layout()
		if err != nil {
			return err
		}
		ret, err := retention.New(env, retention.Options{Store: d.store, Facts: d.facts, Layout: layout, Deleted: d.metrics.RecordingsDeleted,
			Retention: r})
		if err != nil {
			return err
		}
		p.goLoop(func() { ret.Run(bgCtx) })
	}
	if h.detect != nil && len(cfg.Alerts.Alertmanager.URLs) > 0 {
		rs, err := deliver.NewResender(env, deliver.Options{Bucket: h.detect.Bucket(), Client: h.alertClient,
			Metrics: d.metrics.AlertDelivery(), Alerts: cfg.Alerts})
		if err != nil {
			return err
		}
		p.goLoop(func() { rs.Run(bgCtx) })
	}
	if f := cfg.Forward; len(f.Targets) > 0 {
		p.goLoop(func() { sweepForward(bgCtx, d.store, f.MaxAge, env.Log) })
	}
	if pc.SweepInterval > 0 {
		sw, err := locate.NewSweeper(locate.RecoveryOptions{Locator: h.loc, Pipeline: pc})
		if err != nil {
			return err
		}
		p.goLoop(func() { sw.Run(bgCtx) })
	}
	if pc.LiveKitURL != "" {
		rc, err := locate.NewReconciler(locate.RecoveryOptions{Locator: h.loc, Pipeline: pc, LiveKit: cfg.LiveKit})
		if err != nil {
			return err
		}
		p.goLoop(func() { rc.Run(bgCtx) })
	}
	return nil
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
//  1. the background loops (the store probe, the settler and its
//     publishers, lag polls, retention, the alert resender, sweep,
//     reconcile) are cancelled and waited for, so none publishes after
//     this point;
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

// sweepForward deletes, every 10 minutes, the tee's copies older than maxAge.
func sweepForward(ctx context.Context, st forward.RelayStore, maxAge time.Duration, log *slog.Logger) {
	t := time.NewTicker(10 * time.Minute)
	defer t.Stop()
	retries := retrylog.New(log, nil, 0)
	for {
		select {
		case <-ctx.Done():
			return
		case now := <-t.C:
			if n, err := forward.Sweep(ctx, st, maxAge, now); err != nil {
				retries.Failed("forward sweep", "forward: sweep of old copies", err)
			} else if retries.OK("forward sweep", "forward: sweep of old copies works again"); n > 0 {
				log.Warn("forward: deleted copies older than forward.max_age", "objects", n)
			}
		}
	}
}
