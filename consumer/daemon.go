// Package consumer is lkscore's daemon: webhook ingest and the recording
// collector (HTTP), the NATS streams, the pipeline that turns stored events
// into session work and scorecards, and the health and metrics endpoints.
// The recording store lives in package store; docs/architecture.md draws
// the whole.
package consumer

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/lkscore/lkscore/config"
	"github.com/lkscore/lkscore/consumer/broker"
	"github.com/lkscore/lkscore/consumer/internal/factstore"
	"github.com/lkscore/lkscore/consumer/internal/forward"
	"github.com/lkscore/lkscore/consumer/internal/ingest"
	"github.com/lkscore/lkscore/consumer/internal/metrics"
	"github.com/lkscore/lkscore/consumer/internal/ops"
	"github.com/lkscore/lkscore/consumer/internal/seen"
	"github.com/lkscore/lkscore/consumer/internal/spool"
	"github.com/lkscore/lkscore/dashboard"
	"github.com/lkscore/lkscore/store"
	"github.com/lkscore/lkscore/wire"
)

// Daemon is one lkscore process: the NATS connection (an embedded server when
// no URL is configured), the ops server, and the parts its role runs: ingest
// (the webhook, collector and OTLP server) and the pipeline's stages.
type Daemon struct {
	cfg      config.Config
	log      *slog.Logger
	reg      prometheus.Registerer
	gatherer prometheus.Gatherer
	metrics  *metrics.Ingest
	pmetrics *metrics.Pipeline
	subjects wire.Subjects
	pipeline *pipeline

	ready    atomic.Bool
	ui       ops.UI
	guard    *dashboard.Guard // the one login guard of the ops listener (startOps)
	embedded *server.Server
	// embeddedToken is the embedded server's client token (data dir's nats.token).
	embeddedToken string
	lock          *dataDirLock // the data dir, when this process uses it
	nc            *nats.Conn
	link          broker.Link // the connection's state, for /healthz
	stopping      atomic.Bool // Shutdown began: a closed connection is ours
	ingest        *http.Server
	ops           *http.Server
	ingestLn      net.Listener
	opsLn         net.Listener
	serveErr      chan error
	stopOnce      sync.Once
	// spoolStop ends the ingest role's spool drain and redacted-rooms watch and waits for them.
	spoolStop func()
	// seen counts what ingest accepted and refused; seenSub answers the
	// dashboard's ingestion view with it.
	seen    *seen.Tracker
	seenSub *nats.Subscription
	// fwd are the tee's and the relays' metrics.
	fwd forward.Metrics
}

// New validates the config and builds a Daemon; Start brings it up.
func New(cfg config.Config, log *slog.Logger, reg prometheus.Registerer, gatherer prometheus.Gatherer) (*Daemon, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if log == nil || reg == nil || gatherer == nil {
		return nil, errors.New("consumer.New: log, registerer and gatherer are required")
	}
	return &Daemon{
		cfg: cfg, log: log, reg: reg, gatherer: gatherer,
		metrics:  metrics.NewIngest(reg),
		pmetrics: metrics.NewPipeline(reg),
		seen:     seen.NewTracker(reg, nil),
		fwd:      forward.NewMetrics(reg),
		subjects: wire.NewSubjects(cfg.NATS.SubjectPrefix, cfg.NATS.StreamPrefix),
		serveErr: make(chan error, 2),
	}, nil
}

