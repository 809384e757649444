package scoring

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/lkscore/lkscore/session"
)

// TestBoundFindings: a session with far more failed tool calls than
// MaxFindings, whose tool has a 100,000-character name, gives a card that
// lists MaxFindings findings per component, says how many it left out,
// quotes no text longer than MaxFindingText, and scores as the whole list
// did (the score counts every finding).
func TestBoundFindings(t *testing.T) {
	long := strings.Repeat("n", 100_000)
	var items []Item
	for i := range 3 * MaxFindings {
		id := fmt.Sprintf("c%d", i)
		items = append(items,
			Item{ID: "u" + id, Type: TypeMessage, Role: "user", Text: "hi"},
			Item{ID: "f" + id, Type: TypeFunctionCall, CallID: id, Name: long},
			Item{ID: "o" + id, Type: TypeFunctionCallOutput, CallID: id, Name: long, Output: "error", IsError: true})
	}
	sc := Score(Session{Identity: session.Identity{Key: "RM_a/AJ_b"}, Items: items}, DefaultConfig())
	b, _ := json.Marshal(sc)
	if len(b) > 1<<20 {
		t.Errorf("card is %d bytes, want under 1 MiB", len(b))
	}
	omitted := 0
	for _, c := range sc.Components {
		if len(c.Findings) > MaxFindings {
			t.Errorf("%s lists %d findings, want at most %d", c.Name, len(c.Findings), MaxFindings)
		}
		omitted += c.FindingsOmitted
		for _, f := range c.Findings {
			if n := len([]rune(f.Message)); n > MaxFindingText+1 {
				t.Errorf("%s finding %s: message of %d characters", c.Name, f.Code, n)
			}
		}
		if c.Name == ToolReliability {
			if c.FindingsOmitted == 0 || len(c.Findings)+c.FindingsOmitted < 3*MaxFindings {
				t.Errorf("tool_reliability: %d listed + %d omitted, want all %d failed calls counted", len(c.Findings), c.FindingsOmitted, 3*MaxFindings)
			}
			if c.Score >= 50 {
				t.Errorf("tool_reliability scores %v with every call failing", c.Score)
			}
		}
	}
	if omitted == 0 {
		t.Error("no component says it left findings out")
	}
}

// TestBoundFindingsKeepsTheMostSevere: the cut keeps critical findings
// before warnings, then the earliest, in their order.
func TestBoundFindingsKeepsTheMostSevere(t *testing.T) {
	c := Component{}
	for i := range MaxFindings + 50 {
		sev := Warning
		if i%10 == 0 {
			sev = Critical
		}
		c.Findings = append(c.Findings, Finding{Code: "x", Severity: sev, Turn: some(i)})
	}
	boundFindings(&c)
	crit := 0
	for i, f := range c.Findings {
		if f.Severity == Critical {
			crit++
		}
		if i > 0 && f.Turn.V <= c.Findings[i-1].Turn.V {
			t.Fatalf("finding %d is out of order", i)
		}
	}
	if len(c.Findings) != MaxFindings || c.FindingsOmitted != 50 || crit != (MaxFindings+50)/10 {
		t.Errorf("kept %d (%d critical), omitted %d; want %d with all %d critical, 50 omitted",
			len(c.Findings), crit, c.FindingsOmitted, MaxFindings, (MaxFindings+50)/10)
	}
}
