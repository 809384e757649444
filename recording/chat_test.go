package recording

import (
	"bytes"
	"errors"
	"fmt"
	"math"
	"os"
	"strings"
	"testing"

	"github.com/lkscore/lkscore/scoring"
)

func mustRead(t testing.TB, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestChatHistoryAllSDKForms parses the same conversation as Python writes
// it, as agents-js writes it today (snake_case, ms) and as older agents-js
// wrote it (camelCase): the normalized items must agree.
func TestChatHistoryAllSDKForms(t *testing.T) {
	forms := []struct {
		file, unit, style string
	}{
		{"testdata/chat_python.json", "s", "snake"},
		{"testdata/chat_js.json", "ms", "snake"},
		{"testdata/chat_js_camel.json", "ms", "camel"},
	}
	var first *ChatHistory
	for _, f := range forms {
		t.Run(f.file, func(t *testing.T) {
			h, err := ParseChatHistory(bytes.NewReader(mustRead(t, f.file)), ChatLimits{})
			if err != nil {
				t.Fatal(err)
			}
			if h.TimestampUnit != f.unit || h.KeyStyle != f.style {
				t.Errorf("unit %q style %q, want %q %q", h.TimestampUnit, h.KeyStyle, f.unit, f.style)
			}
			want := map[string]int{scoring.TypeMessage: 3, scoring.TypeFunctionCall: 1, scoring.TypeFunctionCallOutput: 1, scoring.TypeAgentHandoff: 1, scoring.TypeAgentConfigUpdate: 1}
			if fmt.Sprint(h.Counts) != fmt.Sprint(want) {
				t.Errorf("counts %v, want %v", h.Counts, want)
			}
			if len(h.Problems) != 0 {
				t.Errorf("problems: %+v", h.Problems)
			}
			call, out, ho, cfg, user, agent := h.Items[3], h.Items[4], h.Items[6], h.Items[0], h.Items[2], h.Items[5]
			if call.CallID != "call_Qx81" || call.Arguments != `{"day": "friday"}` || out.CallID != "call_Qx81" || out.IsError {
				t.Errorf("tool items: %+v %+v", call, out)
			}
			if ho.OldAgentID != "greeter_agent" || ho.NewAgentID != "booking_agent" {
				t.Errorf("handoff: %+v", ho)
			}
			if cfg.Instructions != "You are a booking assistant." || strings.Join(cfg.ToolsAdded, ",") != "lookup_booking" {
				t.Errorf("config update: %+v", cfg)
			}
			if math.Abs(user.CreatedAt-1764417604.20) > 0.0015 || user.TranscriptConfidence == nil || *user.TranscriptConfidence != 0.94 {
				t.Errorf("user message: %+v", user)
			}
			if user.Metrics == nil || *user.Metrics.EndOfTurnDelay != 0.63 || *user.Metrics.StartedSpeakingAt != 1764417604.20 {
				t.Errorf("user metrics: %+v", user.Metrics)
			}
			if !agent.Interrupted || agent.Metrics == nil || *agent.Metrics.E2ELatency != 1.46 || *agent.Metrics.LLMNodeTTFT != 0.412 {
				t.Errorf("agent message: %+v %+v", agent, agent.Metrics)
			}
			if h.Items[1].Metrics.E2ELatency != nil {
				t.Error("a missing e2e_latency must stay nil, not zero")
			}
			if first == nil {
				first = h
				return
			}
			for i := range h.Items {
				if math.Abs(h.Items[i].CreatedAt-first.Items[i].CreatedAt) > 0.0015 {
					t.Errorf("item %d created_at %v, python %v", i, h.Items[i].CreatedAt, first.Items[i].CreatedAt)
				}
			}
		})
	}
}

func TestChatHistoryErrors(t *testing.T) {
	big := `{"items": [` + strings.Repeat(`{"id":"i","type":"message","content":["x"]},`, 100) + `{"id":"last","type":"message"}]}`
	tests := []struct {
		name      string
		in        string
		lim       ChatLimits
		wantLimit string
		wantItem  int
		wantSub   string
	}{
		{"over byte limit", big, ChatLimits{MaxBytes: 1000}, "max_bytes=1000", -2, ""},
		{"over item limit", big, ChatLimits{MaxItems: 10}, "max_items=10", 10, ""},
		{"truncated", `{"items": [{"id": "a", "type": "mess`, ChatLimits{}, "", 0, "unexpected EOF"},
		{"NaN", `{"items": [{"id": "a", "type": "message", "created_at": NaN}]}`, ChatLimits{}, "", 0, "invalid character"},
		{"not an object", `[1, 2]`, ChatLimits{}, "", -1, `want "{"`},
		{"items not an array", `{"items": {"a": 1}}`, ChatLimits{}, "", -1, "not an array"},
		{"no items", `{"other": []}`, ChatLimits{}, "", -1, `no "items"`},
		{"trailing data", `{"items": []} {}`, ChatLimits{}, "", -1, "after the top-level"},
		{"deep nesting", `{"items": [{"id": "a", "type": "message", "extra": ` + strings.Repeat("[", 20000) + strings.Repeat("]", 20000) + `}]}`, ChatLimits{}, "", 0, "exceeded max depth"},
		{"empty", ``, ChatLimits{}, "", -1, "unexpected EOF"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ParseChatHistory(strings.NewReader(tc.in), tc.lim)
			var pe *ParseError
			if !errors.As(err, &pe) {
				t.Fatalf("err = %v, want a *ParseError", err)
			}
			if pe.Part != PartChatHistory {
				t.Errorf("part %q", pe.Part)
			}
			if tc.wantLimit != "" {
				if !errors.Is(err, ErrLimit) || pe.Limit != tc.wantLimit {
					t.Errorf("err %v: want limit %s", err, tc.wantLimit)
				}
			}
			if tc.wantItem != -2 && pe.Item != tc.wantItem {
				t.Errorf("item %d, want %d (%v)", pe.Item, tc.wantItem, err)
			}
			if !strings.Contains(err.Error(), tc.wantSub) {
				t.Errorf("err %q lacks %q", err, tc.wantSub)
			}
		})
	}
}

