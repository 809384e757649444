package scoring_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"math"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/lkscore/lkscore/config"
	"github.com/lkscore/lkscore/recording"
	"github.com/lkscore/lkscore/rules"
	"github.com/lkscore/lkscore/scoring"
	"github.com/lkscore/lkscore/session"
)

// heldOut is a session the example rules were not written against: the
// acceptance scenarios and the Python SDK's chat histories at three
// releases (consumer/testdata/agents-py, read from its sources), with the
// chat history's raw JSON for the test's own reading of what each rule
// should say.
type heldOut struct {
	name        string
	session     scoring.Session
	raw         []rawItem
	closeReason string
}

// rawItem is the test's own reading of a chat item, apart from lkscore's
// parser.
type rawItem struct {
	Type                 string   `json:"type"`
	Role                 string   `json:"role"`
	Name                 string   `json:"name"`
	NewAgentID           string   `json:"new_agent_id"`
	TranscriptConfidence *float64 `json:"transcript_confidence"`
	Metrics              *struct {
		E2E *float64 `json:"e2e_latency"`
	} `json:"metrics"`
}

func readRaw(t *testing.T, path string) []rawItem {
	t.Helper()
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	var h struct {
		Items []rawItem `json:"items"`
	}
	if err := json.Unmarshal(b, &h); err != nil {
		t.Fatal(err)
	}
	return h.Items
}

func heldOutSessions(t *testing.T) []heldOut {
	t.Helper()
	var out []heldOut
	dirs, _ := filepath.Glob("../scenarios/data/*")
	for _, dir := range dirs {
		s := sessionOf(t, dir)
		out = append(out, heldOut{name: filepath.Base(dir), session: s, raw: readRaw(t, filepath.Join(dir, "chat_history.json")),
			closeReason: s.CloseReason})
	}
	files, _ := filepath.Glob("../consumer/testdata/agents-py/chat_history_*.json")
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		chat, err := recording.ParseChatHistoryBytes(b, recording.DefaultLimits().Chat)
		if err != nil {
			t.Fatal(err)
		}
		// The SDK's close log names the reason; the chat history does not.
		s := (&recording.Session{Key: "py/" + filepath.Base(f), Chat: chat}).ScoringInput("file://"+f, "")
		s.CloseReason, s.CloseReasonSource = "CR_USER_INITIATED", "otlp_log"
		out = append(out, heldOut{name: filepath.Base(f), session: s, raw: readRaw(t, f), closeReason: s.CloseReason})
	}
	if len(out) < 10 {
		t.Fatalf("found %d sessions, want the 8 scenarios and 3 Python histories", len(out))
	}
	return out
}

// p95 by linear interpolation and by nearest rank: a session is only
// judged when both put it on the same side of the budget.
func p95(ms []float64) (interp, rank float64) {
	sort.Float64s(ms)
	pos := 0.95 * float64(len(ms)-1)
	lo := int(math.Floor(pos))
	hi := min(lo+1, len(ms)-1)
	interp = ms[lo] + (ms[hi]-ms[lo])*(pos-float64(lo))
	rank = ms[int(math.Ceil(0.95*float64(len(ms))))-1]
	return interp, rank
}

