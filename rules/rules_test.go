package rules

import (
	"errors"
	"strings"
	"testing"

	"github.com/lkscore/lkscore/scoring"
	"github.com/lkscore/lkscore/session"
)

// FuzzRuleExpr: any text as a rule's expression either fails to compile
// with a *RuleError naming the rule, or compiles into a rule that, run on
// a session with tool calls, handoffs and measures, ends in a status
// (violated, passed or not evaluated) without panicking. The compile-time
// cost bound is what keeps a compiled rule from running long.
func FuzzRuleExpr(f *testing.F) {
	for _, seed := range []string{
		"has(metrics.e2e_latency_p95_ms) && metrics.e2e_latency_p95_ms > 2000",
		`!tools.called.exists(t, t == "send_confirmation")`,
		`!(close_reason in ["CR_PARTICIPANT_DISCONNECTED", "CR_USER_INITIATED"])`,
		"size(handoffs) == 0",
		"metrics.ttft_p95_ms > 1.0",
		`tools.called.exists(a, tools.called.exists(b, a == b))`,
		`tools.called.map(t, t + t).size() > 3`,
		`"x".matches("(a+)+$")`,
		`components.turn_handling < 50.0 || score < 10.0`,
		`findings.exists(f, f.startsWith("rule."))`,
		"metrics", "1/0 == 1", `int("x") == 1`, "", "((((", strings.Repeat("!", 300) + "true",
	} {
		f.Add(seed)
	}
	lat, conf := 1.2, 0.9
	s := scoring.Session{Identity: session.Identity{Key: "k", AgentName: "a"}, Close: session.Close{CloseReason: "CR_USER_INITIATED"}, Facts: &session.Facts{Tags: []string{"version:1", "beta"}}}
	for i := range 40 {
		s.Items = append(s.Items,
			scoring.Item{ID: "u", Type: scoring.TypeMessage, Role: scoring.RoleUser, Text: "hi", CreatedAt: float64(100 + 4*i), TranscriptConfidence: &conf},
			scoring.Item{ID: "a", Type: scoring.TypeMessage, Role: scoring.RoleAssistant, Text: "hello", CreatedAt: float64(102 + 4*i), HasMetrics: true, E2ELatency: &lat},
			scoring.Item{ID: "c", Type: scoring.TypeFunctionCall, CallID: string(rune('a' + i%26)), Name: "lookup", CreatedAt: float64(103 + 4*i)},
			scoring.Item{ID: "h", Type: scoring.TypeAgentHandoff, NewAgentID: "billing", CreatedAt: float64(103 + 4*i)})
	}
	f.Fuzz(func(t *testing.T, expr string) {
		cfg := scoring.DefaultConfig()
		cfg.Rules = []scoring.Rule{{Name: "fuzzed", Expr: expr, Severity: session.Warning}}
		sc, err := NewScorer(cfg)
		if err != nil {
			var re *scoring.RuleError
			if !errors.As(err, &re) || re.Name != "fuzzed" || !strings.Contains(err.Error(), "scoring.rules[0] (fuzzed)") {
				t.Fatalf("%q: %v is not a RuleError naming the rule", expr, err)
			}
			return
		}
		card := sc.Score(s)
		if len(card.Rules) != 1 {
			t.Fatalf("%q: %d rule results", expr, len(card.Rules))
		}
		switch card.Rules[0].Status {
		case session.RuleViolated, session.RulePassed, session.RuleNotEvaluated:
		default:
			t.Fatalf("%q: status %q", expr, card.Rules[0].Status)
		}
	})
}

// TestRuleVariablesInOrder: the variable indices name the declared
// variables.
func TestRuleVariablesInOrder(t *testing.T) {
	if len(ruleVariables) != nVars {
		t.Fatalf("%d variables, %d indices", len(ruleVariables), nVars)
	}
	for i, want := range map[int]string{varAgent: "agent", varCloseReasonSource: "close_reason_source", varTags: "tags",
		varSimulated: "simulated", varVerdict: "verdict", varMetrics: "metrics", varHandoffs: "handoffs"} {
		if ruleVariables[i] != want {
			t.Errorf("index %d is %s, want %s", i, ruleVariables[i], want)
		}
	}
}

// TestRulesOnUsageAndCost (issue 69): rules read the usage report's totals
// and the priced cost; a session without a report has no usage keys (a
// rule guarded with has() passes), and a typo'd key fails at load.
func TestRulesOnUsageAndCost(t *testing.T) {
	cfg := scoring.DefaultConfig()
	cfg.Pricing = &scoring.Pricing{Currency: "USD", Prices: []scoring.Price{{Provider: "openai", Model: "gpt-4o", OutputToken: 0.0001}}}
	cfg.Rules = []scoring.Rule{
		{Name: "token_budget", Expr: "has(usage.output_tokens) && usage.output_tokens > 4000", Severity: session.Warning},
		{Name: "cost_budget", Expr: "has(cost.total) && cost.total > 0.40", Severity: session.Warning},
	}
	sc, err := NewScorer(cfg)
	if err != nil {
		t.Fatal(err)
	}
	s := scoring.Session{Identity: session.Identity{Key: "k", AgentName: "a"}, Close: session.Close{CloseReason: "CR_USER_INITIATED"},
		Items: []scoring.Item{{ID: "u", Type: scoring.TypeMessage, Role: scoring.RoleUser, Text: "hi", CreatedAt: 1796319506}},
		Facts: &session.Facts{UsageReported: true, Usage: []session.ModelUsage{{Type: session.UsageLLM, Provider: "openai", Model: "gpt-4o",
			OutputTokens: session.Opt[int]{V: 5000, Set: true}}}}}
	card := sc.Score(s)
	if card.Rules[0].Status != session.RuleViolated || card.Rules[1].Status != session.RuleViolated {
		t.Errorf("5,000 output tokens at $0.50: %+v", card.Rules)
	}
	s.Facts = &session.Facts{}
	card = sc.Score(s)
	if card.Rules[0].Status != session.RulePassed || card.Rules[1].Status != session.RulePassed {
		t.Errorf("no usage report: %+v", card.Rules)
	}
	cfg.Rules = []scoring.Rule{{Name: "typo", Expr: "usage.output_tokns > 1", Severity: session.Warning}}
	if _, err := NewScorer(cfg); err == nil || !strings.Contains(err.Error(), `usage has no key "output_tokns"`) {
		t.Errorf("a typo'd usage key: %v", err)
	}
}
