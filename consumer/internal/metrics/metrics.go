// Package metrics holds the daemon's Prometheus metrics: ingest's, the
// pipeline's, alert delivery's and the quality of what was scored. A nil
// Registerer gives working, unregistered metrics.
package metrics

import (
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"

	"github.com/lkscore/lkscore/config"
)

// ingestMetrics are ingest's Prometheus metrics. A nil Registerer gives working,
// unregistered metrics (promauto.With(nil)).
type Ingest struct {
	Requests       *prometheus.CounterVec
	WebhookEvents  *prometheus.CounterVec
	Rejected       *prometheus.CounterVec
	PublishLatency *prometheus.HistogramVec
	BytesStored    *prometheus.CounterVec
	OTLPDiscarded  *prometheus.CounterVec
	OTLPFacts      *prometheus.CounterVec
	// OTLPSpooled and OTLPUnspooled count OTLP requests whose facts were
	// kept in the recording store while NATS was down, and added later.
	OTLPSpooled, OTLPUnspooled *prometheus.CounterVec
	UploadsWaiting             prometheus.Gauge
}

func NewIngest(reg prometheus.Registerer) *Ingest {
	f := promauto.With(reg)
	return &Ingest{
		Requests: f.NewCounterVec(prometheus.CounterOpts{
			Name: "lkscore_http_requests_total",
			Help: "HTTP requests to the ingest server by endpoint and outcome.",
		}, []string{"endpoint", "outcome"}),
		WebhookEvents: f.NewCounterVec(prometheus.CounterOpts{
			Name: "lkscore_webhook_events_total",
			Help: "Verified webhook events by event name and outcome (stored, duplicate, ignored, unavailable).",
		}, []string{"event", "outcome"}),
		Rejected: f.NewCounterVec(prometheus.CounterOpts{
			Name: "lkscore_http_rejected_total",
			Help: "Requests refused by endpoint and reason.",
		}, []string{"endpoint", "reason"}),
		PublishLatency: f.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "lkscore_nats_publish_duration_seconds",
			Help:    "Time from publish to JetStream acknowledgement, by stream.",
			Buckets: []float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5},
		}, []string{"stream"}),
		BytesStored: f.NewCounterVec(prometheus.CounterOpts{
			Name: "lkscore_collector_bytes_stored_total",
			Help: "Bytes of recording uploads stored, by part.",
		}, []string{"part"}),
		OTLPDiscarded: f.NewCounterVec(prometheus.CounterOpts{
			Name: "lkscore_collector_otlp_discarded_total",
			Help: "OTLP export requests accepted and discarded (metrics), by signal.",
		}, []string{"signal"}),
		OTLPFacts: f.NewCounterVec(prometheus.CounterOpts{
			Name: "lkscore_otlp_facts_total",
			Help: "Session facts read from OTLP logs and traces (before deduplication), by signal.",
		}, []string{"signal"}),
		OTLPSpooled: f.NewCounterVec(prometheus.CounterOpts{
			Name: "lkscore_otlp_spooled_total",
			Help: "OTLP logs and traces requests whose session facts were kept in the recording store while NATS was down, by signal.",
		}, []string{"signal"}),
		OTLPUnspooled: f.NewCounterVec(prometheus.CounterOpts{
			Name: "lkscore_otlp_spool_drained_total",
			Help: "Spooled OTLP requests whose session facts were added once NATS was back, by signal.",
		}, []string{"signal"}),
		UploadsWaiting: f.NewGauge(prometheus.GaugeOpts{
			Name: "lkscore_collector_uploads_waiting",
			Help: "Recording uploads waiting for one of http.max_inflight_uploads slots.",
		}),
	}
}

// EventLabel keeps the event label's cardinality bounded.
func EventLabel(event string) string {
	if config.KnownEvent(event) {
		return event
	}
	return "other"
}

