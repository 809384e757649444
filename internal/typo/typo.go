// Package typo suggests what a mistyped name meant: the config's keys
// (config) and the measures a rule names (rules).
package typo

// Closest returns the candidate nearest to s, if at most maxEdits edits
// away ("" otherwise): the fewest edits, and of those the longest shared
// beginning, then the first.
func Closest(s string, candidates []string, maxEdits int) string {
	best, bestD, bestP := "", maxEdits+1, -1
	for _, c := range candidates {
		d, p := EditDistance(s, c), commonPrefix(s, c)
		if d > maxEdits {
			continue
		}
		if d < bestD || d == bestD && p > bestP {
			best, bestD, bestP = c, d, p
		}
	}
	return best
}

func commonPrefix(a, b string) int {
	n := 0
	for n < len(a) && n < len(b) && a[n] == b[n] {
		n++
	}
	return n
}

// EditDistance is the Levenshtein distance between a and b, in bytes.
func EditDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}
