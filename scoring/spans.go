package scoring

import (
	"fmt"
	"slices"
	"sort"
	"strings"
)

// Span is one span of the agents SDK's voice pipeline the daemon kept from
// its OTLP traces (docs/formats.md, "Spans"). Times are Unix seconds and
// delays seconds, whatever unit the SDK wrote; nil means not reported.
type Span struct {
	ID     string  `json:"id"`
	Parent string  `json:"parent,omitempty"`
	Name   string  `json:"name"`
	Start  float64 `json:"start"`
	End    float64 `json:"end"`

	E2ELatency           *float64 `json:"e2e_latency,omitempty"` // agent_turn
	Interrupted          bool     `json:"interrupted,omitempty"` // agent_turn
	TTFT                 *float64 `json:"ttft,omitempty"`        // llm_node
	TTFB                 *float64 `json:"ttfb,omitempty"`        // tts_node
	TranscriptConfidence *float64 `json:"transcript_confidence,omitempty"`
	TranscriptionDelay   *float64 `json:"transcription_delay,omitempty"` // user_turn
	EndOfTurnDelay       *float64 `json:"end_of_turn_delay,omitempty"`   // user_turn
	Tool                 string   `json:"tool,omitempty"`                // function_tool
	ToolError            bool     `json:"tool_error,omitempty"`
	// Error is the span's error: its status message or error.type, bounded.
	Error string `json:"error,omitempty"`
}

// Span names both SDKs use (agents-js telemetry, livekit/agents telemetry).
const (
	SpanAgentSession = "agent_session"
	SpanAgentTurn    = "agent_turn"
	SpanUserTurn     = "user_turn"
	SpanFunctionTool = "function_tool"
	SpanLLMNode      = "llm_node"
	SpanTTSNode      = "tts_node"
)

// Finding codes only spans give.
const (
	CodeProviderError = "provider_error"
	CodeSpanToolError = "span_tool_error"
	CodeSilentReply   = "silent_reply"
)

// silentReplyBudget is what a reply the caller never heard costs turn
// handling: as much as a user turn the agent never answered, which is what
// it is from the caller's side.
func silentReplyBudget() budget { return budget{per: 15, cap: 45} }

// ItemsFromSpans builds the turns of a session that uploaded no chat history
// from its spans: a user message per user_turn (at its end, when the turn
// was committed), an assistant message per agent_turn (with the TTFT and
// TTFB of its first llm_node and tts_node), and a call and its output per
// function_tool. Items carry no text. The order is the spans' (start, id),
// so the same spans give the same items in any arrival order.
func ItemsFromSpans(spans []Span) []Item {
	ss := append([]Span(nil), spans...)
	sort.Slice(ss, func(i, j int) bool { return spanLess(ss[i], ss[j]) })
	firstChild := map[string]map[string]*Span{} // parent → name → first child
	for i := range ss {
		s := &ss[i]
		if s.Parent == "" || (s.Name != SpanLLMNode && s.Name != SpanTTSNode) {
			continue
		}
		m := firstChild[s.Parent]
		if m == nil {
			m = map[string]*Span{}
			firstChild[s.Parent] = m
		}
		if m[s.Name] == nil {
			m[s.Name] = s
		}
	}
	type timed struct {
		at   float64
		item Item
	}
	var out []timed
	for i := range ss {
		s := &ss[i]
		id := "span:" + s.ID
		switch s.Name {
		case SpanUserTurn:
			out = append(out, timed{s.End, Item{ID: id, Type: TypeMessage, Role: RoleUser, CreatedAt: s.End, HasMetrics: true,
				TranscriptConfidence: s.TranscriptConfidence, TranscriptionDelay: s.TranscriptionDelay, EndOfTurnDelay: s.EndOfTurnDelay}})
		case SpanAgentTurn:
			it := Item{ID: id, Type: TypeMessage, Role: RoleAssistant, CreatedAt: s.Start, HasMetrics: true,
				Interrupted: s.Interrupted, E2ELatency: s.E2ELatency}
			if c := firstChild[s.ID][SpanLLMNode]; c != nil {
				it.LLMNodeTTFT = c.TTFT
			}
			if c := firstChild[s.ID][SpanTTSNode]; c != nil {
				it.TTSNodeTTFB = c.TTFB
			}
			out = append(out, timed{s.Start, it})
		case SpanFunctionTool:
			out = append(out, timed{s.Start, Item{ID: id + ":call", Type: TypeFunctionCall, CreatedAt: s.Start, CallID: s.ID, Name: s.Tool}})
			out = append(out, timed{s.End, Item{ID: id + ":output", Type: TypeFunctionCallOutput, CreatedAt: s.End, CallID: s.ID,
				Name: s.Tool, IsError: s.ToolError || s.Error != ""}})
		}
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].at < out[j].at })
	items := make([]Item, len(out))
	for i := range out {
		items[i] = out[i].item
	}
	return items
}

func spanLess(a, b Span) bool {
	if a.Start != b.Start {
		return a.Start < b.Start
	}
	return a.ID < b.ID
}

