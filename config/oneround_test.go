package config

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestConfigErrorsInOneRound: a typo'd key, a bad duration, a bad log
// level, nats.replicas 0, a rule that does not compile and an unparsable
// environment variable are reported together, the file's with their
// lines, the variable once by name (issue 66: two rounds, and a second,
// wrong error for the variable).
func TestConfigErrorsInOneRound(t *testing.T) {
	path := filepath.Join(t.TempDir(), "lkscore.yml")
	yml := `log_level: loud
nats:
  replicas: 0
  publish_timout: 2s
http:
  body_timeout: 5x
scoring:
  rules:
    - name: broken
      expr: "close_reason =="
      severity: warning
      component: turn_handling
`
	if err := os.WriteFile(path, []byte(yml), 0o600); err != nil {
		t.Fatal(err)
	}
	env := map[string]string{"LKSCORE_CONCURRENCY": "abc", "LIVEKIT_API_KEY": "k", "LIVEKIT_API_SECRET": "a-secret-of-32-characters-or-so-x"}
	_, err := Load(path, func(k string) string { return env[k] }, nil)
	if err == nil {
		t.Fatal("loaded")
	}
	msg := err.Error()
	for _, want := range []string{"line 4", "publish_timout", "line 6", "5x", "log_level", "nats.replicas", "broken", "LKSCORE_CONCURRENCY"} {
		if !strings.Contains(msg, want) {
			t.Errorf("the error does not name %q:\n%s", want, msg)
		}
	}
	if strings.Contains(msg, "pipeline.concurrency") {
		t.Errorf("an unparsable LKSCORE_CONCURRENCY gives a second, wrong error:\n%s", msg)
	}
}
