package dashboard

import (
	"context"
	"fmt"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/lkscore/lkscore/config"
	"github.com/lkscore/lkscore/rules"
	"github.com/lkscore/lkscore/scoring"
	"github.com/lkscore/lkscore/session"
)

// TestPolicyAndRulesShown: scorecards scored under examples/policies.yaml
// show their policy and every rule's result on the session page, and the
// overview counts each rule's violations among the sessions it was
// evaluated on, linking to them.
func TestPolicyAndRulesShown(t *testing.T) {
	cfg, err := config.LoadScoring("../examples/policies.yaml")
	if err != nil {
		t.Fatal(err)
	}
	scorer, err := rules.NewScorer(cfg)
	if err != nil {
		t.Fatal(err)
	}
	sessionOf := func(i int, agent string, e2e float64, closeReason string) scoring.Session {
		conf := 0.95
		s := scoring.Session{Identity: session.Identity{Key: fmt.Sprintf("RM_%d/AJ_%d", i, i), AgentName: agent}, Close: session.Close{CloseReason: closeReason, CloseReasonSource: "otlp_log"}}
		for turn := range 6 {
			at := float64(100 + 10*turn)
			lat := e2e
			s.Items = append(s.Items,
				scoring.Item{ID: fmt.Sprintf("u%d", turn), Type: scoring.TypeMessage, Role: scoring.RoleUser, Text: "when can I come", CreatedAt: at, TranscriptConfidence: &conf},
				scoring.Item{ID: fmt.Sprintf("a%d", turn), Type: scoring.TypeMessage, Role: scoring.RoleAssistant, Text: "tomorrow at ten", CreatedAt: at + 3, HasMetrics: true, E2ELatency: &lat})
		}
		return s
	}
	cards := []session.Scorecard{
		scorer.Score(sessionOf(1, "booking", 3.2, "CR_USER_INITIATED")), // slow, no confirmation: two violations
		scorer.Score(sessionOf(2, "booking", 0.8, "CR_USER_INITIATED")), // no confirmation
		scorer.Score(sessionOf(3, "support", 0.8, "CR_ERROR")),          // a bad close, no handoff
	}
	idx := NewIndex(10, "version:")
	for i := range cards {
		idx.add(entryOf(uint64(i+1), time.Now(), &cards[i], "version:"))
	}
	h := testHandler(t, "")
	h.index = idx
	h.src.Scorecard = func(_ context.Context, seq uint64) (session.Scorecard, error) { return cards[seq-1], nil }

	// What each rule should count, from the scorecards themselves.
	want := map[string][2]int{} // rule → violated, evaluated
	for _, c := range cards {
		for _, r := range c.Rules {
			w := want[r.Name]
			w[1]++
			if r.Status == session.RuleViolated {
				w[0]++
			}
			want[r.Name] = w
		}
	}
	if want["booking_latency_budget"] != [2]int{1, 2} || want["booking_confirmed"] != [2]int{2, 2} || want["allowed_close_reason"] != [2]int{1, 3} {
		t.Fatalf("the scorecards do not say what the test expects: %v", want)
	}
	body := get(h, "127.0.0.1:1", "/ui", nil).Body.String()
	row := regexp.MustCompile(`<tr class="rule" data-rule="([^"]+)"><td><a href="([^"]+)">[^<]+</a></td><td class="num violated">(\d+)</td><td class="num">(\d+)</td>`)
	rows := row.FindAllStringSubmatch(body, -1)
	if len(rows) != len(want) {
		t.Fatalf("overview shows %d rules, want %d:\n%s", len(rows), len(want), body)
	}
	for _, r := range rows {
		w := want[r[1]]
		if r[3] != fmt.Sprint(w[0]) || r[4] != fmt.Sprint(w[1]) || !strings.Contains(r[2], "code=rule."+r[1]) {
			t.Errorf("overview row %s: violated %s of %s, link %s; want %d of %d", r[1], r[3], r[4], r[2], w[0], w[1])
		}
	}
	// The link finds the violating sessions.
	list := get(h, "127.0.0.1:1", "/ui/sessions?code=rule.booking_latency_budget", nil).Body.String()
	if !strings.Contains(list, "RM_1/AJ_1") || strings.Contains(list, "RM_2/AJ_2") {
		t.Errorf("sessions filtered by rule.booking_latency_budget:\n%s", list)
	}
	page := get(h, "127.0.0.1:1", "/ui/session?key=RM_1/AJ_1", nil).Body.String()
	for _, w := range []string{`id="policy">policy <b>booking</b> <code>` + cards[0].Policy.Hash, `data-rule="booking_latency_budget" data-status="violated"`,
		`data-rule="allowed_close_reason" data-status="passed"`, "<code>metrics.e2e_latency_p95_ms = 3200</code>", "rule.booking_latency_budget"} {
		if !strings.Contains(page, w) {
			t.Errorf("session page lacks %q", w)
		}
	}
}
