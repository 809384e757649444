package scoring

import (
	"errors"
	"fmt"
	"math"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/google/cel-go/cel"
	"github.com/google/cel-go/checker"
	"github.com/google/cel-go/common/ast"
	"github.com/google/cel-go/common/operators"
	"github.com/google/cel-go/common/types"
	"github.com/google/cel-go/common/types/ref"
	"github.com/google/cel-go/common/types/traits"
)

// Rule is a team's own check on a scored session (scoring.rules,
// docs/policies.md): a CEL expression over the session's measures and
// facts that is true when the session violates it.
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

// RuleResult is what one rule said about a session whose when matched.
type RuleResult struct {
	Name     string `json:"name"`
	Severity string `json:"severity"`
	// Status is violated, passed, or not_evaluated (Error says why: a
	// measure the session does not have, or the cost limit).
	Status    string  `json:"status"`
	Component string  `json:"component,omitempty"`
	Deduction float64 `json:"deduction"`
	// Values are what the expression read, for a rule violated or not
	// evaluated (empty for one passed).
	Values []RuleValue `json:"values"`
	Error  string      `json:"error,omitempty"`
}

// RuleValue is one value a rule's expression read, as it saw it.
type RuleValue struct {
	Name  string `json:"name"`
	Value string `json:"value"`
}

// Rule statuses.
const (
	RuleViolated     = "violated"
	RulePassed       = "passed"
	RuleNotEvaluated = "not_evaluated"
)

// RuleCodePrefix starts the code of a violated rule's finding.
const RuleCodePrefix = "rule."

// Bounds of a rule: its text, and what one evaluation may cost at most
// (CEL's cost units, about one per operation and list element visited),
// estimated when the rule is compiled from the largest input a session can
// give: lists of maxRuleList entries (the chat history's item limit) and
// strings of maxRuleString bytes (longer ones are cut). A rule whose worst
// case is over the limit is a config error, so no evaluation can run long
// and none needs watching while it runs.
const (
	maxRuleExprBytes = 4096
	ruleCostLimit    = 10_000_000
	maxRuleList      = 100_000
	maxRuleString    = 256
)

// sizes is the cost estimator's view of the rule variables.
type sizes struct{}

func (sizes) EstimateSize(n checker.AstNode) *checker.SizeEstimate {
	if len(n.Path()) == 0 {
		return nil
	}
	switch n.Type().Kind() {
	case types.StringKind:
		return &checker.SizeEstimate{Max: maxRuleString}
	case types.ListKind:
		return &checker.SizeEstimate{Max: maxRuleList}
	case types.MapKind:
		return &checker.SizeEstimate{Max: uint64(len(metricKeys))}
	}
	return nil
}

func (sizes) EstimateCallCost(string, string, *checker.AstNode, []checker.AstNode) *checker.CallEstimate {
	return nil
}

// The variables a rule reads (docs/policies.md lists them).
var (
	// metricKeys are the scorecard's metrics, by their JSON names: the keys
	// of the rule variable metrics.
	metricKeys, metricFields = metricTable()
	componentKeys            = []string{TurnHandling, TranscriptIntegrity, ToolReliability, ResponseLatency}
	toolKeys                 = []string{"called", "failed", "unanswered"}
	// keyed are the map variables whose keys a rule may name, checked when
	// it is compiled.
	keyed = map[string][]string{"metrics": metricKeys, "components": componentKeys, "tools": toolKeys}
)

// metricTable reads Metrics' JSON names and fields once.
func metricTable() ([]string, []int) {
	t := reflect.TypeFor[Metrics]()
	var keys []string
	var fields []int
	for i := range t.NumField() {
		name, _, _ := strings.Cut(t.Field(i).Tag.Get("json"), ",")
		keys, fields = append(keys, name), append(fields, i)
	}
	return keys, fields
}

// sharedRuleEnv is the rule environment, built once: it is immutable
// (declarations only, derived from this code) and safe for concurrent
// use, and building it costs about a millisecond.
var sharedRuleEnv = sync.OnceValues(ruleEnv)

