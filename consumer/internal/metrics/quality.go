package metrics

import (
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"

	"github.com/lkscore/lkscore/scoring"
	"github.com/lkscore/lkscore/session"
)

// qualityMetrics put what lkscore measures on /metrics, for the Grafana a
// team already has: scorecards by verdict, close reason and agent, the score
// and the latencies. Cardinality is bounded: verdicts and close reasons are
// closed sets, and each process gives at most maxAgents agent names a label
// value of their own (metrics.max_agents); the rest count as "other".
type Quality struct {
	cards *prometheus.CounterVec // verdict, close_reason, agent
	score prometheus.Histogram
	e2e   prometheus.Histogram // the session's agent-reported e2e latency p50
	heard prometheus.Histogram // the session's heard latency p50 (stereo recording)
	// Usage and cost per call, by agent (bounded as cards are).
	tokens   *prometheus.HistogramVec // agent, direction (input, output)
	cost     *prometheus.HistogramVec // agent, currency
	unpriced *prometheus.CounterVec   // agent
	// Signal coverage, per SDK language and release: sessions, the
	// signals they had, where their close reason came from.
	sdkSessions *prometheus.CounterVec // sdk, sdk_version
	signals     *prometheus.CounterVec // sdk, sdk_version, signal
	sources     *prometheus.CounterVec // sdk, sdk_version, source

	agents   *LabelCap
	releases *LabelCap // (sdk, sdk_version) pairs with a series of their own
}

// maxReleases bounds the SDK releases with a series of their own per
// process; later ones count as "other".
const maxReleases = 24

// closeReasonSources are the close reason sources with a label value of
// their own (facts' Source* constants that resolve a close reason).
var closeReasonSources = map[string]bool{"summary": true, "otlp_span": true, "otlp_log": true, "otlp_log_implied": true,
	"job_status": true, "webhook_room": true, "absent": true}

func NewQuality(reg prometheus.Registerer) *Quality {
	f := promauto.With(reg)
	latency := []float64{0.25, 0.5, 0.75, 1, 1.5, 2, 3, 5, 8}
	return &Quality{
		cards: f.NewCounterVec(prometheus.CounterOpts{
			Name: "lkscore_scorecards_total",
			Help: "Scorecards published, by verdict, close reason and agent (metrics.max_agents names per process, then other).",
		}, []string{"verdict", "close_reason", "agent"}),
		score: f.NewHistogram(prometheus.HistogramOpts{
			Name: "lkscore_session_score", Help: "Overall score of each scored session (0–100).",
			Buckets: []float64{50, 60, 65, 70, 75, 80, 85, 90, 95, 100},
		}),
		e2e: f.NewHistogram(prometheus.HistogramOpts{
			Name: "lkscore_session_e2e_latency_seconds", Help: "Each scored session's median end-to-end response latency as the agent reported it.",
			Buckets: latency,
		}),
		heard: f.NewHistogram(prometheus.HistogramOpts{
			Name: "lkscore_session_heard_latency_seconds", Help: "Each scored session's median heard response latency, from the stereo recording.",
			Buckets: latency,
		}),
		tokens: f.NewHistogramVec(prometheus.HistogramOpts{
			Name: "lkscore_session_llm_tokens", Help: "Each scored session's LLM tokens (input, output), as the SDK's usage report says, by agent.",
			Buckets: prometheus.ExponentialBuckets(100, 2, 12),
		}, []string{"agent", "direction"}),
		cost: f.NewHistogramVec(prometheus.HistogramOpts{
			Name: "lkscore_session_cost", Help: "Each priced session's cost (scoring.pricing), in the table's currency, by agent.",
			Buckets: []float64{0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5},
		}, []string{"agent", "currency"}),
		unpriced: f.NewCounterVec(prometheus.CounterOpts{
			Name: "lkscore_sessions_unpriced_total",
			Help: "Scored sessions with a model the price table (scoring.pricing) has no price for, by agent: their cost is a floor.",
		}, []string{"agent"}),
		sdkSessions: f.NewCounterVec(prometheus.CounterOpts{
			Name: "lkscore_sessions_by_sdk_total",
			Help: "Scorecards by the agents SDK's language (python, nodejs, unknown) and release (24 per process, then other).",
		}, []string{"sdk", "sdk_version"}),
		signals: f.NewCounterVec(prometheus.CounterOpts{
			Name: "lkscore_session_signals_total",
			Help: "Scorecards whose session had a signal (recording, logs, traces, audio, close_reason), by SDK and release: " +
				"divided by lkscore_sessions_by_sdk_total, the share of sessions that had it.",
		}, []string{"sdk", "sdk_version", "signal"}),
		sources: f.NewCounterVec(prometheus.CounterOpts{
			Name: "lkscore_session_close_reason_sources_total",
			Help: "Scorecards by where their close reason came from (summary, otlp_span, otlp_log, otlp_log_implied, job_status, " +
				"webhook_room, absent, other), by SDK and release.",
		}, []string{"sdk", "sdk_version", "source"}),
		agents:   NewLabelCap(0),
		releases: NewLabelCap(maxReleases),
	}
}

// observeSignals counts card in the signal coverage metrics.
func (q *Quality) observeSignals(card *session.Scorecard) {
	sdk, version := "unknown", ""
	if s := card.Session.SDK; s != nil {
		switch s.Language {
		case "python", "nodejs":
			sdk, version = s.Language, s.Version
		case "":
		default:
			sdk, version = "other", s.Version
		}
	}
	labels := q.releases.Values(sdk, version)
	q.sdkSessions.WithLabelValues(labels...).Inc()
	for _, sig := range scoring.SignalsOf(card) {
		q.signals.WithLabelValues(labels[0], labels[1], sig).Inc()
	}
	src := card.Completion.CloseReasonSource
	if !closeReasonSources[src] {
		src = "other"
	}
	q.sources.WithLabelValues(labels[0], labels[1], src).Inc()
}

// Observe counts one published scorecard.
func (q *Quality) Observe(card *session.Scorecard) {
	q.cards.WithLabelValues(card.Overall.Verdict, card.Completion.CloseReason, q.agentLabel(card.Session.AgentName)).Inc()
	q.observeSignals(card)
	if card.Comparable() { // no score to observe
		q.score.Observe(card.Overall.Score)
	}
	if p50 := card.Metrics.E2ELatencyP50Ms; p50.Set {
		q.e2e.Observe(p50.V / 1000)
	}
	if a := card.Audio; a != nil && a.Refused == "" && len(a.Turns) > 0 {
		q.heard.Observe(float64(a.Metrics.HeardLatencyP50Ms) / 1000)
	}
	agent := q.agentLabel(card.Session.AgentName)
	if u := card.Usage; u != nil && u.Reported {
		q.tokens.WithLabelValues(agent, "input").Observe(float64(u.InputTokens.V))
		q.tokens.WithLabelValues(agent, "output").Observe(float64(u.OutputTokens.V))
	}
	if c := card.Cost; c != nil {
		q.cost.WithLabelValues(agent, c.Currency).Observe(c.Total)
		if len(c.Unpriced) > 0 {
			q.unpriced.WithLabelValues(agent).Inc()
		}
	}
}

// agentLabel is the agent's label value: its name while fewer than
// maxAgents names are known to this process, else "other".
func (q *Quality) agentLabel(name string) string {
	if name == "" {
		return "unknown"
	}
	return q.agents.Values(name)[0]
}

// SetMaxAgents sets metrics.max_agents.
func (q *Quality) SetMaxAgents(n int) { q.agents.SetMax(n) }
