package regress

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/lkscore/lkscore/session"
)

// KindThreshold is the kind of a threshold alert: a rule or finding seen in
// too many of an agent's recent sessions (regression.thresholds).
const KindThreshold = "threshold"

// Threshold tests (wire.Alert.Test).
const (
	TestCountOfLast  = "count_of_last"
	TestRateInWindow = "rate_in_window"
)

// AllVersions is the version of a threshold alert: it counts an agent's
// sessions whatever their version.
const AllVersions = "*"

// MaxThresholdWindow bounds the sessions a threshold looks back over: of_last
// at most, and a rate window's latest sessions.
const MaxThresholdWindow = 1000

// Threshold is a team's own alert on its rules and findings
// (docs/policies.md): fire when the rule (or finding) is in at least AtLeast
// of the agent's last OfLast sessions, or in more than RateOver percent of
// its sessions within Window (and at least MinSessions of them).
type Threshold struct {
	Name string `yaml:"name" json:"name"`
	// Rule names a rule of scoring.rules, counted when violated; Finding a
	// finding code (the model's, or rule.<name>). One of the two.
	Rule    string `yaml:"rule" json:"rule,omitempty"`
	Finding string `yaml:"finding" json:"finding,omitempty"`
	// Agents it watches, each on its own; empty: every agent.
	Agents      []string      `yaml:"agents" json:"agents,omitempty"`
	AtLeast     int           `yaml:"at_least" json:"at_least,omitempty"`
	OfLast      int           `yaml:"of_last" json:"of_last,omitempty"`
	RateOver    float64       `yaml:"rate_over" json:"rate_over,omitempty"` // percent
	Window      time.Duration `yaml:"window" json:"window,omitempty"`
	MinSessions int           `yaml:"min_sessions" json:"min_sessions,omitempty"`
	// Severity is the alert's: warning (default) or critical.
	Severity string `yaml:"severity" json:"severity,omitempty"`
}

// Validate checks a threshold, naming it; rules are the names of
// scoring.rules.
func (t Threshold) Validate(i int, rules []string) error {
	var errs []error
	add := func(format string, a ...any) {
		errs = append(errs, fmt.Errorf("regression.thresholds[%d] (%s): %s", i, t.Name, fmt.Sprintf(format, a...)))
	}
	if t.Name == "" || strings.ContainsAny(t.Name, " .*>\t") {
		add("name: want a name without spaces, dots or wildcards")
	}
	switch {
	case (t.Rule == "") == (t.Finding == ""):
		add("want exactly one of rule and finding")
	case t.Rule != "" && !slices.Contains(rules, t.Rule):
		add("rule %q is not in scoring.rules (%s)", t.Rule, strings.Join(rules, ", "))
	}
	count, rate := t.AtLeast != 0 || t.OfLast != 0, t.RateOver != 0 || t.Window != 0
	switch {
	case count == rate:
		add("want either at_least and of_last, or rate_over and window")
	case count && (t.AtLeast < 1 || t.OfLast < t.AtLeast || t.OfLast > MaxThresholdWindow):
		add("want 1 <= at_least (%d) <= of_last (%d) <= %d", t.AtLeast, t.OfLast, MaxThresholdWindow)
	case rate && (!(t.RateOver > 0) || t.RateOver >= 100 || t.Window <= 0):
		add("want 0 < rate_over (%v, a percent) < 100 and a positive window (%v)", t.RateOver, t.Window)
	case rate && (t.MinSessions < 0 || t.MinSessions > MaxThresholdWindow):
		add("min_sessions: want 0..%d, got %d", MaxThresholdWindow, t.MinSessions)
	}
	if t.Severity != "" && t.Severity != session.Warning && t.Severity != session.Critical {
		add("severity: want warning or critical, got %q", t.Severity)
	}
	return errors.Join(errs...)
}

// DefaultThresholdMinSessions is a rate threshold's min_sessions when unset.
const DefaultThresholdMinSessions = 10

