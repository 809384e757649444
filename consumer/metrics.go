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
			Help: "OTLP export requests accepted and discarded, by signal.",
		}, []string{"signal"}),
	}
}

// eventLabel keeps the event label's cardinality bounded.
func eventLabel(event string) string {
	if config.KnownEvent(event) {
		return event
	}
	return "other"
}
