package scoring

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
)

// Rule is a team's own check on a scored session (scoring.rules,
// docs/policies.md): an expression over the session's measures and facts
// that is true when the session violates it. Scoring does not read the
// expression: a RuleEngine compiles and evaluates it (package rules, CEL).
type Rule struct {
	// Name names the rule in findings (code "rule.<name>") and alerts.
	Name string `yaml:"name" json:"name"`
	// When narrows the sessions the rule looks at.
	When When `yaml:"when" json:"when"`
	// Expr is true when the session violates the rule.
	Expr string `yaml:"expr" json:"expr"`
	// Severity is info, warning (the verdict is at most warn) or critical
	// (the verdict is fail).
	Severity string `yaml:"severity" json:"severity"`
	// Cost is the points a violation deducts from Component (0–100).
	Cost float64 `yaml:"cost" json:"cost"`
	// Component takes the finding and its cost; empty: the finding is the
	// rule's alone (no cost).
	Component string `yaml:"component" json:"component,omitempty"`
	// Message says what a violation means, for the finding.
	Message string `yaml:"message" json:"message,omitempty"`
}

// When selects the sessions a rule looks at: each list that is not empty
// must match (any of its entries).
type When struct {
	Agents       []string `yaml:"agents" json:"agents,omitempty"`
	Versions     []string `yaml:"versions" json:"versions,omitempty"`
	CloseReasons []string `yaml:"close_reasons" json:"close_reasons,omitempty"`
	Tags         []string `yaml:"tags" json:"tags,omitempty"`
}

// RuleCodePrefix starts the code of a violated rule's finding.
const RuleCodePrefix = "rule."

// MaxRuleExprBytes bounds a rule's expression.
const MaxRuleExprBytes = 4096

// RuleComponents are the components a rule's cost can come from.
var RuleComponents = []string{TurnHandling, TranscriptIntegrity, ToolReliability, ResponseLatency}

// RuleError is a rule the config cannot use: its index and name, and
// where in its expression the problem is (line and column from 1, 0 when
// the problem is not in the expression).
type RuleError struct {
	Index        int
	Name         string
	Line, Column int
	Err          error
}

func (e *RuleError) Error() string {
	at := ""
	if e.Line > 0 {
		at = fmt.Sprintf(" line %d, column %d:", e.Line, e.Column)
	}
	return fmt.Sprintf("scoring.rules[%d] (%s):%s %v", e.Index, e.Name, at, e.Err)
}

func (e *RuleError) Unwrap() error { return e.Err }

// validateRules checks what scoring itself reads of the rules (names,
// severities, costs, components, the expression's size), every problem at
// once; the engine checks the expressions.
func validateRules(rules []Rule) error {
	var errs []error
	seen := map[string]bool{}
	for i, r := range rules {
		fail := func(err error) { errs = append(errs, &RuleError{Index: i, Name: r.Name, Err: err}) }
		switch {
		case r.Name == "" || strings.ContainsFunc(r.Name, func(c rune) bool {
			return !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-')
		}):
			fail(errors.New("name: want letters, digits, _ and - (it becomes the finding's code)"))
		case seen[r.Name]:
			fail(errors.New("name: used by an earlier rule"))
		}
		seen[r.Name] = true
		if !slices.Contains([]string{Info, Warning, Critical}, r.Severity) {
			fail(fmt.Errorf("severity: want info, warning or critical, got %q", r.Severity))
		}
		if r.Cost < 0 || r.Cost > 100 || math.IsNaN(r.Cost) {
			fail(fmt.Errorf("cost: want 0..100 points, got %v", r.Cost))
		}
		if r.Component != "" && !slices.Contains(RuleComponents, r.Component) {
			fail(fmt.Errorf("component: want one of %s, got %q", strings.Join(RuleComponents, ", "), r.Component))
		}
		if r.Cost > 0 && r.Component == "" {
			fail(errors.New("cost: a rule that costs points names the component they come from (component)"))
		}
		if strings.TrimSpace(r.Expr) == "" {
			fail(errors.New("expr: empty"))
		} else if len(r.Expr) > MaxRuleExprBytes {
			fail(fmt.Errorf("expr: %d bytes, at most %d", len(r.Expr), MaxRuleExprBytes))
		}
	}
	return errors.Join(errs...)
}

// RuleEngine compiles the rules' expressions: package rules does it with
// CEL. Scoring stays free of any expression language; it says which rules
// apply to a session and what a violation does.
type RuleEngine interface {
	// Compile checks every expression, reporting each problem as a
	// *RuleError, all at once.
	Compile(rules []Rule) (CompiledRules, error)
}

