package dashboard

import (
	"fmt"
	"strings"

	"github.com/lkscore/lkscore/scoring"
	"github.com/lkscore/lkscore/session"
)

// transcriptRow is one chat item on the session page.
type transcriptRow struct {
	Turn        int    // the item's index in the chat history (a finding's turn)
	Anchor      string // its element id: turn-<Turn>
	Offset      string // seconds from the first item
	Who         string // user, agent, tool, handoff, …
	Text        string
	Interrupted bool
	Error       bool
	Codes       []string // findings on this turn
}

// transcript lists the chat items as the session page shows them: what
// each side said (redacted text stays redacted: the items come redacted),
// tool calls with their arguments and results, and the findings on each.
func transcript(items []scoring.Item, sc session.Scorecard) []transcriptRow {
	byTurn := map[int][]string{}
	for _, f := range findings(sc) {
		if i, ok := itemTurn(f.Finding, items); ok {
			byTurn[i] = append(byTurn[i], f.Code)
		}
	}
	t0 := 0.0
	for _, it := range items {
		if it.CreatedAt > 0 {
			t0 = it.CreatedAt
			break
		}
	}
	out := make([]transcriptRow, 0, len(items))
	for i, it := range items {
		r := transcriptRow{Turn: i, Anchor: fmt.Sprintf("turn-%d", i), Codes: byTurn[i]}
		if it.CreatedAt > 0 {
			r.Offset = fmt.Sprintf("%.1fs", it.CreatedAt-t0)
		}
		switch it.Type {
		case scoring.TypeMessage:
			r.Who = it.Role
			if it.Role == scoring.RoleAssistant {
				r.Who = "agent"
			}
			r.Text, r.Interrupted = it.Text, it.Interrupted
		case scoring.TypeFunctionCall:
			r.Who, r.Text = "tool call", it.Name+"("+it.Arguments+")"
		case scoring.TypeFunctionCallOutput:
			r.Who, r.Text, r.Error = "tool result", it.Name+" → "+it.Output, it.IsError
		default:
			r.Who = strings.ReplaceAll(it.Type, "_", " ")
			r.Text = it.Name
		}
		if r.Text == "" && it.Type == scoring.TypeMessage {
			r.Text = "(no text: the session was scored from the SDK's spans)"
		}
		out = append(out, r)
	}
	return out
}

// itemTurn is the chat item a finding is about: its item id, else its
// turn, which for chat findings is the item's index. Heard findings count
// heard turns (heardTurn), not items.
func itemTurn(f session.Finding, items []scoring.Item) (int, bool) {
	if f.ItemID != "" {
		for i := range items {
			if items[i].ID == f.ItemID {
				return i, true
			}
		}
	}
	if f.Turn.Set && !strings.HasPrefix(f.Code, "heard_") && f.Turn.V >= 0 && f.Turn.V < len(items) {
		return f.Turn.V, true
	}
	return 0, false
}

// anchor is where a finding's "turn" link goes: its span on the timeline
// when it has one, its transcript row otherwise, or the heard turn.
func anchor(f session.Finding, items []scoring.Item, tl Timeline) string {
	if strings.HasPrefix(f.Code, "heard_") && f.Turn.Set {
		return fmt.Sprintf("heard-%d", f.Turn.V)
	}
	i, ok := itemTurn(f, items)
	if !ok {
		return ""
	}
	id := fmt.Sprintf("tl-%d", i)
	for _, s := range tl.Spans {
		if s.ID == id {
			return id
		}
	}
	return fmt.Sprintf("turn-%d", i)
}

// turnID is the transcript anchor of a finding's turn (templates).
func turnID(o session.Opt[int]) string {
	if !o.Set {
		return ""
	}
	return fmt.Sprintf("turn-%d", o.V)
}
