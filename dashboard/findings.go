package dashboard

import (
	"cmp"
	"slices"
	"strconv"
	"strings"
)

// findingGroup is one finding code on the session page: how often, what it
// cost in all, the turns it was on (as links) and what each said. A long
// call's many findings of one kind read as one row.
type findingGroup struct {
	Component string
	Code      string
	Count     int
	Deduction float64 // the sum of its findings' deductions
	Turns     []turnLink
	// MoreTurns counts turns past maxTurnLinks, not linked.
	MoreTurns int
	Messages  []string // each finding's message, in order of deduction
}

// turnLink is a link to a turn on the page.
type turnLink struct{ Label, Anchor string }

// maxTurnLinks bounds the turn links one group shows.
const maxTurnLinks = 40

// groupFindings groups rows by component and code, the costliest group
// first (then by code, for a stable page).
func groupFindings(rows []findingRow) []findingGroup {
	idx := map[[2]string]int{}
	var out []findingGroup
	for _, r := range rows {
		k := [2]string{r.Component, r.Code}
		i, ok := idx[k]
		if !ok {
			i = len(out)
			idx[k] = i
			out = append(out, findingGroup{Component: r.Component, Code: r.Code})
		}
		g := &out[i]
		g.Count++
		g.Deduction += r.Deduction
		g.Messages = append(g.Messages, r.Message)
		if r.Anchor != "" {
			label := "→"
			if r.Turn.Set {
				label = strconv.Itoa(r.Turn.V)
			}
			if len(g.Turns) < maxTurnLinks {
				g.Turns = append(g.Turns, turnLink{Label: label, Anchor: r.Anchor})
			} else {
				g.MoreTurns++
			}
		}
	}
	slices.SortStableFunc(out, func(a, b findingGroup) int {
		if a.Deduction != b.Deduction {
			return cmp.Compare(b.Deduction, a.Deduction)
		}
		return cmp.Or(strings.Compare(a.Component, b.Component), strings.Compare(a.Code, b.Code))
	})
	return out
}