// expected is what each example rule should say about a session, read by
// the test from the raw chat history: violated, passed, or "" when the
// rule's when does not take the session.
func expected(t *testing.T, h heldOut, agent string) map[string]string {
	t.Helper()
	status := func(v bool) string {
		if v {
			return scoring.RuleViolated
		}
		return scoring.RulePassed
	}
	var e2e []float64
	minConf := math.Inf(1)
	var tools, handoffs []string
	for _, it := range h.raw {
		if it.Role == "assistant" && it.Metrics != nil && it.Metrics.E2E != nil {
			e2e = append(e2e, *it.Metrics.E2E*1000)
		}
		if it.Role == "user" && it.TranscriptConfidence != nil {
			minConf = math.Min(minConf, *it.TranscriptConfidence)
		}
		if it.Type == "function_call" {
			tools = append(tools, it.Name)
		}
		if it.Type == "agent_handoff" {
			handoffs = append(handoffs, it.NewAgentID)
		}
	}
	want := map[string]string{}
	normal := slices.Contains([]string{"CR_PARTICIPANT_DISCONNECTED", "CR_USER_INITIATED", "CR_COMPLETED"}, h.closeReason)
	if agent == "booking" {
		if len(e2e) == 0 {
			want["booking_latency_budget"] = scoring.RulePassed // has() guards it
		} else {
			a, b := p95(e2e)
			if (a > 2000) != (b > 2000) {
				t.Fatalf("%s: p95 %v / %v straddles the budget: pick another session", h.name, a, b)
			}
			want["booking_latency_budget"] = status(a > 2000)
		}
		if normal {
			want["booking_confirmed"] = status(!slices.Contains(tools, "send_confirmation"))
		}
	}
	want["allowed_close_reason"] = status(!slices.Contains([]string{"CR_PARTICIPANT_DISCONNECTED", "CR_USER_INITIATED", "CR_COMPLETED", "CR_TASK_COMPLETED"}, h.closeReason))
	want["transcript_confidence_floor"] = status(!math.IsInf(minConf, 1) && minConf < 0.5)
	if agent == "support" {
		want["support_handoff"] = status(len(handoffs) == 0)
	}
	return want
}

// TestPoliciesAndRulesOnHeldOutSessions scores sessions the example config
// (examples/policies.yaml, docs/policies.md) was not written against, as
// both agents, and checks every rule's result against the test's own
// reading of the chat history: each rule is violated by some session and
// passed by another, and each agent's policy changes what it should.
func TestPoliciesAndRulesOnHeldOutSessions(t *testing.T) {
	_, scorer := examplePolicies(t)
	seen := map[string]map[string]int{} // rule → status → count
	schema := compileSchema(t)
	for _, h := range heldOutSessions(t) {
		for _, agent := range []string{"booking", "support"} {
			s := h.session
			s.AgentName = agent
			card := scorer.Score(s)
			validate(t, schema, marshal(t, card))
			if card.Policy == nil || card.Policy.Name != agent || !strings.HasPrefix(card.Policy.Hash, "p") {
				t.Fatalf("%s as %s: policy %+v", h.name, agent, card.Policy)
			}
			want := expected(t, h, agent)
			got := map[string]scoring.RuleResult{}
			for _, r := range card.Rules {
				got[r.Name] = r
			}
			for name, w := range want {
				r, ok := got[name]
				if !ok {
					t.Errorf("%s as %s: rule %s not evaluated, want %s", h.name, agent, name, w)
					continue
				}
				if r.Status != w {
					t.Errorf("%s as %s: rule %s %s, want %s (values %+v, error %q)", h.name, agent, name, r.Status, w, r.Values, r.Error)
				}
				if seen[name] == nil {
					seen[name] = map[string]int{}
				}
				seen[name][r.Status]++
				checkViolation(t, h.name+" as "+agent, card, r)
			}
			for name := range got {
				if _, ok := want[name]; !ok {
					t.Errorf("%s as %s: rule %s evaluated though its when does not take the session", h.name, agent, name)
				}
			}
		}
	}
	for _, name := range []string{"booking_latency_budget", "booking_confirmed", "allowed_close_reason", "transcript_confidence_floor", "support_handoff"} {
		if seen[name][scoring.RuleViolated] == 0 || seen[name][scoring.RulePassed] == 0 {
			t.Errorf("rule %s: %v; want both a violation and a pass among the held-out sessions", name, seen[name])
		}
		t.Logf("rule %s: %v", name, seen[name])
	}
}