func TestChatHistoryProblemsAreNotFatal(t *testing.T) {
	in := `{"items": [
		{"id": "a", "type": "message", "role": "user", "content": ["hi"], "created_at": 1e400},
		{"id": "b", "type": "realtime_event", "created_at": 1764417600.5},
		{"id": "c", "type": "message", "role": "user", "content": "bare string", "transcript_confidence": "high"},
		{"id": "d", "type": "message", "role": "user", "content": ["text", {"type": "image_content"}]}
	]}`
	h, err := ParseChatHistory(strings.NewReader(in), ChatLimits{})
	if err != nil {
		t.Fatal(err)
	}
	if len(h.Items) != 4 || h.Items[1].Type != TypeUnknown || h.Items[1].RawType != "realtime_event" {
		t.Fatalf("items %+v", h.Items)
	}
	if h.Items[2].Content[0] != "bare string" || strings.Join(h.Items[3].Content, "|") != "text" {
		t.Errorf("content: %q %q", h.Items[2].Content, h.Items[3].Content)
	}
	codes := map[string]int{}
	for _, p := range h.Problems {
		codes[p.Code]++
	}
	if codes["field_type"] != 2 || codes["unknown_item_type"] != 1 {
		t.Errorf("problems %+v", h.Problems)
	}
}

func TestChatHistoryExactlyAtLimit(t *testing.T) {
	in := []byte(`{"items": []}`)
	if _, err := ParseChatHistory(bytes.NewReader(in), ChatLimits{MaxBytes: int64(len(in))}); err != nil {
		t.Fatalf("at the limit: %v", err)
	}
	if _, err := ParseChatHistory(bytes.NewReader(append(in, ' ')), ChatLimits{MaxBytes: int64(len(in))}); !errors.Is(err, ErrLimit) {
		t.Fatalf("one byte over: %v", err)
	}
}

func FuzzParseChatHistory(f *testing.F) {
	for _, p := range []string{"testdata/chat_python.json", "testdata/chat_js.json", "testdata/chat_js_camel.json"} {
		f.Add(mustRead(f, p))
	}
	f.Add([]byte(`{"items": [{"type": "message", "content": 5, "metrics": []}]}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		h, err := ParseChatHistory(bytes.NewReader(data), ChatLimits{MaxBytes: 1 << 16, MaxItems: 200})
		if err != nil {
			var pe *ParseError
			if !errors.As(err, &pe) {
				t.Fatalf("untyped error %T: %v", err, err)
			}
			return
		}
		n := 0
		for typ, c := range h.Counts {
			if c <= 0 || typ == "" {
				t.Fatalf("bad count %q=%d", typ, c)
			}
			n += c
		}
		if n != len(h.Items) || len(h.Items) > 200 {
			t.Fatalf("counts %v for %d items", h.Counts, len(h.Items))
		}
		for i, it := range h.Items {
			if it.Index != i || math.IsNaN(it.CreatedAt) || it.CreatedAt < 0 || it.CreatedAt > 1e11 {
				t.Fatalf("item %d: %+v", i, it)
			}
		}
	})
}
