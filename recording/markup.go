package recording

import (
	"regexp"
	"strings"
)

// exprTag matches the agents SDK's expressive markup, the <expr/> dialect
// an LLM writes into assistant text for the TTS (livekit/agents
// tts/_provider_format.py, _EXPR_SELF_RE, _EXPR_OPEN_RE, _EXPR_CLOSE_RE):
// <expr type="break" label="1s"/>, <expr type="prosody" label="slow">…</expr>.
// The SDK strips it only when asked (ChatContext.to_dict(strip_markup=True)),
// so chat_history.json can carry it.
var exprTag = regexp.MustCompile(`[ \t]*<(?:expr\b[^>]*|/expr\s*)>`)

// StripExprMarkup is text without the <expr> dialect's tags; the words a
// wrapping tag encloses stay, other markup stays.
func StripExprMarkup(text string) string {
	if !strings.Contains(text, "<expr") && !strings.Contains(text, "</expr") {
		return text
	}
	return exprTag.ReplaceAllString(text, "")
}
