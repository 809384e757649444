package scoring

import (
	"strings"
	"testing"

	"github.com/lkscore/lkscore/session"
)

func f(v float64) *float64 { return &v }

// conversation builds a clean exchange of n user/agent turns starting at t0:
// user speaks 2 s, agent answers 1 s later (e2e 1 s) and speaks 2 s.
func conversation(n int) []Item {
	var items []Item
	t := 1764417600.0
	for k := 0; k < n; k++ {
		items = append(items,
			Item{ID: id("u", k), Type: TypeMessage, Role: RoleUser, Text: "hello", CreatedAt: t, TranscriptConfidence: f(0.95), HasMetrics: true,
				StartedSpeakingAt: f(t), StoppedSpeakingAt: f(t + 2), TranscriptionDelay: f(0.2), EndOfTurnDelay: f(0.5)},
			Item{ID: id("a", k), Type: TypeMessage, Role: RoleAssistant, Text: "hi there", CreatedAt: t + 2.5, HasMetrics: true,
				StartedSpeakingAt: f(t + 3), StoppedSpeakingAt: f(t + 5), E2ELatency: f(1), LLMNodeTTFT: f(0.4), TTSNodeTTFB: f(0.2)},
		)
		t += 6
	}
	return items
}

func id(p string, k int) string { return "item_" + p + string(rune('a'+k%26)) + string(rune('a'+k/26)) }

func toolCall(callID, name, args string, at float64) Item {
	return Item{ID: "item_call_" + callID + strings.ReplaceAll(args, " ", ""), Type: TypeFunctionCall, CallID: callID, Name: name, Arguments: args, CreatedAt: at}
}

func toolOutput(callID, name string, isError bool, at float64) Item {
	return Item{ID: "item_out_" + callID, Type: TypeFunctionCallOutput, CallID: callID, Name: name, Output: "{}", IsError: isError, CreatedAt: at}
}

// insert puts extra items after index i.
func insert(items []Item, i int, extra ...Item) []Item {
	out := append([]Item{}, items[:i+1]...)
	out = append(out, extra...)
	return append(out, items[i+1:]...)
}

