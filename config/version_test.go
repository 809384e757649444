package config

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/lkscore/lkscore/regress"
	"github.com/lkscore/lkscore/scoring"
	"github.com/lkscore/lkscore/session"
)

// TestOneVersionRule: with regression.version_tag "release:", a session
// tagged release:v2 is version v2 for a policy's match.versions, for a
// rule's when.versions, and for the regression detector (regress.KeyOf),
// whichever way the scorer is built (the daemon's config, the offline
// tools' LoadScorer). Before issue 66 policies read "version:" whatever
// the setting, and the policy silently never matched.
func TestOneVersionRule(t *testing.T) {
	path := filepath.Join(t.TempDir(), "lkscore.yml")
	yml := `regression: {version_tag: "release:"}
scoring:
  agents:
    booking:
      match: {versions: [v2]}
      verdict: {pass: 99}
  rules:
    - name: v2_only
      expr: "true"
      when: {versions: [v2]}
      component: turn_handling
      severity: info
`
	if err := os.WriteFile(path, []byte(yml), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, err := LoadForTools(path, func(string) string { return "" }, nil)
	if err != nil {
		t.Fatal(err)
	}
	fromDaemon, err := cfg.Scorer()
	if err != nil {
		t.Fatal(err)
	}
	offline, err := LoadScorer(path)
	if err != nil {
		t.Fatal(err)
	}
	s := scoring.Session{Identity: session.Identity{Key: "RM_a/AJ_b", RoomID: "RM_a", JobID: "AJ_b", AgentName: "booking"}, Facts: &session.Facts{Tags: []string{"release:v2", "version:v1"}}, Items: []scoring.Item{{ID: "u", Type: scoring.TypeMessage, Role: "user", Text: "hi"}}}
	for name, sc := range map[string]*scoring.Scorer{"the daemon's scorer": fromDaemon, "LoadScorer": offline} {
		card := sc.Score(s)
		if card.Policy == nil || card.Policy.Name != "booking" {
			t.Errorf("%s: policy %+v, want booking's (match.versions [v2], tag release:v2)", name, card.Policy)
		}
		applied := false
		for _, r := range card.Rules {
			applied = applied || r.Name == "v2_only"
		}
		if !applied {
			t.Errorf("%s: the rule with when.versions [v2] did not apply: %+v", name, card.Rules)
		}
		if v := regress.KeyOf(&card, cfg.Regression.VersionTag).Version; v != "v2" {
			t.Errorf("%s: regression reads version %q, want v2", name, v)
		}
	}
}