// Start connects NATS, creates the streams and starts both HTTP servers.
// On error, everything started so far is shut down.
func (d *Daemon) Start(ctx context.Context) (err error) {
	defer func() {
		if err != nil {
			_ = d.Shutdown(context.WithoutCancel(ctx))
		}
	}()
	// Bind the ops port first, so probes answer (not ready) while NATS comes up.
	if err := d.startOps(); err != nil {
		return err
	}
	js, err := d.connectNATS(ctx)
	if err != nil {
		return err
	}
	if err := broker.EnsureStreams(ctx, js, d.subjects, d.cfg, d.log); err != nil {
		return err
	}
	fs, err := factstore.Open(ctx, js, d.subjects, d.cfg.NATS, d.log)
	if err != nil {
		return err
	}
	fs.RedactAll = d.cfg.Privacy.Redacted(false)
	if !d.cfg.Runs(config.RoleWorker) {
		fs.WithoutMemory() // no settler here watches the facts
	}
	st, err := store.Open(ctx, d.cfg)
	if err != nil {
		return err
	}
	if d.cfg.Runs(config.RoleWorker) {
		env := broker.Env{JS: js, Subjects: d.subjects, Timeouts: broker.TimeoutsFrom(d.cfg.NATS), Now: time.Now, Log: d.log}
		d.pipeline, err = startPipeline(ctx, pipelineDeps{cfg: d.cfg, nc: d.nc, env: env, store: st, facts: fs, metrics: d.pmetrics, forward: d.fwd})
		if err != nil {
			return err
		}
		settler := d.pipeline.settler
		d.seen.WatchWaiting(func() ([]wire.IngestWaiting, int) { return settler.Waiting(20) })
	}
	process := fmt.Sprintf("%s/%d", hostname(), os.Getpid())
	report := func() wire.IngestionReport { return d.seen.Report(process, d.cfg.Role) }
	if d.seenSub, err = seen.Serve(d.nc, d.subjects.Ingestion(), report); err != nil {
		return err
	}
	if err := d.ui.Start(ctx, d.cfg, js, d.subjects, fs, st, d.gatherer, d.guard, d.log); err != nil {
		return err
	}
	listen := ""
	if d.cfg.Runs(config.RoleIngest) {
		if listen, err = d.startIngest(ctx, js, st, fs); err != nil {
			return err
		}
	}
	d.ready.Store(true)
	d.log.Info("lkscore ready", "role", d.cfg.Role, "listen", listen, "ops_listen", d.opsLn.Addr().String(),
		"scoring_versions", scoringVersions(d.cfg), "config", d.cfg)
	return nil
}

// startOps serves the ops port: probes, metrics and the dashboard.
func (d *Daemon) startOps() (err error) {
	if d.opsLn, err = net.Listen("tcp", d.cfg.OpsListen); err != nil {
		return fmt.Errorf("ops_listen %s: %w (set ops_listen, LKSCORE_OPS_LISTEN or --ops-listen to a free address)", d.cfg.OpsListen, err)
	}
	access, err := dashboard.NewAccess(d.cfg.Dashboard.Token, d.cfg.Dashboard.ExternalURL, d.cfg.Dashboard.AllowedHosts)
	if err != nil {
		return err
	}
	d.guard = access.NewGuard() // one login limiter for the dashboard and pprof
	d.ops = d.httpServer(ops.Handler(d.notAlive, d.notReady, d.gatherer, &d.ui, d.cfg.OpsPprof, d.guard.Wrap))
	d.ops.ReadTimeout = d.cfg.HTTP.ReadHeaderTimeout + d.cfg.HTTP.BodyTimeout // the ops endpoints take no bodies
	go d.serve(d.ops, d.opsLn)
	return nil
}

// connectNATS connects to nats.url, or starts the embedded server in the
// data dir (taking its lock) and connects to it.
func (d *Daemon) connectNATS(ctx context.Context) (jetstream.JetStream, error) {
	url, natsCfg := d.cfg.NATS.URL, d.cfg.NATS
	if url == "" {
		// The data dir holds the embedded NATS server's store: one process
		// at a time. (Processes on an external NATS may share a local
		// recording store on one host: its writes are atomic renames.)
		var err error
		if d.lock, err = lockDataDir(d.cfg.DataDir); err != nil {
			return nil, err
		}
		token, err := broker.EmbeddedToken(d.cfg.DataDir)
		if err != nil {
			return nil, err
		}
		interval, always, _ := d.cfg.NATS.EmbeddedSyncInterval() // validated
		d.embedded, err = broker.StartEmbedded(d.cfg.DataDir, d.cfg.NATS.EmbeddedPort, d.cfg.NATS.RequestTimeout, token, interval, always)
		if err != nil {
			return nil, err
		}
		url, natsCfg.Token, d.embeddedToken = d.embedded.ClientURL(), token, token
		d.log.Info("embedded nats started", "url", url, "store_dir", filepath.Join(d.cfg.DataDir, "nats"),
			"token_file", filepath.Join(d.cfg.DataDir, broker.TokenFile))
	}
	var err error
	if d.nc, err = broker.Connect(url, natsCfg, d.log, &d.link); err != nil {
		return nil, err
	}
	js, err := jetstream.New(d.nc)
	if err != nil {
		return nil, fmt.Errorf("jetstream: %w", err)
	}
	// No subject or key over broker.MaxSubjectLen leaves the process: NATS
	// would close the connection for good.
	return broker.Guard(js), nil
}