func TestRules(t *testing.T) {
	base := conversation(6)
	tests := []struct {
		code    string
		trigger func([]Item) []Item
		clean   func([]Item) []Item // a near miss that must not trigger
	}{
		{CodeUnansweredUserTurn,
			func(it []Item) []Item { return it[:len(it)-1] },
			func(it []Item) []Item { return it }},
		{CodeAgentInterrupted,
			func(it []Item) []Item { it[3].Interrupted = true; return it },
			func(it []Item) []Item { it[2].Interrupted = true; return it }}, // a user item's flag is not an agent interruption
		{CodeInterruptionRate,
			func(it []Item) []Item {
				for i := 1; i < len(it); i += 2 {
					it[i].Interrupted = true
				}
				return it
			},
			func(it []Item) []Item { it[1].Interrupted = true; return it }},
		{CodeTalkOverUser,
			func(it []Item) []Item { it[3].StartedSpeakingAt = f(*it[2].StoppedSpeakingAt - 0.5); return it },
			func(it []Item) []Item { it[3].StartedSpeakingAt = f(*it[2].StoppedSpeakingAt - 0.2); return it }},
		{CodeLongSilence,
			func(it []Item) []Item { it[3].StartedSpeakingAt = f(*it[2].StoppedSpeakingAt + 3.5); return it },
			func(it []Item) []Item { it[3].StartedSpeakingAt = f(*it[2].StoppedSpeakingAt + 2.9); return it }},
		{CodeSlowEndOfTurn,
			func(it []Item) []Item { it[2].EndOfTurnDelay = f(1.8); return it },
			func(it []Item) []Item { it[2].EndOfTurnDelay = f(1.4); return it }},
		{CodeHandoffLoop,
			func(it []Item) []Item {
				return insert(it, 3, Item{ID: "h1", Type: TypeAgentHandoff, OldAgentID: "a", NewAgentID: "b"}, Item{ID: "h2", Type: TypeAgentHandoff, OldAgentID: "b", NewAgentID: "a"})
			},
			func(it []Item) []Item {
				return insert(it, 3, Item{ID: "h1", Type: TypeAgentHandoff, OldAgentID: "a", NewAgentID: "b"}, Item{ID: "h2", Type: TypeAgentHandoff, OldAgentID: "b", NewAgentID: "c"})
			}},
		{CodeLowConfidence,
			func(it []Item) []Item { it[2].TranscriptConfidence = f(0.5); return it },
			func(it []Item) []Item { it[2].TranscriptConfidence = f(0.65); return it }},
		{CodeLowMeanConfidence,
			func(it []Item) []Item {
				for i := 0; i < len(it); i += 2 {
					it[i].TranscriptConfidence = f(0.7)
				}
				return it
			},
			func(it []Item) []Item {
				for i := 0; i < len(it); i += 2 {
					it[i].TranscriptConfidence = f(0.85)
				}
				return it
			}},
		{CodeEmptyTranscript,
			func(it []Item) []Item { it[2].Text = " \n\t"; return it },
			func(it []Item) []Item { it[2].Text = " ok "; return it }},
		{CodeUserTurnNoMetrics,
			func(it []Item) []Item { it[2].HasMetrics = false; return it },
			func(it []Item) []Item { it[3].HasMetrics = false; it[3].E2ELatency = nil; return it }},
		{CodeDuplicateItemID,
			func(it []Item) []Item { it[4].ID = it[2].ID; return it },
			func(it []Item) []Item { it[4].ID = ""; it[2].ID = ""; return it }}, // absent ids are not duplicates
		{CodeTimestampOutOfOrder,
			func(it []Item) []Item { it[4].CreatedAt = it[3].CreatedAt - 1; return it },
			func(it []Item) []Item { it[4].CreatedAt = it[3].CreatedAt; return it }},
		{CodeToolCallWithoutOutput,
			func(it []Item) []Item { return insert(it, 2, toolCall("c1", "lookup", "{}", it[2].CreatedAt+2.1)) },
			func(it []Item) []Item {
				return insert(it, 2, toolCall("c1", "lookup", "{}", it[2].CreatedAt+2.1), toolOutput("c1", "lookup", false, it[2].CreatedAt+2.2))
			}},
		{CodeToolOutputWithoutCall,
			func(it []Item) []Item { return insert(it, 2, toolOutput("c9", "lookup", false, it[2].CreatedAt+2.2)) },
			func(it []Item) []Item {
				return insert(it, 2, toolCall("c9", "lookup", "{}", it[2].CreatedAt+2.1), toolOutput("c9", "lookup", false, it[2].CreatedAt+2.2))
			}},
		{CodeToolError,
			func(it []Item) []Item {
				return insert(it, 2, toolCall("c1", "lookup", "{}", it[2].CreatedAt+2.1), toolOutput("c1", "lookup", true, it[2].CreatedAt+2.2))
			},
			func(it []Item) []Item {
				return insert(it, 2, toolCall("c1", "lookup", "{}", it[2].CreatedAt+2.1), toolOutput("c1", "lookup", false, it[2].CreatedAt+2.2))
			}},
		{CodeDuplicateCallID,
			func(it []Item) []Item {
				return insert(it, 2, toolCall("c1", "a", "{}", it[2].CreatedAt+2.1), toolOutput("c1", "a", false, it[2].CreatedAt+2.2), toolCall("c1", "b", "{}", it[2].CreatedAt+2.3))
			},
			func(it []Item) []Item {
				return insert(it, 2, toolCall("c1", "a", "{}", it[2].CreatedAt+2.1), toolOutput("c1", "a", false, it[2].CreatedAt+2.2), toolCall("c2", "b", "{}", it[2].CreatedAt+2.3), toolOutput("c2", "b", false, it[2].CreatedAt+2.4))
			}},
		{CodeSlowTool,
			func(it []Item) []Item {
				return insert(it, 2, toolCall("c1", "lookup", "{}", it[2].CreatedAt+2.1), toolOutput("c1", "lookup", false, it[2].CreatedAt+7.2))
			},
			func(it []Item) []Item {
				return insert(it, 2, toolCall("c1", "lookup", "{}", it[2].CreatedAt+2.1), toolOutput("c1", "lookup", false, it[2].CreatedAt+7.0))
			}},
		{CodeToolRetrySameArgs,
			func(it []Item) []Item {
				at := it[2].CreatedAt
				return insert(it, 2, toolCall("c1", "move", `{"a":1}`, at+2.1), toolOutput("c1", "move", false, at+2.2), toolCall("c2", "move", `{"a":1}`, at+2.3), toolOutput("c2", "move", false, at+2.4))
			},
			func(it []Item) []Item {
				// The same call in a later user turn is not a retry.
				at := it[2].CreatedAt
				it = insert(it, 4, toolCall("c2", "move", `{"a":1}`, it[4].CreatedAt+2.3), toolOutput("c2", "move", false, it[4].CreatedAt+2.4))
				return insert(it, 2, toolCall("c1", "move", `{"a":1}`, at+2.1), toolOutput("c1", "move", false, at+2.2), toolCall("c3", "move", `{"a":2}`, at+2.3), toolOutput("c3", "move", false, at+2.4))
			}},
		{CodeE2ELatencyP95,
			func(it []Item) []Item { it[11].E2ELatency = f(1.6); return it },
			func(it []Item) []Item { it[11].E2ELatency = f(1.5); return it }},
		{CodeSlowResponse,
			func(it []Item) []Item { it[3].E2ELatency = f(2.6); return it },
			func(it []Item) []Item { it[3].E2ELatency = f(2.5); return it }},
		{CodeE2ELatencyMissing,
			func(it []Item) []Item { it[3].E2ELatency = nil; return it },
			func(it []Item) []Item {
				// An agent message that answers no user turn (after a tool) has no e2e by design.
				return insert(it, 3, Item{ID: "item_followup", Type: TypeMessage, Role: RoleAssistant, Text: "done", CreatedAt: it[3].CreatedAt + 0.1})
			}},
		{CodeTTFTP95,
			func(it []Item) []Item { it[1].LLMNodeTTFT = f(0.9); return it },
			func(it []Item) []Item { it[1].LLMNodeTTFT = f(0.8); return it }},
		{CodeTTFBP95,
			func(it []Item) []Item { it[1].TTSNodeTTFB = f(0.35); return it },
			func(it []Item) []Item { it[1].TTSNodeTTFB = f(0.3); return it }},
		{CodeSTTDelayP95,
			func(it []Item) []Item { it[0].TranscriptionDelay = f(0.6); return it },
			func(it []Item) []Item { it[0].TranscriptionDelay = f(0.5); return it }},
	}
	cfg := DefaultConfig()
	seen := map[string]bool{}
	for _, tc := range tests {
		seen[tc.code] = true
		t.Run(tc.code, func(t *testing.T) {
			clean := Score(Session{Items: tc.clean(append([]Item{}, base...))}, cfg)
			if hasCode(clean, tc.code) {
				t.Errorf("near miss triggered %s", tc.code)
			}
			sc := Score(Session{Items: tc.trigger(append([]Item{}, base...))}, cfg)
			if !hasCode(sc, tc.code) {
				t.Fatalf("%s not triggered; findings: %v", tc.code, codes(sc))
			}
		})
	}
	t.Run("every code has a case", func(t *testing.T) {
		for _, c := range allCodes {
			if !seen[c] {
				t.Errorf("no table case for %s", c)
			}
		}
	})
	t.Run("clean conversation has no findings", func(t *testing.T) {
		if sc := Score(Session{Items: conversation(6)}, cfg); len(codes(sc)) != 0 || sc.Overall.Score != 100 {
			t.Fatalf("findings %v, score %v", codes(sc), sc.Overall.Score)
		}
	})
}