// Watches reports whether the threshold counts this agent's sessions.
func (t Threshold) Watches(agent string) bool {
	return len(t.Agents) == 0 || slices.Contains(t.Agents, agent)
}

// WindowEntry is what a threshold needs of one scorecard.
type WindowEntry struct {
	Seq     uint64    `json:"seq"`
	Session string    `json:"session"`
	At      time.Time `json:"at"` // when the results stream stored it
	Overall float64   `json:"overall"`
	// Violated are the rules it violated; Codes its findings' codes.
	Violated []string `json:"violated,omitempty"`
	Codes    []string `json:"codes,omitempty"`
}

// EntryOf is a scorecard's window entry.
func EntryOf(card *session.Scorecard, seq uint64, at time.Time) WindowEntry {
	e := WindowEntry{Seq: seq, Session: card.Session.Key, At: at.UTC(), Overall: card.Overall.Score}
	for _, r := range card.Rules {
		if r.Status == session.RuleViolated {
			e.Violated = append(e.Violated, r.Name)
		}
	}
	for _, c := range card.Components {
		for _, f := range c.Findings {
			if !slices.Contains(e.Codes, f.Code) {
				e.Codes = append(e.Codes, f.Code)
			}
		}
	}
	slices.Sort(e.Codes)
	return e
}

// Window is an agent's latest sessions, by results stream sequence, as
// the thresholds see them (entry ThresholdWindowKey).
type Window struct {
	Entries []WindowEntry `json:"entries"`
	// Total counts the sessions ever added: the basis of alert states.
	Total int `json:"total"`
}

// Add inserts e in sequence order, keeping the latest keep entries and
// none older than maxAge before the newest; false when e is already there
// (a redelivery).
func (w *Window) Add(e WindowEntry, keep int, maxAge time.Duration) bool {
	i, found := slices.BinarySearchFunc(w.Entries, e.Seq, func(x WindowEntry, seq uint64) int {
		switch {
		case x.Seq < seq:
			return -1
		case x.Seq > seq:
			return 1
		}
		return 0
	})
	if found {
		return false
	}
	w.Entries = slices.Insert(w.Entries, i, e)
	w.Total++
	if keep > 0 && len(w.Entries) > keep {
		w.Entries = slices.Delete(w.Entries, 0, len(w.Entries)-keep)
	}
	if maxAge > 0 {
		newest := w.Entries[len(w.Entries)-1].At
		for _, x := range w.Entries {
			newest = maxTime(newest, x.At)
		}
		w.Entries = slices.DeleteFunc(w.Entries, func(x WindowEntry) bool { return newest.Sub(x.At) > maxAge })
	}
	return true
}

func maxTime(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}

// WindowBounds is what an agent's window must keep for the thresholds
// that watch it: the most sessions of_last asks for (a rate threshold
// keeps up to MaxThresholdWindow) and the longest rate window.
func WindowBounds(ts []Threshold, agent string) (keep int, maxAge time.Duration, any bool) {
	for _, t := range ts {
		if !t.Watches(agent) {
			continue
		}
		any = true
		if t.OfLast > 0 {
			keep = max(keep, t.OfLast)
		} else {
			keep, maxAge = MaxThresholdWindow, max(maxAge, t.Window)
		}
	}
	return keep, maxAge, any
}

// maxEvidence bounds the sessions an alert names as evidence.
const maxEvidence = 20

