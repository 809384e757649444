package metrics

import (
	"fmt"
	"slices"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	dto "github.com/prometheus/client_model/go"

	"github.com/lkscore/lkscore/scoring"
	"github.com/lkscore/lkscore/session"
)

// TestLabelCap: the first max distinct values (or tuples) keep their own
// series, later ones are "other", and a value given out stays given out,
// also after the bound is lowered.
func TestLabelCap(t *testing.T) {
	t.Parallel()
	c := NewLabelCap(2)
	for _, tc := range []struct {
		in, want []string
	}{
		{[]string{"booking", "1.0"}, []string{"booking", "1.0"}},
		{[]string{"support", "2.0"}, []string{"support", "2.0"}},
		{[]string{"booking", "1.1"}, []string{"other", "other"}}, // a third tuple
		{[]string{"booking", "1.0"}, []string{"booking", "1.0"}}, // already given out
	} {
		if got := c.Values(tc.in...); !slices.Equal(got, tc.want) {
			t.Errorf("Values(%v) = %v, want %v", tc.in, got, tc.want)
		}
	}
	c.SetMax(0)
	if got := c.Values("support", "2.0"); !slices.Equal(got, []string{"support", "2.0"}) {
		t.Errorf("a value given out before the bound was lowered: %v", got)
	}
	if got := c.Values("new", "x"); !slices.Equal(got, []string{"other", "other"}) {
		t.Errorf("a new value under bound 0: %v", got)
	}
}

// TestQualityObserve: every scorecard is counted by its verdict (unscored
// included, as its own class); only a comparable one's score goes into
// the score histogram; agent names beyond metrics.max_agents count as
// other, a card without one as unknown.
func TestQualityObserve(t *testing.T) {
	t.Parallel()
	reg := prometheus.NewRegistry()
	q := NewQuality(reg)
	q.SetMaxAgents(1)
	f := func(v float64) *float64 { return &v }
	talk := []scoring.Item{
		{ID: "u", Type: scoring.TypeMessage, Role: scoring.RoleUser, Text: "hi", CreatedAt: 1, TranscriptConfidence: f(0.9)},
		{ID: "a", Type: scoring.TypeMessage, Role: scoring.RoleAssistant, Text: "hello", CreatedAt: 2, HasMetrics: true, E2ELatency: f(0.8)},
	}
	cfg := scoring.DefaultConfig()
	scored := scoring.Score(scoring.Session{Identity: session.Identity{Key: "RM_a/AJ", AgentName: "booking"}, Close: session.Close{CloseReason: "CR_USER_INITIATED"}, Items: talk}, cfg)
	unscored := scoring.Score(scoring.Session{Identity: session.Identity{Key: "RM_b/AJ", AgentName: "support"}, Close: session.Close{CloseReason: "CR_USER_INITIATED"}}, cfg)
	silent := scoring.Score(scoring.Session{Identity: session.Identity{Key: "RM_c/AJ"}, Close: session.Close{CloseReason: "CR_USER_INITIATED"}, Items: talk[1:]}, cfg)
	for _, c := range []*session.Scorecard{&scored, &unscored, &silent} {
		q.Observe(c)
	}
	for _, tc := range []struct {
		verdict, agent string
	}{{scored.Overall.Verdict, "booking"}, {session.Unscored, "other"}, {session.Warn, "unknown"}} {
		if v := testutil.ToFloat64(q.cards.WithLabelValues(tc.verdict, "CR_USER_INITIATED", tc.agent)); v != 1 {
			t.Errorf("lkscore_scorecards_total{verdict=%q,agent=%q} = %v, want 1", tc.verdict, tc.agent, v)
		}
	}
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		switch mf.GetName() {
		case "lkscore_session_score":
			h := mf.GetMetric()[0].GetHistogram()
			if h.GetSampleCount() != 1 || h.GetSampleSum() != scored.Overall.Score {
				t.Errorf("score histogram: %d scores summing %v; want the scored session's %v alone", h.GetSampleCount(), h.GetSampleSum(), scored.Overall.Score)
			}
		case "lkscore_session_e2e_latency_seconds":
			if n := mf.GetMetric()[0].GetHistogram().GetSampleCount(); n != 2 {
				t.Errorf("e2e histogram: %d sessions, want the 2 that reported e2e_latency", n)
			}
		}
	}
}