// checkViolation checks what a violated rule did to the scorecard: its
// finding with the values it saw, its cost, its severity's verdict.
func checkViolation(t *testing.T, name string, card scoring.Scorecard, r scoring.RuleResult) {
	t.Helper()
	if r.Status != scoring.RuleViolated {
		for _, c := range card.Components {
			for _, f := range c.Findings {
				if f.Code == scoring.RuleCodePrefix+r.Name {
					t.Errorf("%s: rule %s passed but left a finding", name, r.Name)
				}
			}
		}
		return
	}
	switch r.Severity {
	case scoring.Critical:
		if card.Overall.Verdict != scoring.Fail {
			t.Errorf("%s: critical rule %s violated, verdict %s", name, r.Name, card.Overall.Verdict)
		}
	case scoring.Warning:
		if card.Overall.Verdict == scoring.Pass {
			t.Errorf("%s: warning rule %s violated, verdict pass", name, r.Name)
		}
	}
	if r.Component == "" || r.Deduction == 0 {
		return
	}
	for _, c := range card.Components {
		for _, f := range c.Findings {
			if f.Code == scoring.RuleCodePrefix+r.Name {
				if c.Name != r.Component || f.Deduction != r.Deduction || !strings.Contains(f.Message, r.Values[0].Name+" = ") {
					t.Errorf("%s: finding %+v in %s for rule %+v", name, f, c.Name, r)
				}
				return
			}
		}
	}
	t.Errorf("%s: rule %s violated with cost %v, no finding", name, r.Name, r.Deduction)
}

// TestAgentPolicyChangesTheModel scores the same session with the default
// model and each agent's policy: booking's higher bar and support's
// weightless tools change the verdict and the overall score as the
// arithmetic says.
func TestAgentPolicyChangesTheModel(t *testing.T) {
	cfg, scorer := examplePolicies(t)
	s := sessionOf(t, "../scenarios/data/4_tool_trouble")
	s.AgentName = "other"
	def := scorer.Score(s)
	s.AgentName = "support"
	sup := scorer.Score(s)
	if def.Policy.Name != scoring.DefaultPolicy || sup.Policy.Name != "support" || def.Policy.Hash == sup.Policy.Hash {
		t.Fatalf("policies %+v %+v", def.Policy, sup.Policy)
	}
	// Support's tools weigh nothing: the overall is the mean of the other
	// three measured components.
	var sum, n float64
	for _, c := range sup.Components {
		if c.Name != scoring.ToolReliability && c.Verdict != scoring.NotMeasured {
			sum, n = sum+c.Score, n+1
		}
		if c.Name == scoring.ToolReliability && c.Weight != 0 {
			t.Errorf("support's tool weight %v", c.Weight)
		}
	}
	if want := math.Round(sum/n*100) / 100; sup.Overall.Score != want {
		t.Errorf("support overall %v, want %v", sup.Overall.Score, want)
	}
	if def.Overall.Score >= sup.Overall.Score {
		t.Errorf("tool trouble: default %v should score below support %v (its failed tools count)", def.Overall.Score, sup.Overall.Score)
	}
	// Booking inherits what it does not override, and its bar is 85.
	b := cfg.Agents["booking"]
	if b.Turns != cfg.Turns || b.Weights != cfg.Weights || b.Verdict.Pass != 85 || b.Latency.E2EGoodMs != 1200 ||
		b.Latency.TTFTGoodMs != cfg.Latency.TTFTGoodMs {
		t.Errorf("booking's policy does not start from the scoring section: %+v", b.Config)
	}
}

// TestPolicyMatch: an agent's policy with a match takes only the sessions
// it names (a tag, or a version as the regression detector reads it); the
// others get the default.
func TestPolicyMatch(t *testing.T) {
	cfg := scoring.DefaultConfig()
	p := scoring.AgentPolicy{Config: scoring.DefaultConfig(), Match: scoring.Match{Tags: []string{"beta"}, Versions: []string{"2.1"}}}
	p.Verdict.Pass = 90
	cfg.Agents = map[string]scoring.AgentPolicy{"booking": p}
	scorer, err := rules.NewScorer(cfg)
	if err != nil {
		t.Fatal(err)
	}
	s := sessionOf(t, "../scenarios/data/1_clean_call")
	s.AgentName = "booking"
	for _, c := range []struct {
		tags       []string
		deployment string
		want       string
	}{
		{[]string{"beta", "version:2.1"}, "", "booking"},
		{[]string{"beta"}, "2.1", "booking"}, // the deployment id is the version without a tag
		{[]string{"beta", "version:2.0"}, "2.1", scoring.DefaultPolicy},
		{[]string{"version:2.1"}, "", scoring.DefaultPolicy},
		{nil, "", scoring.DefaultPolicy},
	} {
		s.Facts = &scoring.Facts{Tags: c.tags, DeploymentID: c.deployment}
		if got := scorer.Score(s).Policy.Name; got != c.want {
			t.Errorf("tags %v deployment %q: policy %s, want %s", c.tags, c.deployment, got, c.want)
		}
	}
}

