package metrics

import (
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"

	"github.com/lkscore/lkscore/scoring"
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

	agents *LabelCap
}

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
		agents: NewLabelCap(0),
	}
}

// Observe counts one published scorecard.
func (q *Quality) Observe(card *scoring.Scorecard) {
	q.cards.WithLabelValues(card.Overall.Verdict, card.Completion.CloseReason, q.agentLabel(card.Session.AgentName)).Inc()
	if card.Comparable() { // no score to observe
		q.score.Observe(card.Overall.Score)
	}
	if p50 := card.Metrics.E2ELatencyP50Ms; p50.Set {
		q.e2e.Observe(p50.V / 1000)
	}
	if a := card.Audio; a != nil && a.Refused == "" && len(a.Turns) > 0 {
		q.heard.Observe(float64(a.Metrics.HeardLatencyP50Ms) / 1000)
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