var allCodes = []string{
	CodeUnansweredUserTurn, CodeAgentInterrupted, CodeInterruptionRate, CodeTalkOverUser, CodeLongSilence, CodeSlowEndOfTurn, CodeHandoffLoop,
	CodeLowConfidence, CodeLowMeanConfidence, CodeEmptyTranscript, CodeUserTurnNoMetrics, CodeDuplicateItemID, CodeTimestampOutOfOrder,
	CodeToolCallWithoutOutput, CodeToolOutputWithoutCall, CodeToolError, CodeDuplicateCallID, CodeSlowTool, CodeToolRetrySameArgs,
	CodeE2ELatencyP95, CodeSlowResponse, CodeE2ELatencyMissing, CodeTTFTP95, CodeTTFBP95, CodeSTTDelayP95,
}

func hasCode(sc Scorecard, code string) bool {
	for _, c := range sc.Components {
		for _, f := range c.Findings {
			if f.Code == code {
				return true
			}
		}
	}
	return false
}

func codes(sc Scorecard) []string {
	var out []string
	for _, c := range sc.Components {
		for _, f := range c.Findings {
			out = append(out, f.Code)
		}
	}
	return out
}

func TestCloseReasonEffect(t *testing.T) {
	for reason, want := range map[string]string{"CR_ERROR": "failed", "CR_COMPLETED": "completed", "CR_UNKNOWN": "unknown", "": "unknown", "CR_JOB_SHUTDOWN": "completed"} {
		sc := Score(Session{Close: session.Close{CloseReason: reason}, Items: conversation(3)}, DefaultConfig())
		if sc.Completion.Status != want {
			t.Errorf("%q: status %s, want %s", reason, sc.Completion.Status, want)
		}
		if (sc.Overall.Verdict == Fail) != (reason == "CR_ERROR") {
			t.Errorf("%q: verdict %s", reason, sc.Overall.Verdict)
		}
	}
}

func TestConfigValidate(t *testing.T) {
	if err := DefaultConfig().Validate(); err != nil {
		t.Fatal(err)
	}
	c := DefaultConfig()
	c.Weights = Weights{}
	c.Verdict = Verdict{Pass: 50, Warn: 70}
	c.Transcript.LowConfidence = 1.5
	c.Latency.E2EBadMs = c.Latency.E2EGoodMs
	err := c.Validate()
	for _, want := range []string{"scoring.weights", "scoring.verdict", "scoring.transcript.low_confidence", "scoring.latency.e2e_bad_ms"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("error %v lacks %s", err, want)
		}
	}
	if DefaultConfig().Version() == c.Version() || DefaultConfig().Version() != DefaultConfig().Version() {
		t.Error("the scoring version must follow the config, and only the config")
	}
}

