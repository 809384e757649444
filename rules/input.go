package rules

import (
	"reflect"
	"slices"
	"unicode/utf8"

	"github.com/google/cel-go/common/types"
	"github.com/google/cel-go/common/types/ref"
	"github.com/google/cel-go/interpreter"

	"github.com/lkscore/lkscore/scoring"
	"github.com/lkscore/lkscore/session"
)

// What a session's rules read: the rule variables as CEL values, from the
// session as scoring shows it (scoring.RuleSession).

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
	varUsage
	varCost
	nVars
)

// ruleInput is what the rules of one session read, each variable
// converted to its CEL value the first time a rule reads it and kept for
// the session's other rules.
type ruleInput struct {
	s       *scoring.RuleSession
	metrics []int // the metrics some rule reads; nil: all
	have    [nVars]bool
	vals    [nVars]ref.Val
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
	switch i {
	case varAgent:
		return types.String(cut(s.Agent()))
	case varVersion:
		return types.String(cut(s.Version()))
	case varCloseReason:
		return types.String(cut(s.Completion().CloseReason))
	case varCloseReasonSource:
		return types.String(s.Completion().CloseReasonSource)
	case varSDKLanguage:
		return types.String(cut(s.Facts().SDKLanguage))
	case varSDKVersion:
		return types.String(cut(s.Facts().SDKVersion))
	case varEndedBy:
		return types.String(cut(s.Facts().EndedBy))
	case varOutcome:
		return types.String(cut(s.Facts().Outcome))
	case varTags:
		return stringList(s.Facts().Tags)
	case varInputs:
		return stringList(s.Inputs())
	case varSimulated:
		return types.Bool(s.Facts().Simulated)
	case varScore:
		return types.Double(s.Overall().Score)
	case varVerdict:
		return types.String(s.Overall().Verdict)
	case varComponents:
		m := map[ref.Val]ref.Val{}
		for _, comp := range s.Components() {
			if comp.Verdict != session.NotMeasured {
				m[types.String(comp.Name)] = types.Double(comp.Score)
			}
		}
		return types.NewRefValMap(types.DefaultTypeAdapter, m)
	case varMetrics:
		return metricValues(s.Metrics(), in.metrics)
	case varTools:
		called, failed, unanswered := s.Tools()
		return types.NewRefValMap(types.DefaultTypeAdapter, map[ref.Val]ref.Val{
			types.String("called"): stringList(called), types.String("failed"): stringList(failed),
			types.String("unanswered"): stringList(unanswered)})
	case varFindings:
		return stringList(s.FindingCodes())
	case varHandoffs:
		return stringList(s.Handoffs())
	case varUsage:
		return usageValues(s.Usage())
	case varCost:
		m := map[ref.Val]ref.Val{}
		if c := s.Cost(); c != nil {
			m[types.String("total")] = types.Double(c.Total)
			if c.PerMinute.Set {
				m[types.String("per_minute")] = types.Double(c.PerMinute.V)
			}
		}
		return types.NewRefValMap(types.DefaultTypeAdapter, m)
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
func metricValues(metrics *session.Metrics, which []int) ref.Val {
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

// usageValues is the rule variable usage: the report's totals, none when
// the SDK reported no usage (a rule tests has(usage.output_tokens)).
func usageValues(u *session.Usage) ref.Val {
	m := map[ref.Val]ref.Val{}
	if u != nil && u.Reported {
		var cached int
		for _, mu := range u.Models {
			if mu.Type == session.UsageLLM {
				cached += mu.InputCachedTokens.V
			}
		}
		m[types.String("input_tokens")] = types.Double(float64(u.InputTokens.V))
		m[types.String("cached_input_tokens")] = types.Double(float64(cached))
		m[types.String("output_tokens")] = types.Double(float64(u.OutputTokens.V))
		m[types.String("tts_characters")] = types.Double(float64(u.TTSCharacters.V))
		m[types.String("stt_audio_s")] = types.Double(u.STTAudioS.V)
		if u.TokensPerUserTurn.Set {
			m[types.String("tokens_per_user_turn")] = types.Double(u.TokensPerUserTurn.V)
		}
	}
	return types.NewRefValMap(types.DefaultTypeAdapter, m)
}
