package config

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestPricingFromYAML (issue 69): scoring.pricing loads from the file as
// the docs show it; its mistakes come in the one round of config errors,
// a typo'd key with its line, a bad price with its key.
func TestPricingFromYAML(t *testing.T) {
	dir := t.TempDir()
	write := func(name, body string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	env := func(k string) string {
		return map[string]string{"LIVEKIT_API_KEY": "APIk", "LIVEKIT_API_SECRET": "s"}[k]
	}
	good := write("good.yml", `scoring:
  pricing:
    currency: USD
    prices:
      - {provider: openai, model: gpt-4o-mini, input_token: 0.00000015, cached_input_token: 0.000000075, output_token: 0.0000006}
      - {provider: openai, model: gpt-4o-mini, effective: 2026-12-01, input_token: 0.0000003, output_token: 0.0000012}
      - {provider: cartesia, model: sonic-2, character: 0.00003}
`)
	cfg, err := Load(good, env, nil)
	if err != nil {
		t.Fatal(err)
	}
	if p := cfg.Scoring.Pricing; p == nil || p.Currency != "USD" || len(p.Prices) != 3 || p.Prices[1].Effective != "2026-12-01" ||
		p.Prices[0].OutputToken != 0.0000006 {
		t.Fatalf("pricing %+v", cfg.Scoring.Pricing)
	}
	bad := write("bad.yml", `scoring:
  pricing:
    currency: USD
    prices:
      - {provider: openai, model: gpt-4o-mini, output_tokn: 0.0000006}
      - {provider: openai, model: gpt-4o, effective: 2026-02-30, input_token: -1}
`)
	_, err = Load(bad, env, nil)
	for _, want := range []string{"line 5", "output_tokn", "prices[1].effective", "prices[1].input_token"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("the errors do not say %q: %v", want, err)
		}
	}
}
