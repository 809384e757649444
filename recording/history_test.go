package recording

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"testing"

	"github.com/lkscore/lkscore/scoring"
)

func TestRealisticHistoryParses(t *testing.T) {
	data := realisticHistory(200)
	h, err := ParseChatHistory(bytes.NewReader(data), ChatLimits{})
	if err != nil {
		t.Fatal(err)
	}
	if len(data) < 200<<10 || h.Counts[scoring.TypeMessage] != 400 || h.Counts[scoring.TypeFunctionCall] != 50 || len(h.Problems) != 0 {
		t.Fatalf("%d bytes, counts %v, problems %v", len(data), h.Counts, h.Problems)
	}
}

func TestHistoryFixtureCurrent(t *testing.T) {
	want := realisticHistory(200)
	if *updateFixture {
		if err := os.WriteFile(historyFixture, want, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	got, err := os.ReadFile(historyFixture)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("%s is stale: run go test ./recording -run TestHistoryFixtureCurrent -update-fixture", historyFixture)
	}
}

var updateFixture = flag.Bool("update-fixture", false, "rewrite "+historyFixture)

// historyFixture is realisticHistory(200), committed so that other modules
// (bench/decoders), lkscore bench and tools/perf-vs-python.sh use the same bytes.
const historyFixture = "../scenarios/load/history_200turns.json"

// realisticHistory builds a Python-form chat_history.json of turns user and
// agent turns with metrics, a tool call every fourth turn, and a handoff
// every 50 turns: several hundred KB for 200 turns.
func realisticHistory(turns int) []byte {
	type m = map[string]any
	items := []m{{"id": "item_cfg000000000", "type": "agent_config_update", "instructions": "You are a helpful booking assistant. Be concise and friendly.", "tools_added": []string{"lookup_booking", "move_booking"}, "created_at": 1764417600.1}}
	t := 1764417600.5
	for i := 0; i < turns; i++ {
		items = append(items, m{"id": fmt.Sprintf("item_u%011d", i), "type": "message", "role": "user",
			"content":     []string{fmt.Sprintf("Turn %d: I would like to move my booking on Friday to the afternoon slot if one is still available, please.", i)},
			"interrupted": false, "transcript_confidence": 0.91, "extra": m{},
			"metrics": m{"started_speaking_at": t, "stopped_speaking_at": t + 2.6, "transcription_delay": 0.21, "end_of_turn_delay": 0.58,
				"on_user_turn_completed_delay": 0.001, "stt_metadata": m{"model_name": "nova-3", "model_provider": "deepgram"}},
			"created_at": t})
		t += 3.2
		if i%4 == 0 {
			items = append(items,
				m{"id": fmt.Sprintf("item_c%011d", i), "type": "function_call", "call_id": fmt.Sprintf("call_%d", i), "arguments": `{"day": "friday", "slot": "afternoon"}`, "name": "lookup_booking", "created_at": t, "extra": m{}},
				m{"id": fmt.Sprintf("item_o%011d", i), "type": "function_call_output", "name": "lookup_booking", "call_id": fmt.Sprintf("call_%d", i), "output": `{"slots": ["14:00", "15:30", "16:45"], "timezone": "Europe/Berlin"}`, "is_error": false, "created_at": t + 0.4, "reply_required": true})
			t += 0.5
		}
		items = append(items, m{"id": fmt.Sprintf("item_a%011d", i), "type": "message", "role": "assistant",
			"content":     []string{"Friday afternoon has 14:00, 15:30 and 16:45 available. Which one would you like me to book for you?"},
			"interrupted": i%7 == 0, "extra": m{},
			"metrics": m{"started_speaking_at": t + 0.9, "stopped_speaking_at": t + 4.1, "llm_node_ttft": 0.41, "llm_node_tps": 61.5, "tts_node_ttfb": 0.17,
				"playback_latency": 0.004, "e2e_latency": 1.21, "provider_request_ids": []string{"chatcmpl-abc123def456"},
				"llm_metadata": m{"model_name": "gpt-4.1-mini", "model_provider": "openai"}, "tts_metadata": m{"model_name": "sonic-2", "model_provider": "cartesia"}},
			"created_at": t})
		t += 4.5
		if i%50 == 49 {
			items = append(items, m{"id": fmt.Sprintf("item_h%011d", i), "type": "agent_handoff", "old_agent_id": "greeter_agent", "new_agent_id": "booking_agent", "created_at": t})
		}
	}
	b, _ := json.Marshal(m{"items": items})
	return b
}
