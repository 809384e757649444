package rescore

import (
	"fmt"
	"math"
	"slices"
	"sort"

	"github.com/lkscore/lkscore/session"
)

// differ accumulates how each session's verdict, score, findings and rules
// moved, by agent.
type differ struct {
	agents map[string]*AgentDiff
	deltas map[string][]float64
	diffs  []SessionDiff
}

func newDiffer() *differ {
	return &differ{agents: map[string]*AgentDiff{}, deltas: map[string][]float64{}, diffs: []SessionDiff{}}
}

// add records one session's new scorecard against its old one (nil: none).
func (d *differ) add(key, agent string, old *oldCard, card *session.Scorecard) {
	a := d.agents[agent]
	if a == nil {
		a = &AgentDiff{Agent: agent, ScoringVersion: card.ScoringVersion, Transitions: map[string]int{}}
		d.agents[agent] = a
	}
	a.Sessions++
	sd := SessionDiff{Session: key, Agent: agent, New: summarize(card)}
	for _, r := range sd.New.RulesViolated {
		if a.Violations == nil {
			a.Violations = map[string]int{}
		}
		a.Violations[r]++
	}
	if old == nil {
		a.New++
	} else {
		prev := old.brief
		sd.Old = &prev
		if prev.Verdict != sd.New.Verdict {
			a.Transitions[prev.Verdict+"→"+sd.New.Verdict]++
		}
		d.deltas[agent] = append(d.deltas[agent], sd.New.Score-prev.Score)
	}
	if sd.Old == nil || sd.Old.Verdict != sd.New.Verdict || sd.Old.Score != sd.New.Score ||
		!slices.Equal(sd.Old.Findings, sd.New.Findings) || !slices.Equal(sd.Old.RulesViolated, sd.New.RulesViolated) {
		d.diffs = append(d.diffs, sd)
	}
}

// report writes the agents' diffs, the changed sessions and the movers.
func (d *differ) report(rep *Report) {
	for _, a := range d.agents {
		if ds := d.deltas[a.Agent]; len(ds) > 0 {
			var sum float64
			for _, x := range ds {
				sum += x
			}
			a.MeanDelta = math.Round(sum/float64(len(ds))*100) / 100
		}
		rep.Agents = append(rep.Agents, *a)
	}
	sort.Slice(rep.Agents, func(i, j int) bool { return rep.Agents[i].Agent < rep.Agents[j].Agent })
	rep.Changed = d.diffs
	rep.Movers = movers(d.diffs, 10)
}

// movers are the n sessions that moved most: a verdict change first, then
// the largest score change; ties by session key.
func movers(diffs []SessionDiff, n int) []SessionDiff {
	type scored struct {
		d       SessionDiff
		verdict bool
		delta   float64
	}
	var all []scored
	for _, d := range diffs {
		if d.Old == nil {
			continue
		}
		all = append(all, scored{d, d.Old.Verdict != d.New.Verdict, math.Abs(d.New.Score - d.Old.Score)})
	}
	sort.SliceStable(all, func(i, j int) bool {
		if all[i].verdict != all[j].verdict {
			return all[i].verdict
		}
		if all[i].delta != all[j].delta {
			return all[i].delta > all[j].delta
		}
		return all[i].d.Session < all[j].d.Session
	})
	out := []SessionDiff{}
	for _, s := range all[:min(n, len(all))] {
		out = append(out, s.d)
	}
	return out
}

// summarize is a scorecard in brief: its findings' codes sorted (a code
// found n times as code×n) and the rules it violated.
func summarize(c *session.Scorecard) CardSummary {
	s := CardSummary{ScoringVersion: c.ScoringVersion, Verdict: c.Overall.Verdict, Score: c.Overall.Score, Findings: []string{}}
	if c.Policy != nil {
		s.Policy = c.Policy.Name
	}
	counts := map[string]int{}
	var codes []string
	for _, comp := range c.Components {
		for _, f := range comp.Findings {
			if counts[f.Code] == 0 {
				codes = append(codes, f.Code)
			}
			counts[f.Code]++
		}
	}
	sort.Strings(codes)
	for _, code := range codes {
		if counts[code] > 1 {
			code = fmt.Sprintf("%s×%d", code, counts[code])
		}
		s.Findings = append(s.Findings, code)
	}
	for _, r := range c.Rules {
		if r.Status == session.RuleViolated {
			s.RulesViolated = append(s.RulesViolated, r.Name)
		}
	}
	return s
}