func ruleEnv() (*cel.Env, error) {
	str, strs := cel.StringType, cel.ListType(cel.StringType)
	return cel.NewEnv(
		cel.Variable("agent", str),
		cel.Variable("version", str),
		cel.Variable("close_reason", str),
		cel.Variable("close_reason_source", str),
		cel.Variable("sdk_language", str),
		cel.Variable("sdk_version", str),
		cel.Variable("ended_by", str),
		cel.Variable("outcome", str),
		cel.Variable("tags", strs),
		cel.Variable("inputs", strs),
		cel.Variable("simulated", cel.BoolType),
		cel.Variable("score", cel.DoubleType),
		cel.Variable("verdict", str),
		cel.Variable("components", cel.MapType(str, cel.DoubleType)),
		cel.Variable("metrics", cel.MapType(str, cel.DoubleType)),
		cel.Variable("tools", cel.MapType(str, strs)),
		cel.Variable("findings", strs),
		cel.Variable("handoffs", strs),
		cel.CrossTypeNumericComparisons(true),
		cel.ParserExpressionSizeLimit(maxRuleExprBytes),
	)
}

// compiledRule is a rule ready to evaluate.
type compiledRule struct {
	Rule
	prg  cel.Program
	read []string // what the expression reads, in order: "metrics.x", "agent"
	// wholeMetrics: it reads metrics other than by named keys.
	wholeMetrics bool
	oneLine      string // Expr on one line, for messages
}

// metricsRead are the indices in metricKeys of the metrics some rule
// reads, or nil when one needs them all: a session's rule input holds
// only those.
func metricsRead(rules []*compiledRule) []int {
	var out []int
	for _, r := range rules {
		if r.wholeMetrics {
			return nil
		}
		for _, name := range r.read {
			if key, ok := strings.CutPrefix(name, "metrics."); ok {
				if i := slices.Index(metricKeys, key); i >= 0 && !slices.Contains(out, i) {
					out = append(out, i)
				}
			}
		}
	}
	slices.Sort(out)
	if out == nil {
		out = []int{}
	}
	return out
}

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

