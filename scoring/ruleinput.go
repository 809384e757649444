package scoring

import (
	"reflect"
	"slices"
	"unicode/utf8"

	"github.com/google/cel-go/common/types"
	"github.com/google/cel-go/common/types/ref"
	"github.com/google/cel-go/interpreter"
)

// What a session's rules read: the rule variables as CEL values.

// The rule variables, by index: ruleVariables' order.
const (
	varAgent = iota
	varVersion
	varCloseReason
	varCloseReasonSource
	varSDKLanguage
	varSDKVersion
	varEndedBy
	varOutcome
	varTags
	varInputs
	varSimulated
	varScore
	varVerdict
	varComponents
	varMetrics
	varTools
	varFindings
	varHandoffs
	nVars
)

// ruleInput is what the rules of one session read, each variable
// converted to its CEL value the first time a rule reads it and kept for
// the session's other rules. It sees the model's components and verdict:
// the rules' own findings are added after every rule has run.
type ruleInput struct {
	p     *policy
	s     *Session
	a     *analysis
	comps []Component
	m     *Metrics
	c     Completion
	cfg   Config
	have  [nVars]bool
	vals  [nVars]ref.Val
}

func (in *ruleInput) ResolveName(name string) (any, bool) {
	i := slices.Index(ruleVariables, name)
	if i < 0 {
		return nil, false
	}
	return in.get(i), true
}

func (in *ruleInput) Parent() interpreter.Activation { return nil }

// get is variable i's CEL value.
func (in *ruleInput) get(i int) ref.Val {
	if !in.have[i] {
		in.vals[i], in.have[i] = in.compute(i), true
	}
	return in.vals[i]
}

func (in *ruleInput) compute(i int) ref.Val {
	s := in.s
	var f Facts
	if s.Facts != nil {
		f = *s.Facts
	}
	switch i {
	case varAgent:
		return types.String(cut(s.AgentName))
	case varVersion:
		return types.String(cut(sessionVersion(*s)))
	case varCloseReason:
		return types.String(cut(in.c.CloseReason))
	case varCloseReasonSource:
		return types.String(in.c.CloseReasonSource)
	case varSDKLanguage:
		return types.String(cut(f.SDKLanguage))
	case varSDKVersion:
		return types.String(cut(f.SDKVersion))
	case varEndedBy:
		return types.String(cut(f.EndedBy))
	case varOutcome:
		return types.String(cut(f.Outcome))
	case varTags:
		return stringList(f.Tags)
	case varInputs:
		if len(s.Inputs) == 0 {
			return stringList([]string{InputRecording})
		}
		return stringList(s.Inputs)
	case varSimulated:
		return types.Bool(f.Simulated)
	case varScore, varVerdict:
		o := overall(in.comps, in.c, in.cfg)
		in.vals[varScore], in.vals[varVerdict] = types.Double(o.Score), types.String(o.Verdict)
		in.have[varScore], in.have[varVerdict] = true, true
		return in.vals[i]
	case varComponents:
		m := make(map[ref.Val]ref.Val, len(in.comps))
		for _, comp := range in.comps {
			if comp.Verdict != NotMeasured {
				m[types.String(comp.Name)] = types.Double(comp.Score)
			}
		}
		return types.NewRefValMap(types.DefaultTypeAdapter, m)
	case varMetrics:
		return metricValues(in.m, in.p.metrics)
	case varTools:
		var called, failed, unanswered []string
		for j := range s.Items {
			it := &s.Items[j]
			switch it.Type {
			case TypeFunctionCall:
				called = append(called, it.Name)
				if c, ok := in.a.tools[it.CallID]; ok && c.output < 0 && int(c.call) == j {
					unanswered = append(unanswered, it.Name)
				}
			case TypeFunctionCallOutput:
				if it.IsError {
					failed = append(failed, it.Name)
				}
			}
		}
		return types.NewRefValMap(types.DefaultTypeAdapter, map[ref.Val]ref.Val{
			types.String("called"): stringList(called), types.String("failed"): stringList(failed),
			types.String("unanswered"): stringList(unanswered)})
	case varFindings:
		var codes []string
		for _, comp := range in.comps {
			for _, f := range comp.Findings {
				if !slices.Contains(codes, f.Code) {
					codes = append(codes, f.Code)
				}
			}
		}
		return stringList(codes)
	case varHandoffs:
		var to []string
		for j := range s.Items {
			if it := &s.Items[j]; it.Type == TypeAgentHandoff {
				to = append(to, it.NewAgentID)
			}
		}
		return stringList(to)
	}
	return types.NewErr("no variable %d", i)
}

// stringList is a list rules read, each entry cut (cut) and converted
// once, so rules that walk it do not convert each entry again.
func stringList(l []string) ref.Val {
	vals := make([]ref.Val, len(l))
	for i, s := range l {
		vals[i] = types.String(cut(s))
	}
	return types.NewRefValList(types.DefaultTypeAdapter, vals)
}

// metricValues are the metrics the rules read (which: indices into
// metricKeys, nil for all) by their JSON names; a metric the session did
// not measure is absent.
func metricValues(metrics *Metrics, which []int) ref.Val {
	mv := reflect.ValueOf(metrics).Elem()
	n := len(which)
	if which == nil {
		n = len(metricKeys)
	}
	m := make(map[ref.Val]ref.Val, n)
	for j := range n {
		i := j
		if which != nil {
			i = which[j]
		}
		key := types.String(metricKeys[i])
		// Without Interface(): no value boxed per metric.
		switch f := mv.Field(metricFields[i]); f.Kind() {
		case reflect.Int:
			m[key] = types.Double(f.Int())
		case reflect.Float64:
			m[key] = types.Double(f.Float())
		case reflect.Struct: // Opt[float64] or Opt[int]: V, Set
			if !f.Field(1).Bool() {
				continue
			}
			if v := f.Field(0); v.Kind() == reflect.Int {
				m[key] = types.Double(v.Int())
			} else {
				m[key] = types.Double(v.Float())
			}
		}
	}
	return types.NewRefValMap(types.DefaultTypeAdapter, m)
}

// cut bounds a string a rule reads to maxRuleString bytes, at a rune
// boundary: the bound the rule's cost was estimated with.
func cut(s string) string {
	if len(s) <= maxRuleString {
		return s
	}
	n := maxRuleString
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}
