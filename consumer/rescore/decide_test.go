package rescore

import (
	"crypto/sha256"
	"slices"
	"testing"

	"github.com/lkscore/lkscore/scoring"
	"github.com/lkscore/lkscore/session"
)

// TestDecide: a session whose work item is gone is reported removed; one
// scored before by this model reuses its audio unless the audio is to be
// measured again or it was scored without a recording.
func TestDecide(t *testing.T) {
	t.Parallel()
	same := &oldCard{model: scoring.ModelVersion}
	older := &oldCard{model: "0.9.0"}
	for _, c := range []struct {
		name                       string
		hasItem                    bool
		old                        *oldCard
		metadataOnly, measureAudio bool
		want                       choice
	}{
		{"no item, old card", false, same, false, false, choice{removed: true}},
		{"no item, no card", false, nil, false, false, choice{removed: true}},
		{"new session", true, nil, false, false, choice{}},
		{"same model", true, same, false, false, choice{reuseAudio: true}},
		{"same model, measure", true, same, false, true, choice{}},
		{"older model", true, older, false, false, choice{}},
		{"metadata only", true, same, true, false, choice{}},
	} {
		if got := decide(c.hasItem, c.old, c.metadataOnly, c.measureAudio); got != c.want {
			t.Errorf("%s: %+v, want %+v", c.name, got, c.want)
		}
	}
}

// TestSessionsOf: every session with a work item or only an old scorecard,
// once each, sorted.
func TestSessionsOf(t *testing.T) {
	t.Parallel()
	got := sessionsOf(map[string]int{"b/2": 1, "a/1": 1}, map[string]bool{"a/1": true, "c/3": true})
	if want := []string{"a/1", "b/2", "c/3"}; !slices.Equal(got, want) {
		t.Errorf("%v, want %v", got, want)
	}
}

// TestPublishPlanAndOutcome: what a run enqueues after a kill, and what it
// reports once the workers published: a session already published is
// counted and not enqueued; one an earlier run enqueued is waited for, not
// enqueued again; the rest are enqueued in order. A scorecard the workers
// did not publish is not yet published; one whose bytes differ is
// mismatched.
func TestPublishPlanAndOutcome(t *testing.T) {
	t.Parallel()
	d := func(s string) digest { return sha256.Sum256([]byte(s)) }
	fresh := map[string]digest{"a": d("a"), "b": d("b"), "c": d("c"), "d": d("d"), "e": d("e")}
	todo, waiting, already := publishPlan(fresh, map[string]bool{"a": true, "x": true}, map[string]bool{"b": true, "a": true})
	if !slices.Equal(todo, []string{"c", "d", "e"}) || !slices.Equal(waiting, []string{"b"}) || already != 1 {
		t.Fatalf("todo %v waiting %v already %d", todo, waiting, already)
	}
	got := map[string]digest{"b": d("b"), "c": d("c"), "d": d("other")}
	notYet, mismatched := outcome(append(todo, waiting...), got, fresh)
	if !slices.Equal(notYet, []string{"e"}) || !slices.Equal(mismatched, []string{"d"}) {
		t.Errorf("not yet %v, mismatched %v", notYet, mismatched)
	}
}

// TestDiffer: verdict transitions, mean score change, new sessions and
// rule violations by agent; only sessions that changed are listed, the
// verdict changes first among the movers.
func TestDiffer(t *testing.T) {
	t.Parallel()
	card := func(verdict string, score float64, rules ...string) *session.Scorecard {
		c := &session.Scorecard{Overall: session.Overall{Verdict: verdict, Score: score}}
		for _, r := range rules {
			c.Rules = append(c.Rules, session.RuleResult{Name: r, Status: session.RuleViolated})
		}
		return c
	}
	old := func(verdict string, score float64) *oldCard { return briefOf(card(verdict, score), 1) }
	d := newDiffer()
	d.add("s1", "a", old("pass", 90), card("fail", 50, "slow"))
	d.add("s2", "a", old("pass", 90), card("pass", 80))
	d.add("s3", "a", old("pass", 90), card("pass", 90))
	d.add("s4", "b", nil, card("warn", 70))
	var rep Report
	d.report(&rep)
	if len(rep.Agents) != 2 || rep.Agents[0].Agent != "a" || rep.Agents[0].Transitions["pass→fail"] != 1 ||
		rep.Agents[0].MeanDelta != -16.67 || rep.Agents[0].Violations["slow"] != 1 || rep.Agents[1].New != 1 {
		t.Fatalf("agents %+v", rep.Agents)
	}
	var changed []string
	for _, c := range rep.Changed {
		changed = append(changed, c.Session)
	}
	if !slices.Equal(changed, []string{"s1", "s2", "s4"}) || len(rep.Movers) != 2 || rep.Movers[0].Session != "s1" {
		t.Errorf("changed %v, movers %+v", changed, rep.Movers)
	}
}