// CompiledRules are a config's rules, ready to evaluate.
type CompiledRules interface {
	// Evaluate runs the rules at the indices given (those whose when took
	// the session), in that order, on one session.
	Evaluate(which []int, s *RuleSession) []RuleOutcome
}

// RuleOutcome is what one rule said: violated, passed or not evaluated
// (Error says why), with the values it read when it did not pass.
type RuleOutcome struct {
	Status string
	Values []RuleValue
	Error  string
}

// applies reports whether the rule's when matches the session.
func (w When) applies(agent, version, closeReason string, tags []string) bool {
	in := func(list []string, v string) bool { return len(list) == 0 || slices.Contains(list, v) }
	anyTag := len(w.Tags) == 0 || slices.ContainsFunc(w.Tags, func(t string) bool { return slices.Contains(tags, t) })
	return in(w.Agents, agent) && in(w.Versions, version) && in(w.CloseReasons, closeReason) && anyTag
}

// applyRules evaluates the policy's rules that match the session, then
// adds a finding to the named component of each violated one, and returns
// the results in config order. Every rule sees the model's components and
// verdict, none another rule's finding.
func applyRules(p *policy, compiled CompiledRules, all []Rule, s Session, a *analysis, comps []Component, card *Scorecard,
	cfg Config) []RuleResult {
	metrics, c := card.Metrics, card.Completion
	if len(p.rules) == 0 || compiled == nil {
		return nil
	}
	version, tags := sessionVersion(s, cfg.VersionTag), sessionTags(s)
	var which []int
	for _, i := range p.rules {
		if all[i].When.applies(s.AgentName, version, c.CloseReason, tags) {
			which = append(which, i)
		}
	}
	if len(which) == 0 {
		return nil
	}
	rs := &RuleSession{s: &s, a: a, comps: comps, m: &metrics, c: c, cfg: cfg, usage: card.Usage, cost: card.Cost}
	outcomes := compiled.Evaluate(which, rs)
	results := make([]RuleResult, len(which))
	var violated []Rule
	for j, i := range which {
		r, o := all[i], outcomes[j]
		results[j] = RuleResult{Name: r.Name, Severity: r.Severity, Component: r.Component, Status: o.Status, Values: o.Values,
			Error: o.Error}
		if results[j].Values == nil {
			results[j].Values = []RuleValue{}
		}
		if o.Status == RuleViolated && r.Component != "" {
			results[j].Deduction = r.Cost
			violated = append(violated, r)
		}
	}
	addRuleFindings(results, violated, comps, cfg)
	return results
}

// addRuleFindings puts each violated rule's finding in the component it
// names, with its cost, rebuilding each component once. A component no
// other input measured is measured by the rule: the violation is its
// evidence.
func addRuleFindings(results []RuleResult, violated []Rule, comps []Component, cfg Config) {
	if len(violated) == 0 {
		return
	}
	values := map[string][]RuleValue{}
	for _, res := range results {
		values[res.Name] = res.Values
	}
	for i := range comps {
		var add []Finding
		for _, r := range violated {
			if r.Component == comps[i].Name {
				add = append(add, Finding{Code: RuleCodePrefix + r.Name, Severity: r.Severity, Deduction: r.Cost,
					Message: ruleMessage(r, values[r.Name])})
			}
		}
		if add != nil {
			comps[i] = component(comps[i].Name, comps[i].Weight, append(slices.Clip(comps[i].Findings), add...), cfg)
		}
	}
}

// ruleMessage explains a violation with the values the rule saw.
func ruleMessage(r Rule, values []RuleValue) string {
	var b strings.Builder
	fmt.Fprintf(&b, "rule %s violated (%s)", r.Name, strings.Join(strings.Fields(r.Expr), " "))
	if len(values) > 0 {
		b.WriteString(": ")
		for i, v := range values {
			if i > 0 {
				b.WriteString(", ")
			}
			b.WriteString(v.Name + " = " + v.Value)
		}
	}
	if r.Message != "" {
		b.WriteString(". " + r.Message)
	}
	return b.String()
}

// ruleVerdict applies the violated rules' severities to the overall
// verdict: critical fails, warning is at most warn.
func ruleVerdict(o *Overall, results []RuleResult) {
	for _, r := range results {
		if r.Status != RuleViolated {
			continue
		}
		switch r.Severity {
		case Critical:
			o.Reasons = append(o.Reasons, "rule "+r.Name+" violated (critical)")
			o.Verdict = Fail
		case Warning:
			o.Reasons = append(o.Reasons, "rule "+r.Name+" violated (warning)")
			if o.Verdict == Pass {
				o.Verdict = Warn
			}
		}
	}
}
