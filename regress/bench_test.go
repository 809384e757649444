package regress_test

import (
	"testing"

	json "github.com/goccy/go-json"

	"github.com/lkscore/lkscore/internal/population"
	"github.com/lkscore/lkscore/regress"
	"github.com/lkscore/lkscore/scoring"
	"github.com/lkscore/lkscore/session"
)

// BenchmarkDetect measures what the daemon's detector does per scorecard,
// history full (regression.keep recent sessions, a baseline as large).
// "update" runs for every scorecard: decode the history entry, add the
// sample, encode it again ("update_cached" when this process wrote the
// entry last and skips the decode). "evaluate" runs for every regression.evaluate_every-th scorecard
// of an agent/version: compare with the baseline, the drift chart, the
// spike test. Compare with BenchmarkSessionCPU in ./recording (parse +
// score + encode, about 1 ms).
func BenchmarkDetect(b *testing.B) {
	cfg := regress.DefaultConfig()
	base := samples(b, population.Baseline("a", "1"), 1, cfg.Keep, 0)
	var h regress.History
	for _, s := range samples(b, population.Baseline("a", "2"), 2, cfg.Keep+100, 1000) {
		h.Add(s, cfg)
	}
	stored, _ := json.Marshal(h)
	next := samples(b, population.Baseline("a", "2"), 3, 1, 5000)[0]
	b.Run("update", func(b *testing.B) {
		b.ReportAllocs()
		for i := 0; i < b.N; i++ {
			var cur regress.History
			if err := json.Unmarshal(stored, &cur); err != nil {
				b.Fatal(err)
			}
			s := next
			s.Seq += uint64(i)
			cur.Add(s, cfg)
			if _, err := json.Marshal(cur); err != nil {
				b.Fatal(err)
			}
		}
	})
	// The daemon keeps the history it last wrote: when no other replica
	// wrote since, it clones instead of decoding.
	b.Run("update_cached", func(b *testing.B) {
		b.ReportAllocs()
		for i := 0; i < b.N; i++ {
			cur := h.Clone()
			s := next
			s.Seq += uint64(i)
			cur.Add(s, cfg)
			if _, err := json.Marshal(&cur); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("evaluate", func(b *testing.B) {
		b.ReportAllocs()
		for i := 0; i < b.N; i++ {
			regress.Regression(base, h.Recent(), cfg)
			regress.Drift(&h, cfg)
			regress.Spikes(&h, cfg)
		}
	})
}

// BenchmarkScorecardDecode decodes one scorecard as the detector receives it.
func BenchmarkScorecardDecode(b *testing.B) {
	scorer, _ := scoring.NewScorer(scoring.DefaultConfig())
	data, _ := json.Marshal(population.Generate(scorer, population.Baseline("a", "1"), 1, 1)[0])
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		var c session.Scorecard
		if err := json.Unmarshal(data, &c); err != nil {
			b.Fatal(err)
		}
		_ = regress.SampleOf(&c, 1)
	}
}