// startIngest starts the OTLP spool's drain and serves the ingest port; it
// returns the address it listens on.
func (d *Daemon) startIngest(ctx context.Context, js jetstream.JetStream, st store.Store, fs *factstore.Store) (string, error) {
	sp, err := spool.New(spool.Options{Store: st, Sink: fs, Connected: d.nc.IsConnected, Spooled: d.metrics.OTLPSpooled,
		Drained: d.metrics.OTLPUnspooled, Log: d.log})
	if err != nil {
		return "", err
	}
	env := broker.Env{JS: js, Subjects: d.subjects, Timeouts: broker.TimeoutsFrom(d.cfg.NATS), Now: time.Now, Log: d.log}
	rooms, err := ingest.OpenRedactedRooms(ctx, env, d.cfg.NATS)
	if err != nil {
		return "", err
	}
	h, err := ingest.Handler(ingest.Options{Config: d.cfg, JS: js, Store: st, Facts: fs, Connected: d.nc.IsConnected, Spool: sp,
		Metrics: d.metrics, Log: d.log, Seen: d.seen, Tee: forward.NewTee(d.cfg, st, js, d.fwd, d.log), Rooms: rooms})
	if err != nil {
		return "", err
	}
	sctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	var bg sync.WaitGroup
	bg.Go(func() { sp.Run(sctx) })
	bg.Go(func() { rooms.Run(sctx) })
	d.spoolStop = func() { cancel(); bg.Wait() }
	if d.ingestLn, err = net.Listen("tcp", d.cfg.Listen); err != nil {
		return "", fmt.Errorf("listen %s: %w (set listen, LKSCORE_LISTEN or --listen to a free address)", d.cfg.Listen, err)
	}
	d.ingest = d.httpServer(h)
	go d.serve(d.ingest, d.ingestLn)
	return d.ingestLn.Addr().String(), nil
}

func (d *Daemon) serve(s *http.Server, ln net.Listener) {
	if err := s.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
		d.serveErr <- err
	}
}

// Run starts the daemon, blocks until ctx is done or a server fails, then
// shuts down within cfg.ShutdownTimeout.
func (d *Daemon) Run(ctx context.Context) error {
	if err := d.Start(ctx); err != nil {
		if ctx.Err() != nil { // a signal during start-up: a normal stop
			d.log.Info("stopped during start-up")
			return nil
		}
		return err
	}
	var runErr error
	select {
	case <-ctx.Done():
		d.log.Info("shutting down", "deadline", d.cfg.ShutdownTimeout.String())
	case runErr = <-d.serveErr:
		d.log.Error("server failed", "err", runErr)
	}
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), d.cfg.ShutdownTimeout)
	defer cancel()
	return errors.Join(runErr, d.Shutdown(sctx))
}

// Shutdown stops in order, all under ctx's deadline: readiness off; for
// shutdown_delay the ingest keeps serving what still arrives (the
// endpoints are removed asynchronously); the ingest server stops accepting and finishes in-flight requests (they may
// still publish); the pipeline stops taking work and finishes, acks and
// publishes what it holds; NATS drains; the embedded server stops; the ops
// server goes last so probes see "not ready" throughout.
func (d *Daemon) Shutdown(ctx context.Context) error {
	var errs []error
	d.stopOnce.Do(func() {
		d.ready.Store(false)
		d.stopping.Store(true)
		if d.ingest != nil && d.cfg.ShutdownDelay > 0 {
			d.log.Info("unready; the ingest keeps serving for shutdown_delay", "shutdown_delay", d.cfg.ShutdownDelay.String())
			select {
			case <-time.After(d.cfg.ShutdownDelay):
			case <-ctx.Done():
			}
		}
		if d.ingest != nil {
			if err := d.ingest.Shutdown(ctx); err != nil {
				errs = append(errs, fmt.Errorf("ingest server: %w", err))
			}
		}
		if d.spoolStop != nil {
			d.spoolStop() // what is still spooled stays in the store for the next start
		}
		if d.pipeline != nil {
			errs = append(errs, d.pipeline.stop(ctx))
		}
		d.ui.Stop()
		if d.seenSub != nil {
			_ = d.seenSub.Unsubscribe()
		}
		if d.nc != nil {
			errs = append(errs, drain(ctx, d.nc))
		}
		if d.embedded != nil {
			d.embedded.Shutdown()
			d.embedded.WaitForShutdown()
		}
		if d.lock != nil {
			d.lock.release()
		}
		if d.ops != nil {
			if err := d.ops.Shutdown(ctx); err != nil {
				errs = append(errs, fmt.Errorf("ops server: %w", err))
			}
		}
	})
	return errors.Join(errs...)
}