// TestRuleTyposFailNamingTheRule: every way a rule can be wrong is a config
// error naming the rule and where in its expression.
func TestRuleTyposFailNamingTheRule(t *testing.T) {
	for _, c := range []struct {
		rule scoring.Rule
		want []string
	}{
		{scoring.Rule{Name: "p95", Expr: "metrics.e2e_latency_p95ms > 1500", Severity: "warning"},
			[]string{"scoring.rules[0] (p95)", "line 1, column 8", `metrics has no key "e2e_latency_p95ms"`, `did you mean "e2e_latency_p95_ms"`}},
		{scoring.Rule{Name: "idx", Expr: `components["turn_handlin"] < 50.0`, Severity: "info"},
			[]string{"(idx)", `components has no key "turn_handlin"`}},
		{scoring.Rule{Name: "undeclared", Expr: "close_reasn == 'CR_ERROR'", Severity: "critical"},
			[]string{"(undeclared)", "line 1, column 1", "undeclared reference to 'close_reasn'"}},
		{scoring.Rule{Name: "syntax", Expr: "score >", Severity: "info"}, []string{"(syntax)", "line 1"}},
		{scoring.Rule{Name: "notbool", Expr: "score + 1.0", Severity: "info"}, []string{"(notbool)", "must be true or false"}},
		{scoring.Rule{Name: "types", Expr: "agent > 3", Severity: "info"}, []string{"(types)", "no matching overload"}},
		{scoring.Rule{Name: "sev", Expr: "true", Severity: "high"}, []string{"(sev)", "severity"}},
		{scoring.Rule{Name: "nocomp", Expr: "true", Severity: "info", Cost: 5}, []string{"(nocomp)", "names the component"}},
		{scoring.Rule{Name: "bad name!", Expr: "true", Severity: "info"}, []string{"(bad name!)", "name"}},
		{scoring.Rule{Name: "long", Expr: strings.Repeat("true && ", 600) + "true", Severity: "info"}, []string{"(long)", "at most 4096"}},
	} {
		cfg := scoring.DefaultConfig()
		cfg.Rules = []scoring.Rule{c.rule}
		err := rules.Validate(cfg)
		if err == nil {
			t.Errorf("rule %q accepted", c.rule.Expr)
			continue
		}
		var re *scoring.RuleError
		if !errors.As(err, &re) {
			t.Errorf("rule %q: %v is not a *scoring.RuleError", c.rule.Name, err)
		}
		for _, w := range c.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("rule %q: error %q does not say %q", c.rule.Name, err, w)
			}
		}
		if _, err := rules.NewScorer(cfg); err == nil {
			t.Errorf("NewScorer accepted rule %q", c.rule.Name)
		}
	}
}

