package scoring

import (
	"encoding/json"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/lkscore/lkscore/session"
)

// TestDateOf: the pure calendar agrees with the time package on 100,000
// random instants from 1900 to 2200, and knows which dates exist.
func TestDateOf(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for range 100_000 {
		u := rng.Int64N(9_500_000_000) - 2_208_988_800
		if got, want := dateOf(u), time.Unix(u, 0).UTC().Format(time.DateOnly); got != want {
			t.Fatalf("dateOf(%d) = %s, want %s", u, got, want)
		}
	}
	for s, want := range map[string]bool{"2024-02-29": true, "2026-02-29": false, "2026-13-01": false, "2026-04-31": false,
		"2026-12-06": true, "2026-1-06": false, "": false, "20261206xx": false} {
		if isDate(s) != want {
			t.Errorf("isDate(%q) = %v", s, !want)
		}
	}
}

func usageOf(models ...session.ModelUsage) *session.Usage {
	return session.UsageOf(&session.Facts{UsageReported: true, Usage: models}, 4)
}

func count(n int) session.Opt[int]        { return session.Opt[int]{V: n, Set: true} }
func secs(v float64) session.Opt[float64] { return session.Opt[float64]{V: v, Set: true} }

// TestCostOfACall (issue 69): each model priced by its row in force on the
// call's day; a later row prices later calls only; a model with no row is
// unpriced, listed and never 0; no table or no report, no cost.
func TestCostOfACall(t *testing.T) {
	p := &Pricing{Currency: "USD", Prices: []Price{
		{Provider: "openai", Model: "gpt-4o-mini", InputToken: 0.15e-6, CachedInputToken: 0.075e-6, OutputToken: 0.6e-6},
		{Provider: "openai", Model: "gpt-4o-mini", Effective: "2026-12-01", InputToken: 0.3e-6, CachedInputToken: 0.1e-6, OutputToken: 1.2e-6},
		{Provider: "cartesia", Model: "sonic-2", Character: 30e-6},
		{Provider: "deepgram", Model: "nova-3", AudioSecond: 0.0043 / 60},
	}}
	if err := p.validate(); err != nil {
		t.Fatal(err)
	}
	u := usageOf(
		session.ModelUsage{Type: session.UsageLLM, Provider: "openai", Model: "gpt-4o-mini", InputTokens: count(15231),
			InputCachedTokens: count(5120), OutputTokens: count(2017)},
		session.ModelUsage{Type: session.UsageTTS, Provider: "cartesia", Model: "sonic-2", CharactersCount: count(1844), AudioDurationS: secs(41.23)},
		session.ModelUsage{Type: session.UsageSTT, Provider: "deepgram", Model: "nova-3", AudioDurationS: secs(52.7)},
		session.ModelUsage{Type: session.UsageEOT, Provider: "livekit", Model: "turn-detector", TotalRequests: count(9)},
	)
	nov := 1795000000.0 // 2026-11-18
	dec := 1796319506.0 // 2026-12-03
	before, after := p.costOf(u, nov, 120), p.costOf(u, dec, 120)
	llm := func(in, cached, out float64) float64 { return money((15231-5120)*in + 5120*cached + 2017*out) }
	wantBefore := money(llm(0.15e-6, 0.075e-6, 0.6e-6) + money(1844*30e-6) + money(52.7*0.0043/60))
	if before.Total != wantBefore || before.Rows[0].Effective != "" || before.Rows[0].Amount != llm(0.15e-6, 0.075e-6, 0.6e-6) {
		t.Errorf("a November call: %+v, want total %v", before, wantBefore)
	}
	if after.Rows[0].Effective != "2026-12-01" || after.Rows[0].Amount != llm(0.3e-6, 0.1e-6, 1.2e-6) || after.Total <= before.Total {
		t.Errorf("a December call is priced by the December row: %+v", after)
	}
	if len(after.Unpriced) != 1 || after.Unpriced[0] != "livekit/turn-detector" || after.Total == 0 {
		t.Errorf("the turn detector has no price: %+v", after.Unpriced)
	}
	if !after.PerMinute.Set || after.PerMinute.V != money(after.Total/2) {
		t.Errorf("per minute of a 2-minute call: %+v", after.PerMinute)
	}
	if c := p.costOf(session.UsageOf(&session.Facts{}, 0), dec, 60); c != nil {
		t.Errorf("no usage report, and a cost: %+v", c)
	}
	if c := (*Pricing)(nil).costOf(u, dec, 60); c != nil {
		t.Errorf("no price table, and a cost: %+v", c)
	}
	// Only unpriced models: the cost says so, with a total of 0 that the
	// unpriced list qualifies, never a bare 0.
	only := p.costOf(usageOf(session.ModelUsage{Type: session.UsageLLM, Provider: "acme", Model: "x", OutputTokens: count(5)}), dec, 60)
	b, _ := json.Marshal(only)
	if !strings.Contains(string(b), `"unpriced":["acme/x"]`) {
		t.Errorf("an unknown model: %s", b)
	}
}

// TestPricingValidation: every problem at once, each naming its key.
func TestPricingValidation(t *testing.T) {
	p := &Pricing{Prices: []Price{
		{Provider: "openai", Model: "gpt-4o", Effective: "2026-02-30", OutputToken: -1},
		{Model: "nameless"},
		{Provider: "a", Model: "b"}, {Provider: "a", Model: "b"},
	}}
	err := p.validate()
	for _, want := range []string{"scoring.pricing.currency", "prices[0].effective", "prices[0].output_token", "prices[1]: provider and model",
		"prices[3]: a second row for a/b"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("validation does not say %q: %v", want, err)
		}
	}
}

// TestPricedCardsCarryTheirCost: a scorer with a price table puts the cost
// on the card, byte for byte the same each time; the table is part of the
// scoring version.
func TestPricedCardsCarryTheirCost(t *testing.T) {
	cfg := DefaultConfig()
	plain := cfg.Version()
	cfg.Pricing = &Pricing{Currency: "EUR", Prices: []Price{{Provider: "openai", Model: "gpt-4o-mini", OutputToken: 1e-6}}}
	sc, err := NewScorer(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if sc.Version() == plain {
		t.Error("a price table left the scoring version as it was")
	}
	s := Session{Identity: session.Identity{Key: "RM_c/AJ_c"}, Items: []Item{{ID: "u", Type: TypeMessage, Role: RoleUser, Text: "hi", CreatedAt: 1796319506}},
		Facts: &session.Facts{UsageReported: true, Usage: []session.ModelUsage{{Type: session.UsageLLM, Provider: "openai", Model: "gpt-4o-mini",
			OutputTokens: count(1000)}}}}
	a, _ := json.Marshal(sc.Score(s))
	b, _ := json.Marshal(sc.Score(s))
	if string(a) != string(b) || !strings.Contains(string(a), `"cost":{"currency":"EUR","total":0.001,`) {
		t.Errorf("card: %s", a)
	}
}
