package facts

import (
	"slices"
	"strings"

	"github.com/lkscore/lkscore/scoring"
)

// MaxSpans bounds the spans one session keeps. When more arrive, the
// earliest by (start, id) stay: a pure function of the set, whatever the
// order of arrival.
const MaxSpans = 1024

func spanLess(a, b scoring.Span) int {
	if a.Start != b.Start {
		if a.Start < b.Start {
			return -1
		}
		return 1
	}
	return strings.Compare(a.ID, b.ID)
}

// MergeSpans adds spans to kept (sorted by (start, id), one per id) within
// maxSpans, and reports whether anything changed.
func MergeSpans(kept []scoring.Span, add []scoring.Span) ([]scoring.Span, bool) {
	changed := false
	for _, s := range add {
		if slices.ContainsFunc(kept, func(k scoring.Span) bool { return k.ID == s.ID }) {
			continue
		}
		i, _ := slices.BinarySearchFunc(kept, s, spanLess)
		if len(kept) >= MaxSpans {
			if i >= len(kept) {
				continue // later than every span kept
			}
			kept = kept[:len(kept)-1]
		}
		kept = slices.Insert(kept, i, s)
		changed = true
	}
	return kept, changed
}
