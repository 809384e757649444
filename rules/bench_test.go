package rules

import (
	"fmt"
	"testing"

	"github.com/lkscore/lkscore/scoring"
	"github.com/lkscore/lkscore/session"
)

func f(v float64) *float64 { return &v }

// session200 is a 200-turn session with a tool call every fourth turn
// (one in twenty failing), an interruption every seventh and a handoff
// every fiftieth: the scoring package's BenchmarkScore200Turns session.
func session200() scoring.Session {
	var items []scoring.Item
	t := 1764417600.0
	for k := range 200 {
		id := fmt.Sprint(k)
		items = append(items,
			scoring.Item{ID: "u" + id, Type: scoring.TypeMessage, Role: scoring.RoleUser, Text: "hello", CreatedAt: t, TranscriptConfidence: f(0.95),
				HasMetrics: true, StartedSpeakingAt: f(t), StoppedSpeakingAt: f(t + 2), TranscriptionDelay: f(0.2), EndOfTurnDelay: f(0.5)},
			scoring.Item{ID: "a" + id, Type: scoring.TypeMessage, Role: scoring.RoleAssistant, Text: "hi there", CreatedAt: t + 2.5,
				HasMetrics: true, StartedSpeakingAt: f(t + 3), StoppedSpeakingAt: f(t + 5), E2ELatency: f(1), LLMNodeTTFT: f(0.4),
				TTSNodeTTFB: f(0.2), Interrupted: k%7 == 0})
		if k%4 == 0 {
			items = append(items,
				scoring.Item{ID: "c" + id, Type: scoring.TypeFunctionCall, CallID: "call" + id, Name: "lookup", Arguments: `{"day": "friday"}`, CreatedAt: t + 2.1},
				scoring.Item{ID: "o" + id, Type: scoring.TypeFunctionCallOutput, CallID: "call" + id, Name: "lookup", IsError: k%20 == 0, CreatedAt: t + 2.4})
		}
		if k%50 == 49 {
			items = append(items, scoring.Item{ID: "h" + id, Type: scoring.TypeAgentHandoff, OldAgentID: "greeter", NewAgentID: "booking", CreatedAt: t + 5.5})
		}
		t += 6
	}
	return scoring.Session{Identity: session.Identity{Key: "RM_b/AJ_b"}, Close: session.Close{CloseReason: "CR_PARTICIPANT_DISCONNECTED"}, Items: items}
}

// benchRules are 20 rules like a team's: the five of examples/policies.yaml
// and fifteen more of the same kinds (latency budgets, required and
// forbidden tools, close reasons, confidence, handoffs, findings, tags).
func benchRules() []scoring.Rule {
	r := func(name, expr, sev string, cost float64, comp string) scoring.Rule {
		return scoring.Rule{Name: name, Expr: expr, Severity: sev, Cost: cost, Component: comp}
	}
	return []scoring.Rule{
		r("latency_budget", "has(metrics.e2e_latency_p95_ms) && metrics.e2e_latency_p95_ms > 2000", session.Critical, 20, session.ResponseLatency),
		r("confirmed", `!tools.called.exists(t, t == "send_confirmation")`, session.Warning, 30, session.ToolReliability),
		r("close_reason", `!(close_reason in ["CR_PARTICIPANT_DISCONNECTED", "CR_USER_INITIATED", "CR_COMPLETED"])`, session.Critical, 0, ""),
		r("confidence", "has(metrics.transcript_confidence_min) && metrics.transcript_confidence_min < 0.5", session.Warning, 10, session.TranscriptIntegrity),
		r("handoff", "size(handoffs) == 0", session.Warning, 0, ""),
		r("ttft", "has(metrics.ttft_p95_ms) && metrics.ttft_p95_ms > 1200", session.Warning, 5, session.ResponseLatency),
		r("ttfb", "has(metrics.ttfb_p99_ms) && metrics.ttfb_p99_ms > 900", session.Info, 0, ""),
		r("max_latency", "has(metrics.e2e_latency_max_ms) && metrics.e2e_latency_max_ms > 6000", session.Warning, 5, session.ResponseLatency),
		r("tool_errors", "metrics.tool_errors > 2", session.Warning, 10, session.ToolReliability),
		r("no_refund_tool", `tools.called.exists(t, t == "issue_refund") && agent != "billing"`, session.Critical, 0, ""),
		r("failed_lookup", `tools.failed.exists(t, t == "lookup")`, session.Info, 0, ""),
		r("unanswered_tools", "size(tools.unanswered) > 0", session.Warning, 5, session.ToolReliability),
		r("interruptions", "metrics.interruptions_per_min > 4.0", session.Warning, 5, session.TurnHandling),
		r("unanswered_turns", "metrics.unanswered_turns >= 2", session.Warning, 10, session.TurnHandling),
		r("short_call", "metrics.duration_s < 10.0 && close_reason == 'CR_USER_INITIATED'", session.Info, 0, ""),
		r("latency_component", "has(components.response_latency) && components.response_latency < 50.0", session.Warning, 0, ""),
		r("low_score_beta", `score < 70.0 && "beta" in tags`, session.Critical, 0, ""),
		r("silence_findings", `findings.exists(f, f == "long_silence")`, session.Info, 0, ""),
		r("sdk_old", `sdk_language == "nodejs" && sdk_version.startsWith("0.")`, session.Info, 0, ""),
		r("handoff_loop", "size(handoffs) > 3 && verdict != 'pass'", session.Warning, 0, ""),
	}
}

// BenchmarkRules scores the same sessions without rules and with 20, side
// by side: the difference is what rule evaluation costs. A 200-turn call
// and a 20-turn one (the field's short calls) — the share is largest for
// the short one. Run on one core:
// go test ./rules -run '^$' -bench Rules -benchmem -cpu 1 -count 6
func BenchmarkRules(b *testing.B) {
	short := session200()
	short.Items = short.Items[:24]
	for _, s := range []struct {
		name string
		s    scoring.Session
	}{{"turns=200", session200()}, {"turns=20", short}} {
		for _, n := range []int{0, 20} {
			cfg := scoring.DefaultConfig()
			cfg.Rules = benchRules()[:n]
			sc, err := NewScorer(cfg)
			if err != nil {
				b.Fatal(err)
			}
			if got := len(sc.Score(s.s).Rules); got != n {
				b.Fatalf("%d rules evaluated, want %d", got, n)
			}
			b.Run(fmt.Sprintf("%s/rules=%d", s.name, n), func(b *testing.B) {
				b.ReportAllocs()
				for b.Loop() {
					_ = sc.Score(s.s)
				}
			})
		}
	}
}
