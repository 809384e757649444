// Package rules compiles and evaluates the teams' rules (scoring.rules,
// docs/policies.md) with CEL (github.com/google/cel-go): the
// scoring.RuleEngine the daemon and the tools score with. It is pure like
// scoring: no I/O, no clock, every evaluation bounded by CEL's cost
// estimate when the rule is compiled. It owns the rules' language (the
// variables a rule reads, their conversion, the compiled programs); it
// must not import the daemon (consumer), NATS, S3, HTTP or logging (CI
// checks), and scoring must not import it: scoring is handed it as a
// scoring.RuleEngine.
package rules

import (
	"errors"
	"fmt"
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

	"github.com/lkscore/lkscore/internal/typo"
	"github.com/lkscore/lkscore/scoring"
	"github.com/lkscore/lkscore/session"
)

// Engine is the rule engine scoring compiles and evaluates rules with.
type Engine struct{}

// Compile type-checks and compiles every rule (scoring.RuleEngine).
func (Engine) Compile(rules []scoring.Rule) (scoring.CompiledRules, error) {
	compiled, err := compileRules(rules)
	if err != nil {
		return nil, err
	}
	if slices.Contains(compiled, nil) {
		return nil, errors.New("scoring.rules: an expression is empty or too long (scoring.Config.Validate says which)")
	}
	return &ruleSet{rules: compiled, metrics: metricsRead(compiled)}, nil
}

// NewScorer is scoring.NewScorer with this engine: what everything that
// scores with a config (and so maybe rules) uses.
func NewScorer(cfg scoring.Config) (*scoring.Scorer, error) {
	return scoring.NewScorerWith(cfg, Engine{})
}

// Validate checks a scoring config as NewScorer does, its rules'
// expressions included: every problem at once.
func Validate(cfg scoring.Config) error {
	_, err := compileRules(cfg.Rules)
	return errors.Join(cfg.Validate(), err)
}

// ruleSet is a config's compiled rules.
type ruleSet struct {
	rules   []*compiledRule
	metrics []int // the metrics some rule reads (metricsRead)
}

// Evaluate runs the rules at the indices given on one session, converting
// each variable once for all of them (scoring.CompiledRules).
func (rs *ruleSet) Evaluate(which []int, s *scoring.RuleSession) []scoring.RuleOutcome {
	in := &ruleInput{s: s, metrics: rs.metrics}
	out := make([]scoring.RuleOutcome, len(which))
	for j, i := range which {
		out[j] = rs.rules[i].eval(in)
	}
	return out
}

// Bounds of a rule: its text, and what one evaluation may cost at most
// (CEL's cost units, about one per operation and list element visited),
// estimated when the rule is compiled from the largest input a session can
// give: lists of maxRuleList entries (the chat history's item limit) and
// strings of maxRuleString bytes (longer ones are cut). A rule whose worst
// case is over the limit is a config error, so no evaluation can run long
// and none needs watching while it runs.
const (
	maxRuleExprBytes = scoring.MaxRuleExprBytes
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
	componentKeys            = scoring.RuleComponents
	toolKeys                 = []string{"called", "failed", "unanswered"}
	// usageKeys are the usage report's totals (session.Usage), costKeys the
	// card's cost (session.Cost): absent when not reported, or not priced.
	usageKeys = []string{"input_tokens", "cached_input_tokens", "output_tokens", "tts_characters", "stt_audio_s", "tokens_per_user_turn"}
	costKeys  = []string{"total", "per_minute"}
	// keyed are the map variables whose keys a rule may name, checked when
	// it is compiled.
	keyed = map[string][]string{"metrics": metricKeys, "components": componentKeys, "tools": toolKeys, "usage": usageKeys, "cost": costKeys}
)

