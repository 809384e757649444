package recording

import (
	"strings"
	"testing"

	"github.com/lkscore/lkscore/scoring"
)

func TestStripExprMarkup(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{
		`Sure. <expr type="break" label="1s"/> Friday works.`:    `Sure. Friday works.`,
		`<expr type="prosody" label="slow">Let me check.</expr>`: `Let me check.`,
		`<expr type="expression" label="cheerful"/>Hi!`:          `Hi!`,
		`<expr type="break" label="500ms"/>`:                     ``,
		`a <b>bold</b> <expression value="x"/> move`:             `a <b>bold</b> <expression value="x"/> move`, // other markup stays
		`x < y and <exprs> are words`:                            `x < y and <exprs> are words`,
		"<expr type=\"spell\">A7X9</expr>":                       `A7X9`,
		"no markup at all":                                       "no markup at all",
	} {
		if got := StripExprMarkup(in); got != want {
			t.Errorf("StripExprMarkup(%q) = %q, want %q", in, got, want)
		}
	}
}

// TestMarkupOnlyAssistantTurnIsEmpty: an assistant message made only of
// expressive markup said nothing: the transcript measure sees it empty; one
// whose words are wrapped in markup is not.
func TestMarkupOnlyAssistantTurnIsEmpty(t *testing.T) {
	t.Parallel()
	s := &Session{Key: "RM/AJ", Chat: &ChatHistory{Items: []Item{
		{ID: "a", Type: scoring.TypeMessage, Role: scoring.RoleAssistant, Content: []string{`<expr type="break" label="1s"/>`}},
		{ID: "b", Type: scoring.TypeMessage, Role: scoring.RoleAssistant, Content: []string{`<expr type="prosody" label="slow">Sure.</expr>`}},
		{ID: "c", Type: scoring.TypeMessage, Role: scoring.RoleUser, Content: []string{`I said <expr/> literally`}},
	}}}
	in := s.ScoringInput("file:///x", "a")
	if in.Items[0].Text != "" || in.Items[1].Text != "Sure." || in.Items[2].Text != "I said <expr/> literally" {
		t.Fatalf("texts %q %q %q", in.Items[0].Text, in.Items[1].Text, in.Items[2].Text)
	}
}

func FuzzStripExprMarkup(f *testing.F) {
	for _, s := range []string{`<expr type="break" label="1s"/>`, `<expr a="b">x</expr>`, `<<expr>>`, `</expr`, "plain"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		out := StripExprMarkup(s)
		if len(out) > len(s) {
			t.Fatalf("grew: %q → %q", s, out)
		}
		if strings.Contains(s, "<") == false && out != s {
			t.Fatalf("changed text without markup: %q → %q", s, out)
		}
	})
}