// pipelineMetrics are the locator's and workers' metrics, per stage.
type Pipeline struct {
	Received          *prometheus.CounterVec   // stage
	Done              *prometheus.CounterVec   // stage, outcome
	Retried           *prometheus.CounterVec   // stage, reason
	DeadLettered      *prometheus.CounterVec   // stage, reason
	Sessions          *prometheus.CounterVec   // close_reason, selected (lkscore_sessions_published_total)
	SessionsOldName   *prometheus.CounterVec   // the same, as lkscore_sessions_located_total until 0.3
	Duration          *prometheus.HistogramVec // stage
	Steps             *prometheus.HistogramVec // step: a session's time between two steps
	Queued            *prometheus.HistogramVec // stage: a message's first wait in its stream
	SettlerBacklog    prometheus.Gauge         // sessions due and not yet published
	SettlerBacklogAge prometheus.Gauge         // how long the oldest of them is overdue
	Waiting           prometheus.Gauge         // sessions whose job ended, waiting for their recording
	WaitingAge        prometheus.Gauge         // how long the longest of them has waited
	Pending           *prometheus.GaugeVec     // consumer
	AckPending        *prometheus.GaugeVec     // consumer
	RecoveryRuns      *prometheus.CounterVec   // kind: sweep, reconcile
	ConsumerErrs      *prometheus.CounterVec   // consumer
	Stalled           *prometheus.GaugeVec     // stage, consumer
	DependencyUp      *prometheus.GaugeVec     // dependency: store, nats
	RecordingsDeleted *prometheus.CounterVec   // reason: retention, metadata_only
	Alerts            *prometheus.CounterVec   // kind, status
	Deliveries        *prometheus.CounterVec   // target, outcome
	DeliveryDuration  *prometheus.HistogramVec // target
	AgentSessions     *prometheus.CounterVec   // agent, version
	StoreNotShared    prometheus.Counter
	Quality           *Quality
	// AgentVersions caps lkscore_regression_sessions_total's (agent,
	// version) pairs (metrics.max_agents).
	AgentVersions *LabelCap
}

// NewPipeline registers the worker's metrics with reg.
func NewPipeline(reg prometheus.Registerer) *Pipeline {
	f := promauto.With(reg)
	p := &Pipeline{
		Quality: NewQuality(reg), AgentVersions: NewLabelCap(0),
	}
	p.stageMetrics(f)
	p.sessionMetrics(f)
	p.consumerMetrics(f)
	p.alertMetrics(f)
	return p
}

// stageMetrics registers the stages' own metrics.
func (p *Pipeline) stageMetrics(f promauto.Factory) {
	p.Received = f.NewCounterVec(prometheus.CounterOpts{
		Name: "lkscore_pipeline_received_total", Help: "Messages delivered to a pipeline stage (redeliveries included).",
	}, []string{"stage"})
	p.Done = f.NewCounterVec(prometheus.CounterOpts{
		Name: "lkscore_pipeline_done_total", Help: "Messages a stage finished with, by outcome.",
	}, []string{"stage", "outcome"})
	p.Retried = f.NewCounterVec(prometheus.CounterOpts{
		Name: "lkscore_pipeline_retried_total", Help: "Messages handed back for a delayed retry, by reason.",
	}, []string{"stage", "reason"})
	p.StoreNotShared = f.NewCounter(prometheus.CounterOpts{
		Name: "lkscore_store_not_shared_total",
		Help: "Upload notices from an ingest process whose recording store this worker cannot read (dead-lettered store_not_shared).",
	})
	p.DeadLettered = f.NewCounterVec(prometheus.CounterOpts{
		Name: "lkscore_pipeline_dead_lettered_total", Help: "Messages dead-lettered, by stage and reason.",
	}, []string{"stage", "reason"})
	p.Duration = f.NewHistogramVec(prometheus.HistogramOpts{
		Name: "lkscore_pipeline_duration_seconds", Help: "Time to process one message, by stage.",
		Buckets: []float64{.001, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30},
	}, []string{"stage"})
	p.Queued = f.NewHistogramVec(prometheus.HistogramOpts{
		Name: "lkscore_stage_queued_seconds",
		Help: "How long a message waited in its stream before a stage first took it (stored → first delivery handled): " +
			"locate's is the wait between ingest's 2xx and the session's facts.",
		Buckets: []float64{.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60},
	}, []string{"stage"})
	p.Stalled = f.NewGaugeVec(prometheus.GaugeOpts{
		Name: "lkscore_stage_stalled", Help: "1 while a stage has work pending and has settled nothing for pipeline.stall_after.",
	}, []string{"stage", "consumer"})
	p.DependencyUp = f.NewGaugeVec(prometheus.GaugeOpts{
		Name: "lkscore_dependency_up", Help: "1 while the worker's dependency (store, nats) is up; the pipeline pauses while one is down.",
	}, []string{"dependency"})
}