// metricTable reads Metrics' JSON names and fields once.
func metricTable() ([]string, []int) {
	t := reflect.TypeFor[session.Metrics]()
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
		cel.Variable("usage", cel.MapType(str, cel.DoubleType)),
		cel.Variable("cost", cel.MapType(str, cel.DoubleType)),
		cel.CrossTypeNumericComparisons(true),
		cel.ParserExpressionSizeLimit(maxRuleExprBytes),
	)
}

// compiledRule is a rule ready to evaluate.
type compiledRule struct {
	scoring.Rule
	prg  cel.Program
	read []string // what the expression reads, in order: "metrics.x", "agent"
	// wholeMetrics: it reads metrics other than by named keys.
	wholeMetrics bool
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

// compileRules type-checks and compiles every rule, reporting every
// problem at once.
func compileRules(rules []scoring.Rule) ([]*compiledRule, error) {
	if len(rules) == 0 {
		return nil, nil
	}
	env, err := sharedRuleEnv()
	if err != nil {
		return nil, fmt.Errorf("rule environment: %w", err)
	}
	var errs []error
	out := make([]*compiledRule, 0, len(rules))
	for i, r := range rules {
		fail := func(line, col int, err error) {
			errs = append(errs, &scoring.RuleError{Index: i, Name: r.Name, Line: line, Column: col, Err: err})
		}
		if strings.TrimSpace(r.Expr) == "" || len(r.Expr) > maxRuleExprBytes {
			out = append(out, nil) // scoring's own check (Config.Validate) reports it
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
		out = append(out, &compiledRule{Rule: r, prg: prg, read: read, wholeMetrics: whole})
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return out, nil
}

// readsOf lists what an expression reads and checks that every key it
// names of metrics, components and tools exists: a typo is an error when
// the config loads, never a rule that silently never fires.
func readsOf(a *ast.AST) (read []string, wholeMetrics bool, _ *scoring.RuleError) {
	var bad *scoring.RuleError
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
				bad = &scoring.RuleError{Line: loc.Line(), Column: loc.Column() + 1,
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
	"outcome", "tags", "inputs", "simulated", "score", "verdict", "components", "metrics", "tools", "findings", "handoffs", "usage", "cost"}

// nearest suggests the known key closest to a typo.
func nearest(key string, known []string) string {
	if best := typo.Closest(key, known, 3); best != "" {
		return fmt.Sprintf(" (did you mean %q?)", best)
	}
	return ""
}

// eval runs one rule: its status, the values it read, and why it could not
// be evaluated.
func (r *compiledRule) eval(in *ruleInput) scoring.RuleOutcome {
	var res scoring.RuleOutcome
	out, _, err := r.prg.Eval(in)
	switch {
	case err != nil:
		res.Status, res.Error = session.RuleNotEvaluated, err.Error()
	case out == types.True:
		res.Status = session.RuleViolated
	case out == types.False:
		res.Status = session.RulePassed
	default:
		res.Status, res.Error = session.RuleNotEvaluated, fmt.Sprintf("gave %v, not true or false", out)
	}
	if res.Status != session.RulePassed {
		// What it saw explains a violation or a rule that could not run.
		res.Values = r.values(in)
	}
	return res
}

// values are what the rule read, formatted the same way every time.
func (r *compiledRule) values(in *ruleInput) []session.RuleValue {
	out := make([]session.RuleValue, 0, len(r.read))
	for _, name := range r.read {
		variable, key, keyedRead := strings.Cut(name, ".")
		v := in.get(slices.Index(ruleVariables, variable))
		if keyedRead {
			x, ok := v.(traits.Mapper).Find(types.String(key))
			if !ok {
				out = append(out, session.RuleValue{Name: name, Value: "absent"})
				continue
			}
			v = x
		} else if _, isMap := v.(traits.Mapper); isMap {
			continue // the whole map: its keys were listed where read
		}
		out = append(out, session.RuleValue{Name: name, Value: formatValue(v)})
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
		return scoring.FormatNumber(float64(x))
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
