package recording

import (
	"bytes"
	"encoding/json"
	"io"
	"runtime"
	"testing"

	"github.com/lkscore/lkscore/scoring"
)

// Bounds on what parsing and scoring one history allocates, per KB of the
// history, as lkscore score runs them (one ChatDecoder and one items slice
// reused from session to session, the card encoded): measured 140-430 B and
// 2-7.5 allocations per KB on the field mix (issue 58); parsed into new
// memory each time, as before, they cost 1,900-4,000 B per KB.
const (
	maxAllocBytesPerKB = 768
	maxAllocsPerKB     = 10
)

// TestParseScoreAllocationBound fails when parse and score together
// allocate more than the bounds above on any of the field mix's histories.
func TestParseScoreAllocationBound(t *testing.T) {
	scorer, err := scoring.NewScorer(scoring.DefaultConfig())
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"py_020a", "js_020a", "py_100", "js_100", "py_200", "js_200"} {
		data := mustRead(t, fieldDir+name+".json")
		var d ChatDecoder
		var items []scoring.Item
		enc := json.NewEncoder(io.Discard)
		session := func() {
			h, err := d.Decode(bytes.NewReader(data), ChatLimits{})
			if err != nil {
				t.Fatal(err)
			}
			s := &Session{Key: "RM_a/AJ_b", RoomID: "RM_a", JobID: "AJ_b", Chat: h}
			in := s.ScoringInputInto(items, "file:///x", "")
			items = in.Items
			if err := enc.Encode(scorer.Score(in)); err != nil {
				t.Fatal(err)
			}
		}
		session() // the decoder's memory, grown once
		const runs = 20
		allocs := testing.AllocsPerRun(runs, session)
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		for range runs {
			session()
		}
		runtime.ReadMemStats(&after)
		kb := float64(len(data)) / 1024
		perKB := float64(after.TotalAlloc-before.TotalAlloc) / runs / kb
		t.Logf("%s (%.0f KB): %.0f B and %.1f allocations per KB", name, kb, perKB, allocs/kb)
		if perKB > maxAllocBytesPerKB || allocs/kb > maxAllocsPerKB {
			t.Errorf("%s: %.0f B and %.1f allocations per KB of history, bounds %d B and %d", name, perKB, allocs/kb,
				maxAllocBytesPerKB, maxAllocsPerKB)
		}
	}
}