// TestSignalCoverageBounded: each scorecard counts once in its SDK
// release's sessions, once per signal it had, once for its close reason's
// source; past maxReleases releases, and for an unknown source, the label
// value is "other", so an agent cannot grow the series without bound.
func TestSignalCoverageBounded(t *testing.T) {
	t.Parallel()
	q := NewQuality(prometheus.NewRegistry())
	card := func(lang, version, source string, inputs ...string) *session.Scorecard {
		c := &session.Scorecard{Inputs: inputs}
		if lang != "" {
			c.Session.SDK = &session.SDKRef{Language: lang, Version: version}
		}
		c.Completion.CloseReasonSource = source
		return c
	}
	q.Observe(card("nodejs", "1.9.0", "otlp_log", session.InputRecording, session.InputLogs, session.InputTraces))
	q.Observe(card("nodejs", "1.9.0", "webhook_room", session.InputRecording))
	q.Observe(card("", "", "absent", session.InputRecording))
	q.Observe(card("nodejs", "1.9.0", "made_up_source", session.InputRecording))
	for _, tc := range []struct {
		vec    *prometheus.CounterVec
		labels []string
		want   float64
	}{
		{q.sdkSessions, []string{"nodejs", "1.9.0"}, 3},
		{q.signals, []string{"nodejs", "1.9.0", scoring.SignalRecording}, 3},
		{q.signals, []string{"nodejs", "1.9.0", scoring.SignalLogs}, 1},
		{q.signals, []string{"nodejs", "1.9.0", scoring.SignalCloseReason}, 3},
		{q.sources, []string{"nodejs", "1.9.0", "otlp_log"}, 1},
		{q.sources, []string{"nodejs", "1.9.0", "other"}, 1},
		{q.sdkSessions, []string{"unknown", ""}, 1},
		{q.signals, []string{"unknown", "", scoring.SignalCloseReason}, 0},
	} {
		if v := testutil.ToFloat64(tc.vec.WithLabelValues(tc.labels...)); v != tc.want {
			t.Errorf("%v = %v, want %v", tc.labels, v, tc.want)
		}
	}
	for i := range 2 * maxReleases {
		q.Observe(card("python", fmt.Sprintf("1.%d.0", i), "summary", session.InputRecording))
	}
	if v := testutil.ToFloat64(q.sdkSessions.WithLabelValues("other", "other")); v != maxReleases+2 {
		t.Errorf("releases past the bound: %v counted as other, want %d", v, maxReleases+2)
	}
}

// TestUsageAndCostMetrics (issue 69): a session's tokens and cost are
// observed by agent; one with an unpriced model is counted as such; one
// with no usage report observes no tokens (not zeros).
func TestUsageAndCostMetrics(t *testing.T) {
	q := NewQuality(prometheus.NewRegistry())
	q.SetMaxAgents(10)
	card := session.Scorecard{Session: session.SessionRef{Identity: session.Identity{AgentName: "booking"}},
		Usage: &session.Usage{Reported: true, InputTokens: session.Opt[int]{V: 12000, Set: true}, OutputTokens: session.Opt[int]{V: 800, Set: true}},
		Cost:  &session.Cost{Currency: "USD", Total: 0.012, Unpriced: []string{"livekit/turn-detector"}}}
	q.Observe(&card)
	q.Observe(&session.Scorecard{Session: card.Session, Usage: &session.Usage{}}) // not reported
	if n := testutil.CollectAndCount(q.tokens); n != 2 {
		t.Errorf("%d token series, want input and output of booking", n)
	}
	if v := testutil.ToFloat64(q.unpriced.WithLabelValues("booking")); v != 1 {
		t.Errorf("unpriced sessions %v, want 1", v)
	}
	h := &dto.Metric{}
	_ = q.tokens.WithLabelValues("booking", "output").(prometheus.Histogram).Write(h)
	if c, s := h.GetHistogram().GetSampleCount(), h.GetHistogram().GetSampleSum(); c != 1 || s != 800 {
		t.Errorf("output tokens: %d observations summing %v; the unreported session must not count", c, s)
	}
}
