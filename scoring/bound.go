package scoring

import "slices"

// MaxFindings bounds the findings one component lists on a scorecard. A
// 100,000-item chat history (limits.chat_items) gave 25 MB of findings,
// over any NATS server's max_payload, so the card could never be
// published. The score counts every finding; the list keeps the most
// severe (then the earliest) MaxFindings, in their order, and
// FindingsOmitted says how many it left out.
const MaxFindings = 200

// MaxFindingText bounds, in characters, a finding's message and item id:
// both can quote what the session sent (a tool's name, a call id), which
// the chat limits bound only at 32 MiB in all.
const MaxFindingText = 400

// boundFindings cuts c's list to MaxFindings and each kept finding's text
// to MaxFindingText. Rules and the overall verdict have read the whole
// list before (score).
func boundFindings(c *Component) {
	defer func() {
		for i := range c.Findings {
			f := &c.Findings[i]
			f.Message, f.ItemID = clip(f.Message, MaxFindingText), clip(f.ItemID, MaxFindingText)
		}
	}()
	n := len(c.Findings)
	if n <= MaxFindings {
		return
	}
	order := make([]int, n)
	for i := range order {
		order[i] = i
	}
	slices.SortStableFunc(order, func(a, b int) int { return severityRank(c.Findings[a].Severity) - severityRank(c.Findings[b].Severity) })
	keep := order[:MaxFindings]
	slices.Sort(keep)
	kept := make([]Finding, 0, MaxFindings)
	for _, i := range keep {
		kept = append(kept, c.Findings[i])
	}
	c.Findings, c.FindingsOmitted = kept, n-MaxFindings
}

// severityRank orders severities, the most severe first.
func severityRank(s string) int {
	switch s {
	case Critical:
		return 0
	case Warning:
		return 1
	case Info:
		return 3
	}
	return 2 // high and any other
}
