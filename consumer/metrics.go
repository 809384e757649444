package consumer

import (
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"

	"github.com/lkscore/lkscore/config"
)

// metrics are ingest's Prometheus metrics. A nil Registerer gives working,
// unregistered metrics (promauto.With(nil)).
type metrics struct {
	requests       *prometheus.CounterVec
	webhookEvents  *prometheus.CounterVec
	rejected       *prometheus.CounterVec
	publishLatency *prometheus.HistogramVec
	bytesStored    *prometheus.CounterVec
	otlpDiscarded  *prometheus.CounterVec
	otlpFacts      *prometheus.CounterVec
	uploadsWaiting prometheus.Gauge
}

func newMetrics(reg prometheus.Registerer) *metrics {
	f := promauto.With(reg)
	return &metrics{
		requests: f.NewCounterVec(prometheus.CounterOpts{
			Name: "lkscore_http_requests_total",
			Help: "HTTP requests to the ingest server by endpoint and outcome.",
		}, []string{"endpoint", "outcome"}),
		webhookEvents: f.NewCounterVec(prometheus.CounterOpts{
			Name: "lkscore_webhook_events_total",
			Help: "Verified webhook events by event name and outcome (stored, duplicate, ignored, unavailable).",
		}, []string{"event", "outcome"}),
		rejected: f.NewCounterVec(prometheus.CounterOpts{
			Name: "lkscore_http_rejected_total",
			Help: "Requests refused by endpoint and reason.",
		}, []string{"endpoint", "reason"}),
		publishLatency: f.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "lkscore_nats_publish_duration_seconds",
			Help:    "Time from publish to JetStream acknowledgement, by stream.",
			Buckets: []float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5},
		}, []string{"stream"}),
		bytesStored: f.NewCounterVec(prometheus.CounterOpts{
			Name: "lkscore_collector_bytes_stored_total",
			Help: "Bytes of recording uploads stored, by part.",
		}, []string{"part"}),
		otlpDiscarded: f.NewCounterVec(prometheus.CounterOpts{
			Name: "lkscore_collector_otlp_discarded_total",
			Help: "OTLP export requests accepted and discarded (metrics), by signal.",
		}, []string{"signal"}),
		otlpFacts: f.NewCounterVec(prometheus.CounterOpts{
			Name: "lkscore_otlp_facts_total",
			Help: "Session facts read from OTLP logs and traces (before deduplication), by signal.",
		}, []string{"signal"}),
		uploadsWaiting: f.NewGauge(prometheus.GaugeOpts{
			Name: "lkscore_collector_uploads_waiting",
			Help: "Recording uploads waiting for one of http.max_inflight_uploads slots.",
		}),
	}
}

// eventLabel keeps the event label's cardinality bounded.
func eventLabel(event string) string {
	if config.KnownEvent(event) {
		return event
	}
	return "other"
}

// pipelineMetrics are the locator's and workers' metrics, per stage.
type pipelineMetrics struct {
	received          *prometheus.CounterVec   // stage
	done              *prometheus.CounterVec   // stage, outcome
	retried           *prometheus.CounterVec   // stage, reason
	deadLettered      *prometheus.CounterVec   // stage, reason
	sessions          *prometheus.CounterVec   // close_reason, selected
	duration          *prometheus.HistogramVec // stage
	pending           *prometheus.GaugeVec     // consumer
	ackPending        *prometheus.GaugeVec     // consumer
	recoveryRuns      *prometheus.CounterVec   // kind: sweep, reconcile
	consumerErrs      *prometheus.CounterVec   // consumer
	stalled           *prometheus.GaugeVec     // stage, consumer
	dependencyUp      *prometheus.GaugeVec     // dependency: store, nats
	recordingsDeleted *prometheus.CounterVec   // reason: retention, metadata_only
	alerts            *prometheus.CounterVec   // kind, status
	deliveries        *prometheus.CounterVec   // target, outcome
	deliveryDuration  *prometheus.HistogramVec // target
	agentSessions     *prometheus.CounterVec   // agent, version
	storeNotShared    prometheus.Counter
	quality           *qualityMetrics
}