// sessionMetrics registers the metrics of sessions' way through the settler and the store.
func (p *Pipeline) sessionMetrics(f promauto.Factory) {
	p.Sessions = f.NewCounterVec(prometheus.CounterOpts{
		Name: "lkscore_sessions_published_total",
		Help: "Session work items the settler published, by close reason; selected=false when this deployment's pool does not " +
			"score that reason (the stream keeps them).",
	}, []string{"close_reason", "selected"})
	p.SessionsOldName = f.NewCounterVec(prometheus.CounterOpts{
		Name: "lkscore_sessions_located_total",
		Help: "Deprecated: lkscore_sessions_published_total under its old name, removed in 0.3 (docs/changelog.md).",
	}, []string{"close_reason", "selected"})
	p.Steps = f.NewHistogramVec(prometheus.HistogramOpts{
		Name: "lkscore_session_step_seconds",
		Help: "A session's time between two steps of the pipeline: ready_to_located (its facts complete → its work published), " +
			"due_to_located (its settle window over → published), located_to_scored (published → scorecard stored), " +
			"scored_to_stored (scored → the results stream's ack).",
		Buckets: []float64{.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60},
	}, []string{"step"})
	p.SettlerBacklog = f.NewGauge(prometheus.GaugeOpts{
		Name: "lkscore_settler_backlog_sessions", Help: "Sessions ready (facts complete, or settle window over) and not yet published, " +
			"being published included, at the settler's last pass (every 250 ms).",
	})
	p.SettlerBacklogAge = f.NewGauge(prometheus.GaugeOpts{
		Name: "lkscore_settler_backlog_age_seconds", Help: "How long the oldest of them has been ready, at the settler's last pass.",
	})
	p.Waiting = f.NewGauge(prometheus.GaugeOpts{
		Name: "lkscore_sessions_waiting_for_recording", Help: "Sessions whose job ended and whose recording upload has not come, " +
			"as this process's settler saw them since it started.",
	})
	p.WaitingAge = f.NewGauge(prometheus.GaugeOpts{
		Name: "lkscore_sessions_waiting_for_recording_seconds", Help: "How long the longest waiting of them has waited.",
	})
	p.RecordingsDeleted = f.NewCounterVec(prometheus.CounterOpts{
		Name: "lkscore_recordings_deleted_total", Help: "Sessions whose stored recording lkscore deleted, by reason (retention, metadata_only).",
	}, []string{"reason"})
	p.RecoveryRuns = f.NewCounterVec(prometheus.CounterOpts{
		Name: "lkscore_recovery_runs_total", Help: "Completed store sweeps and egress reconciles, by kind.",
	}, []string{"kind"})
}

// consumerMetrics registers the durable consumers' metrics.
func (p *Pipeline) consumerMetrics(f promauto.Factory) {
	p.Pending = f.NewGaugeVec(prometheus.GaugeOpts{
		Name: "lkscore_consumer_pending_messages", Help: "Messages not yet delivered to a durable consumer (its lag).",
	}, []string{"consumer"})
	p.ConsumerErrs = f.NewCounterVec(prometheus.CounterOpts{
		Name: "lkscore_consumer_errors_total", Help: "Errors fetching from or querying a durable consumer.",
	}, []string{"consumer"})
	p.AckPending = f.NewGaugeVec(prometheus.GaugeOpts{
		Name: "lkscore_consumer_ack_pending_messages", Help: "Messages delivered to a durable consumer and not yet acknowledged.",
	}, []string{"consumer"})
}

// alertMetrics registers regression history and alert delivery metrics.
func (p *Pipeline) alertMetrics(f promauto.Factory) {
	p.Alerts = f.NewCounterVec(prometheus.CounterOpts{
		Name: "lkscore_alerts_total", Help: "Regression alerts published, by kind (regression, drift, failures) and status (firing, resolved).",
	}, []string{"kind", "status"})
	p.Deliveries = f.NewCounterVec(prometheus.CounterOpts{
		Name: "lkscore_alert_deliveries_total",
		Help: "Alert deliveries by target (Alertmanager host, webhook name) and outcome (delivered, resent, retry, refused).",
	}, []string{"target", "outcome"})
	p.DeliveryDuration = f.NewHistogramVec(prometheus.HistogramOpts{
		Name: "lkscore_alert_delivery_duration_seconds", Help: "Time of one alert POST, by target.",
		Buckets: prometheus.ExponentialBuckets(0.005, 4, 7),
	}, []string{"target"})
	p.AgentSessions = f.NewCounterVec(prometheus.CounterOpts{
		Name: "lkscore_regression_sessions_total",
		Help: "Scorecards added to regression history, by agent and version (metrics.max_agents pairs per process, then other).",
	}, []string{"agent", "version"})
}

// AlertDelivery are the metrics of alert delivery.
type AlertDelivery struct {
	Deliveries *prometheus.CounterVec   // target, outcome
	Duration   *prometheus.HistogramVec // target
}

// AlertDelivery returns the alert delivery metrics.
func (m *Pipeline) AlertDelivery() AlertDelivery {
	return AlertDelivery{Deliveries: m.Deliveries, Duration: m.DeliveryDuration}
}
