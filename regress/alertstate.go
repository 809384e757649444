package regress

import (
	"fmt"
	"time"

	"github.com/lkscore/lkscore/wire"
)

// AlertState is the entry under AlertStateKey: what the detector remembers per agent/version/scoring
// version: the alerts firing now, by kind/metric, and the outbox of state
// changes recorded but maybe not yet published.
type AlertState struct {
	Firing map[string]wire.Alert `json:"firing"`
	Outbox []wire.Alert          `json:"outbox,omitempty"`
	// Basis is the history size the last recorded change was judged on:
	// a replica that judged an older snapshot changes nothing.
	Basis int `json:"basis"`
}

// Remove takes the session out of every alert the state holds (firing and
// in the outbox): lkscore forget.
func (st *AlertState) Remove(session string) bool {
	changed := false
	for id, a := range st.Firing {
		if a.Forget(session) {
			st.Firing[id], changed = a, true
		}
	}
	for i := range st.Outbox {
		changed = st.Outbox[i].Forget(session) || changed
	}
	return changed
}

// Trigger is the scorecard whose evaluation changes an alert state: its
// session key, its results stream sequence, and when it was handled.
type Trigger struct {
	Session string
	Seq     uint64
	At      time.Time
}

// Advance is the alert state machine of one agent version (key), pure: it
// adds to st's outbox every metric of ev that starts firing or that
// resolves. A firing metric resolves once ev says it is clearly back to
// normal (Evaluation.Clear) and it has fired for
// minFiring (regression.min_firing) at least, so a burst of sessions cannot fire and
// resolve an alert in one go. The resolved message carries the figures and
// sessions that resolved it, not the firing ones.
func Advance(st *AlertState, key Key, ev Evaluation, cfg Config, minFiring time.Duration, by Trigger) {
	now, session, seq := by.At, by.Session, by.Seq
	if st.Firing == nil {
		st.Firing = map[string]wire.Alert{}
	}
	for _, metric := range ev.Judged {
		id := ev.Kind + "/" + metric
		old, wasFiring := st.Firing[id]
		sig, firing := ev.Firing[metric]
		switch {
		case firing && !wasFiring:
			a := alertOf(key, ev, sig, by)
			a.Status, a.Since = wire.AlertFiring, now
			a.ID = fmt.Sprintf("%s/%s/%s/%s/%s@%d", ev.Kind, a.Agent, a.Version, a.ScoringVersion, metric, seq)
			st.Firing[id] = a
			st.Outbox = append(st.Outbox, a)
		case !firing && wasFiring && ev.Clear(metric, cfg) && now.Sub(old.Since) >= minFiring:
			a := old
			if cur, ok := ev.Latest(metric); ok {
				a.Baseline, a.Current, a.Effect, a.PValue, a.QValue = cur.Baseline, cur.Current, cur.Effect, cur.P, cur.Q
				if cur.NCurrent > 0 {
					a.Limit, a.NBaseline, a.NCurrent = cur.Limit, cur.NBaseline, cur.NCurrent
				}
			}
			if c := ev.Comparison; c != nil {
				a.WorstSessions, a.CodesGrown = c.WorstSessions, c.CodesGrown
			} else {
				a.WorstSessions, a.CodesGrown = ev.Worst, nil
			}
			a.Status, a.At, a.Session, a.Seq = wire.AlertResolved, now, session, seq
			delete(st.Firing, id)
			st.Outbox = append(st.Outbox, a)
		}
	}
}

// alertOf is the firing alert of one signal of ev.
func alertOf(key Key, ev Evaluation, s Signal, by Trigger) wire.Alert {
	session, seq, now := by.Session, by.Seq, by.At
	a := wire.Alert{Kind: ev.Kind, Agent: key.Agent, Version: key.Version, ScoringVersion: key.ScoringVersion, Metric: s.Metric,
		Baseline: s.Baseline, Current: s.Current, Effect: s.Effect, PValue: s.P, QValue: s.Q, Limit: s.Limit, Test: s.Test,
		NBaseline: s.NBaseline, NCurrent: s.NCurrent, BaselineOf: ev.BaselineOf, Session: session, Seq: seq, At: now}
	if s.Description != "" {
		a.BaselineOf = s.Description
	}
	if c := ev.Comparison; c != nil {
		a.WorstSessions, a.CodesGrown = c.WorstSessions, c.CodesGrown
	} else {
		a.WorstSessions = ev.Worst
	}
	return a
}
