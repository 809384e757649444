package scoring

import (
	"fmt"
	"testing"
)

// session200 is a 200-turn session with a tool call every fourth turn, an
// interruption every seventh and a handoff every fiftieth.
func session200() Session {
	items := conversation(200)
	var out []Item
	for i, it := range items {
		out = append(out, it)
		k := i / 2
		if it.Role == RoleUser && k%4 == 0 {
			out = append(out, toolCall(id("c", k), "lookup", `{"day": "friday"}`, it.CreatedAt+2.1), toolOutput(id("c", k), "lookup", k%20 == 0, it.CreatedAt+2.4))
		}
		if it.Role == RoleAssistant && k%7 == 0 {
			out[len(out)-1].Interrupted = true
		}
		if it.Role == RoleAssistant && k%50 == 49 {
			out = append(out, Item{ID: id("h", k), Type: TypeAgentHandoff, OldAgentID: "greeter", NewAgentID: "booking", CreatedAt: it.CreatedAt + 2.9})
		}
	}
	return Session{Key: "RM_b/AJ_b", CloseReason: "CR_PARTICIPANT_DISCONNECTED", Items: out}
}

// BenchmarkScore200Turns scores one 200-turn session (parsing excluded).
// Run it on one core: go test ./scoring -run '^$' -bench Score200 -benchmem -cpu 1
func BenchmarkScore200Turns(b *testing.B) {
	s := session200()
	sc, err := NewScorer(DefaultConfig())
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		_ = sc.Score(s)
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "sessions/s")
}

// benchRules are 20 rules like a team's: the five of examples/policies.yaml
// and fifteen more of the same kinds (latency budgets, required and
// forbidden tools, close reasons, confidence, handoffs, findings, tags).
func benchRules() []Rule {
	r := func(name, expr, sev string, cost float64, comp string) Rule {
		return Rule{Name: name, Expr: expr, Severity: sev, Cost: cost, Component: comp}
	}
	return []Rule{
		r("latency_budget", "has(metrics.e2e_latency_p95_ms) && metrics.e2e_latency_p95_ms > 2000", Critical, 20, ResponseLatency),
		r("confirmed", `!tools.called.exists(t, t == "send_confirmation")`, Warning, 30, ToolReliability),
		r("close_reason", `!(close_reason in ["CR_PARTICIPANT_DISCONNECTED", "CR_USER_INITIATED", "CR_COMPLETED"])`, Critical, 0, ""),
		r("confidence", "has(metrics.transcript_confidence_min) && metrics.transcript_confidence_min < 0.5", Warning, 10, TranscriptIntegrity),
		r("handoff", "size(handoffs) == 0", Warning, 0, ""),
		r("ttft", "has(metrics.ttft_p95_ms) && metrics.ttft_p95_ms > 1200", Warning, 5, ResponseLatency),
		r("ttfb", "has(metrics.ttfb_p99_ms) && metrics.ttfb_p99_ms > 900", Info, 0, ""),
		r("max_latency", "has(metrics.e2e_latency_max_ms) && metrics.e2e_latency_max_ms > 6000", Warning, 5, ResponseLatency),
		r("tool_errors", "metrics.tool_errors > 2", Warning, 10, ToolReliability),
		r("no_refund_tool", `tools.called.exists(t, t == "issue_refund") && agent != "billing"`, Critical, 0, ""),
		r("failed_lookup", `tools.failed.exists(t, t == "lookup")`, Info, 0, ""),
		r("unanswered_tools", "size(tools.unanswered) > 0", Warning, 5, ToolReliability),
		r("interruptions", "metrics.interruptions_per_min > 4.0", Warning, 5, TurnHandling),
		r("unanswered_turns", "metrics.unanswered_turns >= 2", Warning, 10, TurnHandling),
		r("short_call", "metrics.duration_s < 10.0 && close_reason == 'CR_USER_INITIATED'", Info, 0, ""),
		r("latency_component", "has(components.response_latency) && components.response_latency < 50.0", Warning, 0, ""),
		r("low_score_beta", `score < 70.0 && "beta" in tags`, Critical, 0, ""),
		r("silence_findings", `findings.exists(f, f == "long_silence")`, Info, 0, ""),
		r("sdk_old", `sdk_language == "nodejs" && sdk_version.startsWith("0.")`, Info, 0, ""),
		r("handoff_loop", "size(handoffs) > 3 && verdict != 'pass'", Warning, 0, ""),
	}
}

// BenchmarkRules scores the same sessions without rules and with 20, side
// by side: the difference is what rule evaluation costs. A 200-turn call
// and a 20-turn one (the field's short calls) — the share is largest for
// the short one. Run on one core:
// go test ./scoring -run '^$' -bench Rules -benchmem -cpu 1 -count 6
func BenchmarkRules(b *testing.B) {
	short := session200()
	short.Items = short.Items[:24]
	for _, s := range []struct {
		name string
		s    Session
	}{{"turns=200", session200()}, {"turns=20", short}} {
		for _, n := range []int{0, 20} {
			cfg := DefaultConfig()
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
