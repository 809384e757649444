package facts

import (
	"fmt"
	"testing"
)

// TestOneUsageReportPerSession: a sender that posts 300 different usage
// reports for one session grows its facts by one report, not 300 (each
// report is up to ~5 KB: 300 would pass NATS's 1 MB max payload), and the
// report kept is the first.
func TestOneUsageReportPerSession(t *testing.T) {
	var f SessionFacts
	for i := range 300 {
		o := Observation{Field: FieldUsage, Source: SourceOTLP,
			Value: fmt.Sprintf(`[{"type":"llm_usage","provider":"p","model":"m","output_tokens":%d}]`, i+1)}
		Merge(&f, Update{Observations: []Observation{o}})
	}
	if len(f.Observations) != 1 {
		t.Fatalf("%d usage observations kept", len(f.Observations))
	}
	r := Resolve(f.Observations)
	if !r.UsageReported || len(r.Usage) != 1 || r.Usage[0].OutputTokens.V != 1 {
		t.Fatalf("usage %+v", r.Usage)
	}
}