// TestRedactedToolError: a redacted session's findings describe a failed
// tool without quoting its output.
func TestRedactedToolError(t *testing.T) {
	items := []Item{
		{ID: "c", Type: TypeFunctionCall, CallID: "1", Name: "lookup_patient", Arguments: `{"phone":"+1 555 0100"}`, CreatedAt: 10},
		{ID: "o", Type: TypeFunctionCallOutput, CallID: "1", Name: "lookup_patient", IsError: true,
			Output: "timeout looking up Jane Doe, +1 555 0100", CreatedAt: 11},
	}
	for _, redacted := range []bool{false, true} {
		sc := Score(Session{Identity: session.Identity{Key: "RM/AJ"}, Items: items, Redacted: redacted}, DefaultConfig())
		var msg string
		for _, c := range sc.Components {
			for _, f := range c.Findings {
				if f.Code == CodeToolError {
					msg = f.Message
				}
			}
		}
		quoted := strings.Contains(msg, "Jane Doe") || strings.Contains(msg, "555")
		if redacted && (quoted || !strings.Contains(msg, "timeout") || !strings.Contains(msg, "lookup_patient")) {
			t.Errorf("redacted: %q", msg)
		}
		if !redacted && !quoted {
			t.Errorf("not redacted: %q", msg)
		}
	}
}

// TestNoVerdictWithoutEvidence: a recording that gives a component nothing
// to measure leaves it not measured, never 100; a session no component
// measured is unscored, with what was missing named; a chat history with no
// user turn is at most warn.
func TestNoVerdictWithoutEvidence(t *testing.T) {
	agentOnly := conversation(2)
	agentOnly = []Item{agentOnly[1], agentOnly[3]}
	for _, tc := range []struct {
		name        string
		items       []Item
		verdict     string
		unmeasured  []string
		reasonsHave string
	}{
		{"header only", nil, Unscored, []string{TurnHandling, TranscriptIntegrity, ToolReliability, ResponseLatency}, "no chat history"},
		{"empty chat history", []Item{}, Unscored, []string{TurnHandling, TranscriptIntegrity, ToolReliability, ResponseLatency}, "no chat history"},
		{"no user turn", agentOnly, Warn, []string{TranscriptIntegrity, ToolReliability}, "no user turn"},
		{"no tool called", conversation(3), Pass, []string{ToolReliability}, "weighted score"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sc := Score(Session{Identity: session.Identity{Key: "k"}, Close: session.Close{CloseReason: "CR_PARTICIPANT_DISCONNECTED"}, Items: tc.items}, DefaultConfig())
			if sc.Overall.Verdict != tc.verdict {
				t.Errorf("verdict %s (%v), want %s", sc.Overall.Verdict, sc.Overall.Reasons, tc.verdict)
			}
			if !strings.Contains(strings.Join(sc.Overall.Reasons, "; "), tc.reasonsHave) {
				t.Errorf("reasons %q do not say %q", sc.Overall.Reasons, tc.reasonsHave)
			}
			want := map[string]bool{}
			for _, n := range tc.unmeasured {
				want[n] = true
			}
			for _, c := range sc.Components {
				if got := c.Verdict == NotMeasured; got != want[c.Name] {
					t.Errorf("%s: verdict %s score %v (%q), not measured want %v", c.Name, c.Verdict, c.Score, c.NotMeasured, want[c.Name])
				}
				if c.Verdict == NotMeasured && (c.NotMeasured == "" || c.Score != 0) {
					t.Errorf("%s: not measured with score %v and no reason %q", c.Name, c.Score, c.NotMeasured)
				}
			}
			if tc.verdict == Unscored && sc.Overall.Score != 0 {
				t.Errorf("unscored with score %v", sc.Overall.Score)
			}
		})
	}
	// An error close fails whatever was measured: the close is evidence.
	// But its score is no score: not comparable, kept out of trends.
	if sc := Score(Session{Identity: session.Identity{Key: "k"}, Close: session.Close{CloseReason: "CR_ERROR"}}, DefaultConfig()); sc.Overall.Verdict != Fail || sc.Comparable() {
		t.Errorf("CR_ERROR without a chat history: %s, comparable %v", sc.Overall.Verdict, sc.Comparable())
	}
	if sc := Score(Session{Identity: session.Identity{Key: "k"}, Close: session.Close{CloseReason: "CR_PARTICIPANT_DISCONNECTED"}, Items: conversation(2)}, DefaultConfig()); !sc.Comparable() {
		t.Error("a measured call is not comparable")
	}
}
