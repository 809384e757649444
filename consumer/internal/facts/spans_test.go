package facts

import (
	"fmt"
	"slices"
	"testing"

	"github.com/lkscore/lkscore/scoring"
)

// TestMergeSpansBounded: past maxSpans the earliest spans stay, whatever the
// order they came in, and a span sent twice is kept once.
func TestMergeSpansBounded(t *testing.T) {
	t.Parallel()
	all := make([]scoring.Span, MaxSpans+50)
	for i := range all {
		all[i] = scoring.Span{ID: fmt.Sprintf("%016x", i), Name: scoring.SpanAgentTurn, Start: float64(i)}
	}
	var fwd, rev []scoring.Span
	for i := range all {
		fwd, _ = MergeSpans(fwd, all[i:i+1])
		rev, _ = MergeSpans(rev, all[len(all)-1-i:len(all)-i])
	}
	fwd, changed := MergeSpans(fwd, all[:3])
	if changed || len(fwd) != MaxSpans || !slices.Equal(spanIDs(fwd), spanIDs(rev)) || fwd[len(fwd)-1].Start != MaxSpans-1 {
		t.Fatalf("kept %d (changed by a resend: %v); forward and reverse arrival keep the same spans: %v",
			len(fwd), changed, slices.Equal(spanIDs(fwd), spanIDs(rev)))
	}
}

func spanIDs(ss []scoring.Span) []string {
	out := make([]string, len(ss))
	for i, s := range ss {
		out[i] = s.ID
	}
	return out
}