// TestRulesAreBounded: CEL's cost estimate bounds every rule on the
// largest session lkscore parses: a comprehension inside another over the
// tool calls could run for hours on 100,000 items, so it is refused when
// the config loads, naming the rule; a single pass over them is accepted,
// and a string longer than the estimate's bound is cut before a rule sees it.
func TestRulesAreBounded(t *testing.T) {
	cfg := scoring.DefaultConfig()
	cfg.Rules = []scoring.Rule{{Name: "cubic", Severity: "critical",
		Expr: `tools.called.exists(a, tools.called.exists(b, tools.called.exists(c, a + b + c == "never")))`}}
	err := rules.Validate(cfg)
	if err == nil || !strings.Contains(err.Error(), "(cubic)") || !strings.Contains(err.Error(), "over the limit") {
		t.Fatalf("cubic rule: %v", err)
	}
	cfg.Rules = []scoring.Rule{{Name: "linear", Severity: "critical", Expr: `tools.called.exists(t, t.startsWith("x"))`}}
	scorer, err := rules.NewScorer(cfg)
	if err != nil {
		t.Fatalf("a single pass over the tool calls refused: %v", err)
	}
	long := "x" + strings.Repeat("é", 300)
	s := scoring.Session{Identity: session.Identity{Key: "k", AgentName: "a"}, Close: session.Close{CloseReason: "CR_USER_INITIATED"}, Items: []scoring.Item{{ID: "c", Type: scoring.TypeFunctionCall, CallID: "c1", Name: long}}}
	card := scorer.Score(s)
	if len(card.Rules) != 1 || card.Rules[0].Status != scoring.RuleViolated {
		t.Fatalf("rules %+v", card.Rules)
	}
	if v := card.Rules[0].Values[0].Value; len(v) > 300 || !strings.HasPrefix(v, `["xé`) {
		t.Errorf("the long name was not cut: %d bytes", len(v))
	}
}

// TestRulesCannotReachOut: the rules' language has no clock, no file and
// no network: such calls do not compile.
func TestRulesCannotReachOut(t *testing.T) {
	for _, expr := range []string{"now() > timestamp('2026-01-01T00:00:00Z')", "file('/etc/passwd') == ''", "http.get('x') == ''", "env('HOME') == ''"} {
		cfg := scoring.DefaultConfig()
		cfg.Rules = []scoring.Rule{{Name: "out", Expr: expr, Severity: "info"}}
		if err := rules.Validate(cfg); err == nil {
			t.Errorf("%s compiled", expr)
		}
	}
}

// examplePolicies is a scorer of examples/policies.yaml.
func examplePolicies(t *testing.T) (scoring.Config, *scoring.Scorer) {
	t.Helper()
	cfg, err := config.LoadScoring("../examples/policies.yaml")
	if err != nil {
		t.Fatal(err)
	}
	scorer, err := rules.NewScorer(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return cfg, scorer
}

// TestRuleScorecardsDeterministic: the same session with the same policy
// gives the same bytes, from two scorers (two worker replicas) and from
// one scorer many times over, concurrently.
func TestRuleScorecardsDeterministic(t *testing.T) {
	// Two scorers from two loads of the config: two worker replicas.
	_, a := examplePolicies(t)
	_, b := examplePolicies(t)
	if a.Version() != b.Version() {
		t.Fatalf("versions %s %s", a.Version(), b.Version())
	}
	for _, h := range heldOutSessions(t) {
		s := h.session
		s.AgentName = "booking"
		first := marshal(t, a.Score(s))
		done := make(chan []byte, 8)
		for range 8 {
			go func() { done <- marshal(t, b.Score(s)) }()
		}
		for range 8 {
			if got := <-done; !bytes.Equal(got, first) {
				t.Fatalf("%s: scorecards differ between scorers:\n%s\n%s", h.name, first, got)
			}
		}
	}
}

// TestRuleSeesEveryMetric: a rule that walks the metrics map (no key
// named) sees every metric, even when the other rules name only one.
func TestRuleSeesEveryMetric(t *testing.T) {
	cfg := scoring.DefaultConfig()
	cfg.Rules = []scoring.Rule{
		{Name: "one", Expr: "has(metrics.ttft_p95_ms) && metrics.ttft_p95_ms > 100000.0", Severity: "info"},
		{Name: "walks", Expr: `metrics.exists(k, k == "tool_calls")`, Severity: "info"},
		{Name: "size", Expr: "size(metrics) >= 10", Severity: "info"},
	}
	scorer, err := rules.NewScorer(cfg)
	if err != nil {
		t.Fatal(err)
	}
	card := scorer.Score(sessionOf(t, "../scenarios/data/1_clean_call"))
	got := map[string]string{}
	for _, r := range card.Rules {
		got[r.Name] = r.Status
	}
	if got["one"] != scoring.RulePassed || got["walks"] != scoring.RuleViolated || got["size"] != scoring.RuleViolated {
		t.Errorf("rules %v", got)
	}
}