// compileRules type-checks and compiles every rule, reporting every
// problem at once.
func compileRules(rules []Rule) ([]*compiledRule, error) {
	if len(rules) == 0 {
		return nil, nil
	}
	env, err := sharedRuleEnv()
	if err != nil {
		return nil, fmt.Errorf("rule environment: %w", err)
	}
	var errs []error
	seen := map[string]bool{}
	out := make([]*compiledRule, 0, len(rules))
	for i, r := range rules {
		fail := func(line, col int, err error) {
			errs = append(errs, &RuleError{Index: i, Name: r.Name, Line: line, Column: col, Err: err})
		}
		switch {
		case r.Name == "" || strings.ContainsFunc(r.Name, func(c rune) bool {
			return !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-')
		}):
			fail(0, 0, errors.New("name: want letters, digits, _ and - (it becomes the finding's code)"))
		case seen[r.Name]:
			fail(0, 0, errors.New("name: used by an earlier rule"))
		}
		seen[r.Name] = true
		if !slices.Contains([]string{Info, Warning, Critical}, r.Severity) {
			fail(0, 0, fmt.Errorf("severity: want info, warning or critical, got %q", r.Severity))
		}
		if r.Cost < 0 || r.Cost > 100 || math.IsNaN(r.Cost) {
			fail(0, 0, fmt.Errorf("cost: want 0..100 points, got %v", r.Cost))
		}
		if r.Component != "" && !slices.Contains(componentKeys, r.Component) {
			fail(0, 0, fmt.Errorf("component: want one of %s, got %q", strings.Join(componentKeys, ", "), r.Component))
		}
		if r.Cost > 0 && r.Component == "" {
			fail(0, 0, errors.New("cost: a rule that costs points names the component they come from (component)"))
		}
		if strings.TrimSpace(r.Expr) == "" {
			fail(0, 0, errors.New("expr: empty"))
			continue
		}
		if len(r.Expr) > maxRuleExprBytes {
			fail(0, 0, fmt.Errorf("expr: %d bytes, at most %d", len(r.Expr), maxRuleExprBytes))
			continue
		}
		checked, iss := env.Compile(r.Expr)
		if iss.Err() != nil {
			e := iss.Errors()[0]
			fail(e.Location.Line(), e.Location.Column()+1, errors.New(e.Message))
			continue
		}
		if !checked.OutputType().IsExactType(cel.BoolType) {
			fail(0, 0, fmt.Errorf("expr: must be true or false (violated or not), it gives %s", checked.OutputType()))
			continue
		}
		read, whole, keyErr := readsOf(checked.NativeRep())
		if keyErr != nil {
			fail(keyErr.Line, keyErr.Column, keyErr.Err)
			continue
		}
		cost, err := env.EstimateCost(checked, sizes{})
		if err != nil {
			fail(0, 0, fmt.Errorf("expr: cannot bound its cost: %w", err))
			continue
		}
		if cost.Max > ruleCostLimit {
			fail(0, 0, fmt.Errorf("expr: may cost up to %d on the largest session, over the limit of %d (a comprehension inside another over a list?)",
				cost.Max, ruleCostLimit))
			continue
		}
		prg, err := env.Program(checked, cel.EvalOptions(cel.OptOptimize))
		if err != nil {
			fail(0, 0, err)
			continue
		}
		out = append(out, &compiledRule{Rule: r, prg: prg, read: read, wholeMetrics: whole, oneLine: strings.Join(strings.Fields(r.Expr), " ")})
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return out, nil
}

// readsOf lists what an expression reads and checks that every key it
// names of metrics, components and tools exists: a typo is an error when
// the config loads, never a rule that silently never fires.
func readsOf(a *ast.AST) (read []string, wholeMetrics bool, _ *RuleError) {
	var bad *RuleError
	// idents and keyedReads count the metrics variable's uses: one that is
	// not a read of a named key (metrics.exists(…), size(metrics)) needs
	// the whole map.
	idents, keyedReads := 0, 0
	add := func(s string) {
		if !slices.Contains(read, s) {
			read = append(read, s)
		}
	}
	check := func(e ast.Expr, variable, key string) {
		if !slices.Contains(keyed[variable], key) {
			if bad == nil {
				loc := a.SourceInfo().GetStartLocation(e.ID())
				bad = &RuleError{Line: loc.Line(), Column: loc.Column() + 1,
					Err: fmt.Errorf("%s has no key %q%s", variable, key, nearest(key, keyed[variable]))}
			}
			return
		}
		if variable == "metrics" {
			keyedReads++
		}
		add(variable + "." + key)
	}
	ast.PreOrderVisit(a.Expr(), ast.NewExprVisitor(func(e ast.Expr) {
		switch e.Kind() {
		case ast.SelectKind:
			sel := e.AsSelect()
			if op := sel.Operand(); op.Kind() == ast.IdentKind {
				if _, ok := keyed[op.AsIdent()]; ok {
					check(e, op.AsIdent(), sel.FieldName())
				}
			}
		case ast.CallKind:
			call := e.AsCall()
			if call.FunctionName() == operators.Index && len(call.Args()) == 2 {
				op, idx := call.Args()[0], call.Args()[1]
				if op.Kind() == ast.IdentKind && idx.Kind() == ast.LiteralKind {
					if s, ok := idx.AsLiteral().(types.String); ok {
						if _, ok := keyed[op.AsIdent()]; ok {
							check(e, op.AsIdent(), string(s))
						}
					}
				}
			}
		case ast.IdentKind:
			if e.AsIdent() == "metrics" {
				idents++
			}
			if _, ok := keyed[e.AsIdent()]; !ok {
				add(e.AsIdent())
			}
		}
	}))
	// Comprehension variables (t in tools.called.exists(t, …)) are idents
	// too: keep only the declared variables.
	read = slices.DeleteFunc(read, func(s string) bool {
		name, _, _ := strings.Cut(s, ".")
		return !slices.Contains(ruleVariables, name)
	})
	return read, idents > keyedReads, bad
}

// ruleVariables are the names a rule can read (ruleEnv).
var ruleVariables = []string{"agent", "version", "close_reason", "close_reason_source", "sdk_language", "sdk_version", "ended_by",
	"outcome", "tags", "inputs", "simulated", "score", "verdict", "components", "metrics", "tools", "findings", "handoffs"}

// nearest suggests the known key closest to a typo.
func nearest(key string, known []string) string {
	best, bestD, bestP := "", 4, 0
	for _, k := range known {
		// The fewest edits; of those, the longest shared beginning.
		d, p := editDistance(key, k), commonPrefix(key, k)
		if d < bestD || d == bestD && p > bestP {
			best, bestD, bestP = k, d, p
		}
	}
	if best == "" {
		return ""
	}
	return fmt.Sprintf(" (did you mean %q?)", best)
}

func commonPrefix(a, b string) int {
	n := 0
	for n < len(a) && n < len(b) && a[n] == b[n] {
		n++
	}
	return n
}

func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}