// drain drains nc and waits until it is closed or ctx ends.
func drain(ctx context.Context, nc *nats.Conn) error {
	if nc.IsClosed() {
		return nil // nothing left to drain
	}
	closed := make(chan struct{})
	nc.SetClosedHandler(func(*nats.Conn) { close(closed) })
	if err := nc.Drain(); err != nil {
		nc.Close()
		return fmt.Errorf("nats drain: %w", err)
	}
	select {
	case <-closed:
		return nil
	case <-ctx.Done():
		nc.Close()
		return fmt.Errorf("nats drain: %w", ctx.Err())
	}
}

// IngestAddr is the bound address of the webhook/collector server.
func (d *Daemon) IngestAddr() string { return d.ingestLn.Addr().String() }

// OpsAddr is the bound address of the ops server (health, metrics, dashboard).
func (d *Daemon) OpsAddr() string { return d.opsLn.Addr().String() }

// NATSURL is the URL of the NATS server in use (the embedded one's, if
// any), with the embedded server's token in it: a URL to connect with, not
// to print (NATSURLRedacted).
func (d *Daemon) NATSURL() string {
	u := d.nc.ConnectedUrl()
	if d.embeddedToken != "" {
		if rest, ok := strings.CutPrefix(u, "nats://"); ok {
			return "nats://" + d.embeddedToken + "@" + rest
		}
	}
	return u
}

// NATSURLRedacted is NATSURL without credentials, to print.
func (d *Daemon) NATSURLRedacted() string { return d.nc.ConnectedUrlRedacted() }

// maxHeaderBytes caps a request's headers (net/http's default is 1 MiB): a
// LiveKit token is under 1 KiB.
const maxHeaderBytes = 64 << 10

// httpServer is an HTTP server with the configured timeouts. The bodies'
// deadline is set per request (http.body_timeout; an upload's is stretched
// while it keeps sending).
func (d *Daemon) httpServer(h http.Handler) *http.Server {
	return &http.Server{Handler: h, ReadHeaderTimeout: d.cfg.HTTP.ReadHeaderTimeout, IdleTimeout: d.cfg.HTTP.IdleTimeout,
		MaxHeaderBytes: maxHeaderBytes}
}

// notReady says why the process is not ready, or "".
func (d *Daemon) notReady() string {
	switch {
	case !d.ready.Load():
		return "not ready"
	case d.nc == nil || !d.nc.IsConnected():
		return "nats not connected"
	case d.pipeline != nil:
		return cmp.Or(d.pipeline.health.Status(), d.pipeline.shared.Status())
	}
	return ""
}

// notAlive says why /healthz fails, or "": NATS can no longer be reached
// (the connection closed for good, or down longer than
// nats.unhealthy_after), which only a restart can mend.
func (d *Daemon) notAlive() string {
	if d.stopping.Load() {
		return ""
	}
	return d.link.Unhealthy(d.nc, d.cfg.NATS.UnhealthyAfter, time.Now())
}

// hostname names this process's host in its ingestion reports ("" when unknown).
func hostname() string {
	h, _ := os.Hostname()
	return h
}

// scoringVersions names, for the start-up log, each agent's scoring
// version and the policy it is scored with: "default=1.4.0+c…" for every
// agent without a policy or rule of its own, then "booking (policy
// booking)=…" (docs/policies.md).
func scoringVersions(cfg config.Config) string {
	scorer, err := cfg.Scorer()
	if err != nil {
		return "unknown: " + err.Error()
	}
	vs := scorer.Versions()
	parts := []string{"default=" + vs[""]}
	agents := make([]string, 0, len(vs))
	for a := range vs {
		if a != "" {
			agents = append(agents, a)
		}
	}
	slices.Sort(agents)
	for _, a := range agents {
		name := a + " (default policy)"
		if _, ok := cfg.Scoring.Agents[a]; ok {
			name = a + " (policy " + a + ")"
		}
		parts = append(parts, name+"="+vs[a])
	}
	return strings.Join(parts, ", ")
}
