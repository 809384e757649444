package scoring

import "slices"

// RuleSession is a scored session as a rule engine reads it: the model's
// view, before any rule's finding. Lists are built when first asked for.
type RuleSession struct {
	s     *Session
	a     *analysis
	comps []Component
	m     *Metrics
	c     Completion
	cfg   Config
	usage *Usage // nil: scored from a recording alone
	cost  *Cost  // nil: no price table, or no usage report

	overall                    *Overall
	tools                      bool
	called, failed, unanswered []string
	handoffs, codes            []string
	handoffsDone, codesDone    bool
}

// Agent is the session's agent name.
func (r *RuleSession) Agent() string { return r.s.AgentName }

// Version is the agent's version by the one version rule ("" when none is
// named).
func (r *RuleSession) Version() string { return sessionVersion(*r.s, r.cfg.VersionTag) }

// Usage is what the session's models used, as the SDK reported it (nil,
// or Reported false, when it did not).
func (r *RuleSession) Usage() *Usage { return r.usage }

// Cost is the session's usage priced by scoring.pricing (nil: none).
func (r *RuleSession) Cost() *Cost { return r.cost }

// Completion is the close reason and where it came from.
func (r *RuleSession) Completion() Completion { return r.c }

// Facts are the session's facts beyond the recording (zero when scored
// from a recording alone).
func (r *RuleSession) Facts() Facts {
	if r.s.Facts == nil {
		return Facts{}
	}
	return *r.s.Facts
}

// Inputs are the signals scored.
func (r *RuleSession) Inputs() []string {
	if len(r.s.Inputs) == 0 {
		return []string{InputRecording}
	}
	return r.s.Inputs
}

// Overall is the model's score and verdict, before the rules.
func (r *RuleSession) Overall() Overall {
	if r.overall == nil {
		o := overall(r.comps, r.c, r.cfg)
		r.overall = &o
	}
	return *r.overall
}

// Components are the model's components, before the rules.
func (r *RuleSession) Components() []Component { return r.comps }

// Metrics are the scorecard's metrics.
func (r *RuleSession) Metrics() *Metrics { return r.m }

// Tools are the names of the tools called, of the outputs marked as
// errors, and of the calls without an output, in order.
func (r *RuleSession) Tools() (called, failed, unanswered []string) {
	if !r.tools {
		for i := range r.s.Items {
			it := &r.s.Items[i]
			switch it.Type {
			case TypeFunctionCall:
				r.called = append(r.called, it.Name)
				if c, ok := r.a.tools[it.CallID]; ok && c.output < 0 && int(c.call) == i {
					r.unanswered = append(r.unanswered, it.Name)
				}
			case TypeFunctionCallOutput:
				if it.IsError {
					r.failed = append(r.failed, it.Name)
				}
			}
		}
		r.tools = true
	}
	return r.called, r.failed, r.unanswered
}

// Handoffs are the new agent ids of the handoffs, in order.
func (r *RuleSession) Handoffs() []string {
	if !r.handoffsDone {
		for i := range r.s.Items {
			if it := &r.s.Items[i]; it.Type == TypeAgentHandoff {
				r.handoffs = append(r.handoffs, it.NewAgentID)
			}
		}
		r.handoffsDone = true
	}
	return r.handoffs
}

// FindingCodes are the model's finding codes, each once.
func (r *RuleSession) FindingCodes() []string {
	if !r.codesDone {
		for _, comp := range r.comps {
			for _, f := range comp.Findings {
				if !slices.Contains(r.codes, f.Code) {
					r.codes = append(r.codes, f.Code)
				}
			}
		}
		r.codesDone = true
	}
	return r.codes
}