// EvaluateThresholds judges an agent's window against the thresholds that
// watch it: one Evaluation (KindThreshold), each threshold a metric,
// firing or not, with the sessions that hit it as evidence.
func EvaluateThresholds(w *Window, agent string, ts []Threshold) Evaluation {
	ev := Evaluation{Kind: KindThreshold, Firing: map[string]Signal{}, Status: map[string]Signal{}}
	var evidence []SessionRef
	for _, t := range ts {
		if !t.Watches(agent) || len(w.Entries) == 0 {
			continue
		}
		hit := func(e WindowEntry) bool {
			if t.Rule != "" {
				return slices.Contains(e.Violated, t.Rule)
			}
			return slices.Contains(e.Codes, t.Finding)
		}
		what := "rule " + t.Rule + " violated"
		if t.Finding != "" {
			what = "finding " + t.Finding
		}
		var in []WindowEntry
		s := Signal{Kind: KindThreshold, Metric: t.Name}
		if t.OfLast > 0 {
			in = w.Entries[max(0, len(w.Entries)-t.OfLast):]
			hits := hitsOf(in, hit)
			s.Current, s.Limit, s.NCurrent = float64(len(hits)), float64(t.AtLeast), len(in)
			s.Test = TestCountOfLast
			s.Description = fmt.Sprintf("%s in at least %d of the last %d sessions", what, t.AtLeast, t.OfLast)
			s.Firing = len(in) >= t.AtLeast && len(hits) >= t.AtLeast
			evidence = appendEvidence(evidence, hits, s.Firing)
		} else {
			newest := w.Entries[len(w.Entries)-1].At
			for _, e := range w.Entries {
				newest = maxTime(newest, e.At)
			}
			for _, e := range w.Entries {
				if newest.Sub(e.At) <= t.Window {
					in = append(in, e)
				}
			}
			hits := hitsOf(in, hit)
			minN := t.MinSessions
			if minN == 0 {
				minN = DefaultThresholdMinSessions
			}
			rate := 100 * float64(len(hits)) / float64(len(in))
			s.Current, s.Limit, s.NCurrent = math.Round(rate*100)/100, t.RateOver, len(in)
			s.Test = TestRateInWindow
			s.Description = fmt.Sprintf("%s in over %s%% of the sessions within %s (at least %d sessions)", what,
				strconv.FormatFloat(t.RateOver, 'f', -1, 64), t.Window, minN)
			s.Firing = len(in) >= minN && rate > t.RateOver
			evidence = appendEvidence(evidence, hits, s.Firing)
		}
		ev.Judged = append(ev.Judged, t.Name)
		ev.Status[t.Name] = s
		if s.Firing {
			ev.Firing[t.Name] = s
		}
	}
	ev.Worst = evidence
	return ev
}

func hitsOf(in []WindowEntry, hit func(WindowEntry) bool) []WindowEntry {
	var out []WindowEntry
	for _, e := range in {
		if hit(e) {
			out = append(out, e)
		}
	}
	return out
}

// appendEvidence adds a firing threshold's sessions, newest first, up to
// maxEvidence in all.
func appendEvidence(ev []SessionRef, hits []WindowEntry, firing bool) []SessionRef {
	if !firing {
		return ev
	}
	for i := len(hits) - 1; i >= 0 && len(ev) < maxEvidence; i-- {
		if !slices.ContainsFunc(ev, func(r SessionRef) bool { return r.Session == hits[i].Session }) {
			ev = append(ev, SessionRef{Session: hits[i].Session, Overall: hits[i].Overall})
		}
	}
	return ev
}

// ThresholdWindowsFilter matches every threshold window.
const ThresholdWindowsFilter = "w.>"

// Remove drops a session's entries (lkscore forget); false when it had none.
func (w *Window) Remove(session string) bool {
	n := len(w.Entries)
	w.Entries = slices.DeleteFunc(w.Entries, func(e WindowEntry) bool { return e.Session == session })
	return len(w.Entries) != n
}

// ThresholdWindowKey is an agent's threshold window under one scoring
// version.
func ThresholdWindowKey(agent, scoringVersion string) string {
	return "w." + b64(agent) + "." + b64(scoringVersion)
}

// ThresholdSeverity is a threshold alert's severity: the threshold's own,
// else warning.
func ThresholdSeverity(ts []Threshold, name string) string {
	for _, t := range ts {
		if t.Name == name && t.Severity != "" {
			return t.Severity
		}
	}
	return session.Warning
}