func newPipelineMetrics(reg prometheus.Registerer) *pipelineMetrics {
	f := promauto.With(reg)
	return &pipelineMetrics{
		received: f.NewCounterVec(prometheus.CounterOpts{
			Name: "lkscore_pipeline_received_total", Help: "Messages delivered to a pipeline stage (redeliveries included).",
		}, []string{"stage"}),
		done: f.NewCounterVec(prometheus.CounterOpts{
			Name: "lkscore_pipeline_done_total", Help: "Messages a stage finished with, by outcome.",
		}, []string{"stage", "outcome"}),
		retried: f.NewCounterVec(prometheus.CounterOpts{
			Name: "lkscore_pipeline_retried_total", Help: "Messages handed back for a delayed retry, by reason.",
		}, []string{"stage", "reason"}),
		quality: newQualityMetrics(reg),
		storeNotShared: f.NewCounter(prometheus.CounterOpts{
			Name: "lkscore_store_not_shared_total",
			Help: "Upload notices from an ingest process whose recording store this worker cannot read (dead-lettered store_not_shared).",
		}),
		deadLettered: f.NewCounterVec(prometheus.CounterOpts{
			Name: "lkscore_pipeline_dead_lettered_total", Help: "Messages dead-lettered, by stage and reason.",
		}, []string{"stage", "reason"}),
		sessions: f.NewCounterVec(prometheus.CounterOpts{
			Name: "lkscore_sessions_located_total",
			Help: "Session work items published by close reason; selected=false when this deployment's pool does not score that reason " +
				"(the stream keeps them).",
		}, []string{"close_reason", "selected"}),
		duration: f.NewHistogramVec(prometheus.HistogramOpts{
			Name: "lkscore_pipeline_duration_seconds", Help: "Time to process one message, by stage.",
			Buckets: []float64{.001, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30},
		}, []string{"stage"}),
		pending: f.NewGaugeVec(prometheus.GaugeOpts{
			Name: "lkscore_consumer_pending_messages", Help: "Messages not yet delivered to a durable consumer (its lag).",
		}, []string{"consumer"}),
		recoveryRuns: f.NewCounterVec(prometheus.CounterOpts{
			Name: "lkscore_recovery_runs_total", Help: "Completed store sweeps and egress reconciles, by kind.",
		}, []string{"kind"}),
		consumerErrs: f.NewCounterVec(prometheus.CounterOpts{
			Name: "lkscore_consumer_errors_total", Help: "Errors fetching from or querying a durable consumer.",
		}, []string{"consumer"}),
		stalled: f.NewGaugeVec(prometheus.GaugeOpts{
			Name: "lkscore_stage_stalled", Help: "1 while a stage has work pending and has settled nothing for pipeline.stall_after.",
		}, []string{"stage", "consumer"}),
		dependencyUp: f.NewGaugeVec(prometheus.GaugeOpts{
			Name: "lkscore_dependency_up", Help: "1 while the worker's dependency (store, nats) is up; the pipeline pauses while one is down.",
		}, []string{"dependency"}),
		recordingsDeleted: f.NewCounterVec(prometheus.CounterOpts{
			Name: "lkscore_recordings_deleted_total", Help: "Sessions whose stored recording lkscore deleted, by reason (retention, metadata_only).",
		}, []string{"reason"}),
		alerts: f.NewCounterVec(prometheus.CounterOpts{
			Name: "lkscore_alerts_total", Help: "Regression alerts published, by kind (regression, drift, failures) and status (firing, resolved).",
		}, []string{"kind", "status"}),
		deliveries: f.NewCounterVec(prometheus.CounterOpts{
			Name: "lkscore_alert_deliveries_total",
			Help: "Alert deliveries by target (Alertmanager host, webhook name) and outcome (delivered, resent, retry, refused).",
		}, []string{"target", "outcome"}),
		deliveryDuration: f.NewHistogramVec(prometheus.HistogramOpts{
			Name: "lkscore_alert_delivery_duration_seconds", Help: "Time of one alert POST, by target.",
			Buckets: prometheus.ExponentialBuckets(0.005, 4, 7),
		}, []string{"target"}),
		agentSessions: f.NewCounterVec(prometheus.CounterOpts{
			Name: "lkscore_regression_sessions_total", Help: "Scorecards added to regression history, by agent and version.",
		}, []string{"agent", "version"}),
		ackPending: f.NewGaugeVec(prometheus.GaugeOpts{
			Name: "lkscore_consumer_ack_pending_messages", Help: "Messages delivered to a durable consumer and not yet acknowledged.",
		}, []string{"consumer"}),
	}
}