// spanFindings are what the spans show and a chat history does not:
// provider errors, tool errors of a session with a recording, and replies
// the caller never heard. Provider and tool errors deduct nothing (the chat
// history decides the score of a session that has one). A reply whose text
// to speech failed before its first audio frame (silent_reply) costs turn
// handling: the chat history records the reply as said, so only the spans
// can tell that nobody heard it.
func spanFindings(s Session) []Finding {
	var out []Finding
	ss := append([]Span(nil), s.Spans...)
	sort.Slice(ss, func(i, j int) bool { return spanLess(ss[i], ss[j]) })
	for _, sp := range ss {
		switch {
		case sp.Name == SpanFunctionTool:
			if s.hasRecording() && (sp.ToolError || sp.Error != "") {
				out = append(out, Finding{Code: CodeSpanToolError, Severity: Warning, ItemID: "span:" + sp.ID,
					Message: fmt.Sprintf("the %s tool failed (function_tool span)", orUnknown(sp.Tool))})
			}
		case sp.Error != "":
			msg := fmt.Sprintf("%s span ended with an error: %s", sp.Name, clip(sp.Error, 120))
			if s.Redacted {
				msg = sp.Name + " span ended with an error (not quoted: the session is redacted)"
			}
			out = append(out, Finding{Code: CodeProviderError, Severity: Warning, ItemID: "span:" + sp.ID, Message: msg})
		}
	}
	return append(out, silentReplies(s, ss)...)
}

// silentReplies finds the agent turns that produced no audio because the
// text to speech failed: the turn's tts_node child never reported a first
// byte, and a tts span with an error started inside the turn. The error
// span is matched by time, not by parent: the SDKs put tts_request and
// tts_request_run between tts_node and the failure, and only spans with an
// error of those are kept. ss is sorted by (start, id).
func silentReplies(s Session, ss []Span) []Finding {
	noAudio := map[string]bool{} // agent_turn id → its tts_node reported no first byte
	for _, sp := range ss {
		if sp.Name == SpanTTSNode && sp.Parent != "" && sp.TTFB == nil {
			noAudio[sp.Parent] = true
		}
	}
	var ttsErrors []Span
	for _, sp := range ss {
		if sp.Error != "" && strings.HasPrefix(sp.Name, "tts") {
			ttsErrors = append(ttsErrors, sp)
		}
	}
	if len(noAudio) == 0 || len(ttsErrors) == 0 {
		return nil
	}
	turnOf := map[string]int{} // item id → index, for a session scored from its spans
	if !s.hasRecording() {
		for i, it := range s.Items {
			turnOf[it.ID] = i
		}
	}
	b := silentReplyBudget()
	var out []Finding
	for _, sp := range ss {
		if sp.Name != SpanAgentTurn || !noAudio[sp.ID] {
			continue
		}
		i := slices.IndexFunc(ttsErrors, func(e Span) bool { return e.Start >= sp.Start && e.Start <= sp.End })
		if i < 0 {
			continue
		}
		msg := "the text to speech failed (" + clip(ttsErrors[i].Error, 120) + "): the caller heard nothing of this reply"
		if s.Redacted {
			msg = "the text to speech failed: the caller heard nothing of this reply"
		}
		f := Finding{Code: CodeSilentReply, Severity: Critical, ItemID: "span:" + sp.ID, Deduction: b.take(), Message: msg}
		if t, ok := turnOf["span:"+sp.ID]; ok {
			f.Turn = some(t)
		}
		out = append(out, f)
	}
	return out
}

func orUnknown(s string) string {
	if s == "" {
		return "unnamed"
	}
	return s
}

func spanMetrics(spans []Span) *SpanMetrics {
	if len(spans) == 0 {
		return nil
	}
	m := &SpanMetrics{}
	var e2e, ttft, ttfb []float64
	for _, s := range spans {
		switch s.Name {
		case SpanAgentTurn:
			m.AgentTurns++
			if s.E2ELatency != nil && *s.E2ELatency >= 0 {
				e2e = append(e2e, ms(*s.E2ELatency))
			}
		case SpanUserTurn:
			m.UserTurns++
		case SpanFunctionTool:
			m.ToolCalls++
			if s.ToolError || s.Error != "" {
				m.ToolErrors++
			}
			continue
		case SpanLLMNode:
			if s.TTFT != nil && *s.TTFT >= 0 {
				ttft = append(ttft, ms(*s.TTFT))
			}
		case SpanTTSNode:
			if s.TTFB != nil && *s.TTFB >= 0 {
				ttfb = append(ttfb, ms(*s.TTFB))
			}
		}
		if s.Error != "" && s.Name != SpanFunctionTool {
			m.ProviderErrors++
		}
	}
	pct := func(v []float64, p float64) Opt[float64] {
		sort.Float64s(v)
		return dist{vals: v}.stat(p)
	}
	m.E2ELatencyP50, m.E2ELatencyP95 = pct(e2e, 50), pct(e2e, 95)
	m.TTFTP50Ms, m.TTFTP95Ms = pct(ttft, 50), pct(ttft, 95)
	m.TTFBP50Ms, m.TTFBP95Ms = pct(ttfb, 50), pct(ttfb, 95)
	return m
}
