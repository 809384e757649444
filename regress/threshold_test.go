package regress

import (
	"strings"
	"testing"
	"time"
)

func entry(seq uint64, at time.Time, violated ...string) WindowEntry {
	return WindowEntry{Seq: seq, Session: "s" + string(rune('a'+seq%26)), At: at, Overall: 50, Violated: violated,
		Codes: append([]string{"slow_response"}, violated...)}
}

// TestThresholdCountsTheLastSessions: "at least 3 of the last 5" fires on
// the third hit inside the last five, whatever order replicas add them
// in, counts a redelivery once, and stops once hits fall out of the last
// five.
func TestThresholdCountsTheLastSessions(t *testing.T) {
	th := []Threshold{{Name: "t", Rule: "r", AtLeast: 3, OfLast: 5}}
	keep, maxAge, ok := WindowBounds(th, "a")
	if !ok || keep != 5 || maxAge != 0 {
		t.Fatalf("bounds %d %s %v", keep, maxAge, ok)
	}
	t0 := time.Unix(1e9, 0)
	var w Window
	hits := []bool{true, false, true, false, false, true, true, true, false, false}
	var firingAt []uint64
	// Added out of order in pairs, each twice.
	for i := 0; i < len(hits); i += 2 {
		for _, j := range []int{i + 1, i, i + 1} {
			var v []string
			if hits[j] {
				v = []string{"r"}
			}
			w.Add(entry(uint64(j+1), t0.Add(time.Duration(j)*time.Second), v...), keep, maxAge)
		}
		if ev := EvaluateThresholds(&w, "a", th); len(ev.Firing) == 1 {
			firingAt = append(firingAt, uint64(i+2))
		}
	}
	if w.Total != len(hits) || len(w.Entries) != 5 || w.Entries[0].Seq != 6 {
		t.Fatalf("window total %d, entries %+v", w.Total, w.Entries)
	}
	// Hits at seq 1,3,6,7,8. The last five at seq 4 are 1..4 (two hits),
	// at 6 are 2..6 (3, 6: two), at 8 are 4..8 (6, 7, 8: three, firing),
	// at 10 are 6..10 (6, 7, 8: still three).
	if len(firingAt) != 2 || firingAt[0] != 8 || firingAt[1] != 10 {
		t.Errorf("firing after the pairs ending %v, want 8 and 10", firingAt)
	}
}

// TestThresholdRateInWindow: "over 20% within 1h, at least 10 sessions":
// not before 10 sessions, firing above 20%, and sessions older than the
// window leave it.
func TestThresholdRateInWindow(t *testing.T) {
	th := []Threshold{{Name: "t", Finding: "tool_error", RateOver: 20, Window: time.Hour, MinSessions: 10}}
	keep, maxAge, _ := WindowBounds(th, "a")
	t0 := time.Unix(1e9, 0)
	var w Window
	add := func(seq uint64, at time.Time, hit bool) Evaluation {
		e := entry(seq, at)
		if hit {
			e.Codes = append(e.Codes, "tool_error")
		}
		w.Add(e, keep, maxAge)
		return EvaluateThresholds(&w, "a", th)
	}
	for i := range 9 {
		if ev := add(uint64(i+1), t0.Add(time.Duration(i)*time.Minute), i < 5); len(ev.Firing) != 0 {
			t.Fatalf("fired with %d sessions", i+1)
		}
	}
	ev := add(10, t0.Add(10*time.Minute), false)
	if s := ev.Firing["t"]; !s.Firing || s.Current != 50 || s.NCurrent != 10 || len(ev.Worst) != 5 || !strings.Contains(s.Description, "over 20%") {
		t.Fatalf("at 10 sessions: %+v worst %v", ev.Status["t"], ev.Worst)
	}
	// Two hours later: the old sessions left the window.
	ev = add(11, t0.Add(130*time.Minute), false)
	if len(ev.Firing) != 0 || ev.Status["t"].NCurrent != 1 || len(w.Entries) != 1 {
		t.Fatalf("after the window: %+v, %d entries", ev.Status["t"], len(w.Entries))
	}
}

// TestThresholdValidate: every wrong threshold is refused, naming it.
func TestThresholdValidate(t *testing.T) {
	rules := []string{"r"}
	for _, c := range []struct {
		th   Threshold
		want string
	}{
		{Threshold{Name: "a", Rule: "nope", AtLeast: 1, OfLast: 2}, `rule "nope" is not in scoring.rules`},
		{Threshold{Name: "a", Rule: "r", Finding: "x", AtLeast: 1, OfLast: 2}, "exactly one of rule and finding"},
		{Threshold{Name: "a", Rule: "r"}, "either at_least and of_last"},
		{Threshold{Name: "a", Rule: "r", AtLeast: 3, OfLast: 2}, "at_least (3) <= of_last (2)"},
		{Threshold{Name: "a", Rule: "r", AtLeast: 1, OfLast: 2, RateOver: 5, Window: time.Hour}, "either"},
		{Threshold{Name: "a", Rule: "r", RateOver: 150, Window: time.Hour}, "rate_over"},
		{Threshold{Name: "a b", Rule: "r", AtLeast: 1, OfLast: 1}, "name"},
		{Threshold{Name: "a", Rule: "r", AtLeast: 1, OfLast: 1, Severity: "info"}, "severity"},
	} {
		err := c.th.Validate(0, rules)
		if err == nil || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), "regression.thresholds[0] ("+c.th.Name+")") {
			t.Errorf("%+v: %v, want %q", c.th, err, c.want)
		}
	}
	if err := (Threshold{Name: "ok", Rule: "r", AtLeast: 2, OfLast: 20}).Validate(0, rules); err != nil {
		t.Error(err)
	}
}
