package scoring_test

import (
	"testing"

	"github.com/lkscore/lkscore/rules"
	"github.com/lkscore/lkscore/scoring"
)

// TestVersionPerAgent (issue 68): a scorecard's scoring version is its
// agent's: a change to one agent's policy, or to a rule only it can meet,
// leaves every other agent's version (and so its baselines, history and
// windows) as it was; a change to the scoring section or to a rule for
// every agent changes them all. A config without policies or rules keeps
// the version it always had (Config.Version).
func TestVersionPerAgent(t *testing.T) {
	plain := scoring.DefaultConfig()
	sc, err := scoring.NewScorer(plain)
	if err != nil {
		t.Fatal(err)
	}
	if sc.VersionFor("anyone") != plain.Version() || sc.VersionFor("") != plain.Version() {
		t.Fatalf("no policies: version %s, want the config's %s", sc.VersionFor("anyone"), plain.Version())
	}

	allRules, _ := examplePolicies(t)
	allRules.Agents = map[string]scoring.AgentPolicy{} // as a config file without policies may load
	for i := range allRules.Rules {
		allRules.Rules[i].When.Agents = nil
	}
	if sc, err := rules.NewScorer(allRules); err != nil || sc.VersionFor("booking") != allRules.Version() {
		t.Fatalf("rules for every agent, no policies: %v, version %s, want the config's %s", err, sc.VersionFor("booking"), allRules.Version())
	}

	_, before := examplePolicies(t)
	versions := func(sc *scoring.Scorer) map[string]string {
		out := map[string]string{}
		for _, a := range []string{"booking", "support", "other", ""} {
			out[a] = sc.VersionFor(a)
		}
		return out
	}
	was := versions(before)
	if was["booking"] == was["support"] || was["booking"] == was["other"] || was["support"] == was["other"] {
		t.Fatalf("agents with their own policies share a version: %v", was)
	}
	if was["other"] != was[""] {
		t.Fatalf("two agents without a policy or rule of their own differ: %v", was)
	}

	change := func(name string, edit func(*scoring.Config), changed ...string) {
		t.Helper()
		cfg, _ := examplePolicies(t)
		edit(&cfg)
		after, err := rules.NewScorer(cfg)
		if err != nil {
			t.Fatal(err)
		}
		now := versions(after)
		for a, v := range was {
			want := v
			for _, c := range changed {
				if c == a || c == "*" {
					want = ""
				}
			}
			if want != "" && now[a] != v {
				t.Errorf("%s: agent %q's version changed %s → %s", name, a, v, now[a])
			}
			if want == "" && now[a] == v {
				t.Errorf("%s: agent %q's version did not change (%s)", name, a, v)
			}
		}
		// Every card carries its agent's version.
		s := heldOutSessions(t)[0].session
		for _, a := range []string{"booking", "support", "other"} {
			s.AgentName = a
			if card := after.Score(s); card.ScoringVersion != now[a] {
				t.Errorf("%s: %s's card says %s, want %s", name, a, card.ScoringVersion, now[a])
			}
		}
	}
	change("booking's pass bar", func(c *scoring.Config) {
		p := c.Agents["booking"]
		p.Verdict.Pass = 90
		c.Agents["booking"] = p
	}, "booking")
	change("support's match", func(c *scoring.Config) {
		p := c.Agents["support"]
		p.Match.Tags = append(p.Match.Tags, "beta")
		c.Agents["support"] = p
	}, "support")
	change("a rule for booking", func(c *scoring.Config) {
		for i, r := range c.Rules {
			if len(r.When.Agents) == 1 && r.When.Agents[0] == "booking" {
				c.Rules[i].Message += " (edited)"
				return
			}
		}
		t.Fatal("examples/policies.yaml has no rule for booking alone")
	}, "booking")
	change("the scoring section", func(c *scoring.Config) { c.Latency.E2EBadMs++ }, "*")

}