// applies reports whether the rule's when matches the session.
func (w When) applies(agent, version, closeReason string, tags []string) bool {
	in := func(list []string, v string) bool { return len(list) == 0 || slices.Contains(list, v) }
	anyTag := len(w.Tags) == 0 || slices.ContainsFunc(w.Tags, func(t string) bool { return slices.Contains(tags, t) })
	return in(w.Agents, agent) && in(w.Versions, version) && in(w.CloseReasons, closeReason) && anyTag
}

// eval runs one rule: its status, the values it read, and why it could not
// be evaluated.
func (r *compiledRule) eval(in *ruleInput) RuleResult {
	res := RuleResult{Name: r.Name, Severity: r.Severity, Component: r.Component, Values: []RuleValue{}}
	out, _, err := r.prg.Eval(in)
	switch {
	case err != nil:
		res.Status, res.Error = RuleNotEvaluated, err.Error()
	case out == types.True:
		res.Status = RuleViolated
	case out == types.False:
		res.Status = RulePassed
	default:
		res.Status, res.Error = RuleNotEvaluated, fmt.Sprintf("gave %v, not true or false", out)
	}
	if res.Status != RulePassed {
		// What it saw explains a violation or a rule that could not run.
		res.Values = r.values(in)
	}
	return res
}

// values are what the rule read, formatted the same way every time.
func (r *compiledRule) values(in *ruleInput) []RuleValue {
	out := make([]RuleValue, 0, len(r.read))
	for _, name := range r.read {
		variable, key, keyedRead := strings.Cut(name, ".")
		v := in.get(slices.Index(ruleVariables, variable))
		if keyedRead {
			x, ok := v.(traits.Mapper).Find(types.String(key))
			if !ok {
				out = append(out, RuleValue{Name: name, Value: "absent"})
				continue
			}
			v = x
		} else if _, isMap := v.(traits.Mapper); isMap {
			continue // the whole map: its keys were listed where read
		}
		out = append(out, RuleValue{Name: name, Value: formatValue(v)})
	}
	return out
}

// maxShownEntries is how many entries of a list a rule's values show.
const maxShownEntries = 10

func formatValue(v ref.Val) string {
	switch x := v.(type) {
	case types.String:
		return strconv.Quote(string(x))
	case types.Double:
		return num(round(float64(x)))
	case types.Bool:
		return strconv.FormatBool(bool(x))
	case traits.Lister:
		// A long list shows its first entries and its length.
		n := int(x.Size().(types.Int))
		var b strings.Builder
		b.WriteByte('[')
		for i := range min(n, maxShownEntries) {
			if i > 0 {
				b.WriteString(", ")
			}
			b.WriteString(formatValue(x.Get(types.Int(i))))
		}
		if n > maxShownEntries {
			fmt.Fprintf(&b, ", … %d in all", n)
		}
		b.WriteByte(']')
		return b.String()
	}
	return fmt.Sprint(v.Value())
}

// applyRules evaluates the policy's rules that match the session, then
// adds a finding to the named component of each violated one, and returns
// the results in config order. Every rule sees the model's components and
// verdict, none another rule's finding.
func applyRules(p *policy, s Session, a *analysis, comps []Component, metrics Metrics, c Completion, cfg Config) []RuleResult {
	if len(p.rules) == 0 {
		return nil
	}
	version, tags := sessionVersion(s), sessionTags(s)
	in := &ruleInput{p: p, s: &s, a: a, comps: comps, m: &metrics, c: c, cfg: cfg}
	var results []RuleResult
	var violated []*compiledRule
	for _, r := range p.rules {
		if !r.When.applies(s.AgentName, version, c.CloseReason, tags) {
			continue
		}
		res := r.eval(in)
		if res.Status == RuleViolated && r.Component != "" {
			res.Deduction = r.Cost
			violated = append(violated, r)
		}
		results = append(results, res)
	}
	addRuleFindings(results, violated, comps, cfg)
	return results
}

// addRuleFindings puts each violated rule's finding in the component it
// names, with its cost, rebuilding each component once. A component no
// other input measured is measured by the rule: the violation is its
// evidence.
func addRuleFindings(results []RuleResult, violated []*compiledRule, comps []Component, cfg Config) {
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
func ruleMessage(r *compiledRule, values []RuleValue) string {
	var b strings.Builder
	fmt.Fprintf(&b, "rule %s violated (%s)", r.Name, r.oneLine)
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
