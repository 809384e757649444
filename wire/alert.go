package wire

import (
	"slices"
	"time"
)

// Alert statuses.
const (
	AlertFiring   = "firing"
	AlertResolved = "resolved"
)

// Alert is published on lkscore.alert.<kind>.<agent> when a condition
// starts (firing) and when it ends (resolved): once per agent, version,
// scoring version, kind and metric, however many sessions keep it up.
type Alert struct {
	ID             string  `json:"id"` // kind/agent/version/scoring_version/metric@since_seq
	Kind           string  `json:"kind"`
	Status         string  `json:"status"`
	Agent          string  `json:"agent"`
	Version        string  `json:"version"`
	ScoringVersion string  `json:"scoring_version"`
	Metric         string  `json:"metric"`
	Baseline       float64 `json:"baseline"`
	Current        float64 `json:"current"`
	Effect         float64 `json:"effect"`
	PValue         float64 `json:"p_value,omitempty"`
	QValue         float64 `json:"q_value,omitempty"`
	Limit          float64 `json:"limit,omitempty"`
	Test           string  `json:"test"`
	NBaseline      int     `json:"n_baseline"`
	NCurrent       int     `json:"n_current"`
	// BaselineOf says what the current figures were compared with.
	BaselineOf    string       `json:"baseline_of"`
	WorstSessions []SessionRef `json:"worst_sessions,omitempty"`
	CodesGrown    []CodeShare  `json:"codes_grown,omitempty"`
	Session       string       `json:"session"` // the scorecard that changed the state
	Seq           uint64       `json:"seq"`     // its results stream sequence
	Since         time.Time    `json:"since"`
	At            time.Time    `json:"at"`
	// Severity is a threshold alert's own (regression.thresholds); empty
	// for the others, whose severity follows their kind.
	Severity string `json:"severity,omitempty"`
}

// Forget takes the session out of the alert (lkscore forget): it no
// longer names it as the one that changed the state, nor among the worst.
func (a *Alert) Forget(session string) bool {
	changed := false
	if a.Session == session {
		a.Session, changed = "", true
	}
	n := len(a.WorstSessions)
	a.WorstSessions = slices.DeleteFunc(a.WorstSessions, func(r SessionRef) bool { return r.Session == session })
	return changed || len(a.WorstSessions) != n
}

// SessionRef names a session in alerts: its scorecard key and score.
type SessionRef struct {
	Session string  `json:"session"`
	Overall float64 `json:"overall"`
}

// CodeShare is a finding code's share of sessions on each side.
type CodeShare struct {
	Code     string  `json:"code"`
	Baseline float64 `json:"baseline"`
	Current  float64 `json:"current"`
}
