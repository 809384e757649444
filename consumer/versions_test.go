package consumer

import (
	"testing"
	"time"

	"github.com/lkscore/lkscore/internal/population"
	"github.com/lkscore/lkscore/internal/testenv"
	"github.com/lkscore/lkscore/regress"
	"github.com/lkscore/lkscore/scoring"
	"github.com/lkscore/lkscore/wire"
)

// TestPolicyChangeKeepsOtherAgentsHistory (issue 68): two agents, and a
// change to one agent's policy between their versions 1 and 2. The other
// agent (support) keeps its scoring version, so its version 2, 300 ms
// slower, is judged against its version 1 history and alerts with no new
// baseline; the changed agent (booking) starts a new scoring version,
// where its version 2 has no earlier version to be judged against.
func TestPolicyChangeKeepsOtherAgentsHistory(t *testing.T) {
	t.Parallel()
	ns := startNATS(t)
	startWorker(t, ns.URL())
	js := testenv.JetStream(t, ns.URL())
	withPolicy := func(pass float64) *scoring.Scorer {
		cfg := scoring.DefaultConfig()
		booking := scoring.AgentPolicy{Config: scoring.DefaultConfig()}
		booking.Verdict.Pass = pass
		cfg.Agents = map[string]scoring.AgentPolicy{"booking": booking}
		sc, err := scoring.NewScorer(cfg)
		if err != nil {
			t.Fatal(err)
		}
		return sc
	}
	before, after := withPolicy(85), withPolicy(90) // booking's pass bar moves
	if before.VersionFor("support") != after.VersionFor("support") {
		t.Fatalf("booking's policy changed support's version: %s → %s", before.VersionFor("support"), after.VersionFor("support"))
	}
	if before.VersionFor("booking") == after.VersionFor("booking") {
		t.Fatalf("booking's policy changed and its version did not: %s", before.VersionFor("booking"))
	}

	publishCards(t, js, population.Generate(before, population.Baseline("support", "1"), 1, 40))
	publishCards(t, js, population.Generate(before, population.Baseline("booking", "1"), 11, 40))
	slowSupport, slowBooking := population.Baseline("support", "2"), population.Baseline("booking", "2")
	slowSupport.E2EMedianMs += 300
	slowBooking.E2EMedianMs += 300
	publishCards(t, js, population.Generate(after, slowSupport, 2, 40))
	publishCards(t, js, population.Generate(after, slowBooking, 12, 40))

	testenv.WaitFor(t, settleWait, "support's regression alert", func() bool {
		return hasAlert(alertMsgs(t, ns.URL()), regress.KindRegression, regress.MetricE2EP50, wire.AlertFiring)
	})
	time.Sleep(time.Second) // an alert for booking would be out by now
	for _, a := range alertMsgs(t, ns.URL()) {
		switch {
		case a.Agent == "booking" && a.Kind == regress.KindRegression:
			t.Errorf("booking's version 2, under its new scoring version, was judged against version 1: %+v", a)
		case a.Agent == "support" && a.Kind == regress.KindRegression && a.Status == wire.AlertFiring:
			if a.Version != "2" || a.BaselineOf != "version 1" || a.ScoringVersion != before.VersionFor("support") {
				t.Errorf("support's alert evidence %+v", a)
			}
		}
	}
}
