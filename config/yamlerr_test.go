package config

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestConfigErrorsNameTheKey: a value of the wrong type and an unknown key
// are reported with the key's path, its line and a hint.
func TestConfigErrorsNameTheKey(t *testing.T) {
	for yml, wants := range map[string][]string{
		"nats:\n  publish_timeout: 20\n  embeded_port: 4222\n": {
			`nats.publish_timeout (line 2): "20" is not a duration; write it with a unit, e.g. 20s`,
			"nats.embeded_port (line 3): no such setting; did you mean nats.embedded_port?"},
		"scoring:\n  weights:\n    turn_handlin: 2\n": {"scoring.weights.turn_handlin (line 3): no such setting; did you mean scoring.weights.turn_handling?"},
		"pipeline:\n  concurrency: many\n":            {`pipeline.concurrency (line 2): "many" is not a whole number`},
		"nats:\n  zzzzzzzz: 1\n":                      {"nats.zzzzzzzz (line 2): no such setting"},
	} {
		path := filepath.Join(t.TempDir(), "c.yml")
		if err := os.WriteFile(path, []byte(yml), 0o600); err != nil {
			t.Fatal(err)
		}
		_, err := Load(path, func(string) string { return "" }, nil)
		if err == nil {
			t.Fatalf("%q: no error", yml)
		}
		for _, w := range wants {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%q: error %q lacks %q", yml, err, w)
			}
		}
		if strings.Contains(yml, "zzzz") && strings.Contains(err.Error(), "did you mean") {
			t.Errorf("%q: a suggestion for a key nothing is near: %v", yml, err)
		}
	}
}
