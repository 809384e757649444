package dashboard

import "sort"

// VersionMix is what a page says when the scorecards it shows were scored
// under more than one scoring version: scores compare only within one
// (docs/policies.md), so its lowest scores and score trends are those of
// one version, Compared, the newest one's.
type VersionMix struct {
	// Versions are the scoring versions and their sessions, the newest
	// version first; empty when the entries share one.
	Versions []VersionCount
	Compared string
}

// VersionCount is one scoring version's share of a window.
type VersionCount struct {
	Version  string
	Sessions int
}

// scoringMix splits entries (oldest first) by scoring version: the mix,
// and the entries of the version scores are compared within (all of them
// when they share one).
func scoringMix(entries []Entry) (VersionMix, []Entry) {
	count := map[string]int{}
	last := map[string]int{} // the index of each version's newest entry
	for i, e := range entries {
		count[e.ScoringVersion]++
		last[e.ScoringVersion] = i
	}
	if len(count) < 2 {
		return VersionMix{}, entries
	}
	var m VersionMix
	for v, n := range count {
		m.Versions = append(m.Versions, VersionCount{Version: v, Sessions: n})
	}
	sort.Slice(m.Versions, func(i, j int) bool { return last[m.Versions[i].Version] > last[m.Versions[j].Version] })
	m.Compared = m.Versions[0].Version
	compared := make([]Entry, 0, count[m.Compared])
	for _, e := range entries {
		if e.ScoringVersion == m.Compared {
			compared = append(compared, e)
		}
	}
	return m, compared
}
