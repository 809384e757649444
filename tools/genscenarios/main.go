// Command genscenarios writes the first six acceptance scenarios' recording
// uploads (header.binpb, chat_history.json) in the directory layout, the
// way the SDKs write them (7_header_only is a bare header, and
// 8_room_deleted_no_logs a real session from the field recording: neither
// is generated). They are committed in scenarios/data; `go
// generate ./scenarios` rewrites them, and its test checks that the
// generator still gives the committed bytes.
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sort"
	"time"

	"github.com/livekit/protocol/livekit"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"
)

// turn is one exchange the generator lays out on a timeline.
type turn struct {
	user        string
	conf        float64 // 0 = not reported
	agent       string
	e2e         float64 // seconds; 0 = not reported
	ttft, ttfb  float64
	overlap     float64 // agent starts this long before the user stops
	interrupted bool
	noAnswer    bool
	tool        *toolUse
	handoffTo   string
}

type toolUse struct {
	name, args, output string
	isError, noOutput  bool
	took               float64
	repeat             int // further identical calls in the same turn (a retry loop)
}

type scenario struct {
	name, roomID, jobID, summary string
	js                           bool // agents-js: ms created_at, no empty extra/metrics
	turns                        []turn
}

// Python item shapes, in the SDK's dump order.
type pyMessage struct {
	ID                   string         `json:"id"`
	Type                 string         `json:"type"`
	Role                 string         `json:"role"`
	Content              []string       `json:"content"`
	Interrupted          bool           `json:"interrupted"`
	TranscriptConfidence *float64       `json:"transcript_confidence,omitempty"`
	Extra                map[string]any `json:"extra,omitempty"`
	Metrics              map[string]any `json:"metrics,omitempty"`
	CreatedAt            any            `json:"created_at"`
}

type pyCall struct {
	ID        string         `json:"id"`
	Type      string         `json:"type"`
	CallID    string         `json:"call_id"`
	Arguments string         `json:"arguments"`
	Name      string         `json:"name"`
	CreatedAt any            `json:"created_at"`
	Extra     map[string]any `json:"extra,omitempty"`
}

type pyOutput struct {
	ID            string `json:"id"`
	Type          string `json:"type"`
	Name          string `json:"name"`
	CallID        string `json:"call_id"`
	Output        string `json:"output"`
	IsError       bool   `json:"is_error"`
	CreatedAt     any    `json:"created_at"`
	ReplyRequired *bool  `json:"reply_required,omitempty"`
}

type pyHandoff struct {
	ID         string `json:"id"`
	Type       string `json:"type"`
	OldAgentID string `json:"old_agent_id,omitempty"`
	NewAgentID string `json:"new_agent_id"`
	CreatedAt  any    `json:"created_at"`
}

// builder lays out one scenario's items on its timeline; every random draw
// comes from rng, in the order the items are made, so a scenario always
// gives the same bytes.
type builder struct {
	sc    scenario
	rng   *rand.Rand
	items []any
}

func (b *builder) id() string { return fmt.Sprintf("item_%012x", b.rng.Uint64()&0xffffffffffff) }

// ts is a created_at as the SDK writes it: ms integers in agents-js,
// seconds with three decimals in Python.
func (b *builder) ts(v float64) any {
	if b.sc.js {
		return int64(v * 1000)
	}
	return float64(int64(v*1000)) / 1000
}

func r3(v float64) float64 { return float64(int64(v*1000)) / 1000 }

// extra is an item's extra: {} in Python, absent in agents-js.
func (b *builder) extra() map[string]any {
	if b.sc.js {
		return nil
	}
	return map[string]any{}
}

func (sc scenario) build(rng *rand.Rand) []any {
	b := &builder{sc: sc, rng: rng, items: []any{}}
	t := 1764417600.0 + rng.Float64()
	agentName := "greeter_agent"
	for k, tr := range sc.turns {
		if tr.handoffTo != "" {
			b.items = append(b.items, pyHandoff{ID: b.id(), Type: "agent_handoff", OldAgentID: agentName, NewAgentID: tr.handoffTo,
				CreatedAt: b.ts(t)})
			agentName = tr.handoffTo
			t += 0.05
		}
		stop := b.user(tr, t)
		switch {
		case tr.tool != nil:
			t = b.toolTurn(k, tr, stop)
		case tr.noAnswer:
			t = stop + 2
		default:
			t = b.answer(tr, stop, stop)
		}
	}
	// ChatContext keeps items ordered by created_at, as the SDKs do.
	sort.SliceStable(b.items, func(i, j int) bool { return createdAt(b.items[i]) < createdAt(b.items[j]) })
	return b.items
}

// user adds the user's utterance of tr after t and returns when it stops.
func (b *builder) user(tr turn, t float64) float64 {
	rng := b.rng
	start := t + 0.4 + rng.Float64()*0.6
	stop := start + 1.2 + rng.Float64()*2.5
	um := map[string]any{"started_speaking_at": r3(start), "stopped_speaking_at": r3(stop),
		"transcription_delay": r3(0.15 + rng.Float64()*0.2), "end_of_turn_delay": r3(0.35 + rng.Float64()*0.4)}
	if !b.sc.js {
		um["on_user_turn_completed_delay"] = 0.001
		um["stt_metadata"] = map[string]any{"model_name": "nova-3", "model_provider": "deepgram"}
	}
	msg := pyMessage{ID: b.id(), Type: "message", Role: "user", Content: []string{tr.user}, Extra: b.extra(), Metrics: um,
		CreatedAt: b.ts(start)}
	if tr.conf > 0 {
		msg.TranscriptConfidence = &tr.conf
	}
	b.items = append(b.items, msg)
	return stop
}

// toolTurn adds a turn that uses a tool: the agent says a filler, runs the
// tool, then answers with the result (the answer follows no user turn, so
// it has no e2e_latency). It returns when the turn is over.
func (b *builder) toolTurn(k int, tr turn, stop float64) float64 {
	rng := b.rng
	fStart := stop + tr.e2e
	fStop := fStart + 1.1
	fm := map[string]any{"started_speaking_at": r3(fStart), "stopped_speaking_at": r3(fStop), "e2e_latency": r3(tr.e2e),
		"llm_node_ttft": r3(tr.ttft), "tts_node_ttfb": r3(tr.ttfb)}
	b.items = append(b.items, pyMessage{ID: b.id(), Type: "message", Role: "assistant", Content: []string{"One moment, let me check that."},
		Extra: b.extra(), Metrics: fm, CreatedAt: b.ts(fStart - 0.3)})
	at := fStart - 0.25
	for r := 0; r <= tr.tool.repeat; r++ {
		callID := fmt.Sprintf("call_%d_%04x", k, rng.Uint32()&0xffff)
		b.items = append(b.items, pyCall{ID: b.id(), Type: "function_call", CallID: callID, Arguments: tr.tool.args, Name: tr.tool.name,
			CreatedAt: b.ts(at), Extra: b.extra()})
		if !tr.tool.noOutput {
			var rr *bool
			if !b.sc.js {
				rr = new(bool)
				*rr = true
			}
			b.items = append(b.items, pyOutput{ID: b.id(), Type: "function_call_output", Name: tr.tool.name, CallID: callID,
				Output: tr.tool.output, IsError: tr.tool.isError, CreatedAt: b.ts(at + tr.tool.took), ReplyRequired: rr})
		}
		at += tr.tool.took + 0.2
	}
	t := max(fStop, at)
	if tr.noAnswer {
		return t + 2
	}
	aStart := t + 0.6
	aStop := aStart + 2 + rng.Float64()*2
	am := map[string]any{"started_speaking_at": r3(aStart), "stopped_speaking_at": r3(aStop), "llm_node_ttft": r3(tr.ttft),
		"tts_node_ttfb": r3(tr.ttfb)}
	b.items = append(b.items, pyMessage{ID: b.id(), Type: "message", Role: "assistant", Content: []string{tr.agent}, Extra: b.extra(),
		Metrics: am, CreatedAt: b.ts(aStart - 0.3)})
	return aStop
}

// answer adds the agent's answer to the user who stopped at stop (t is the
// timeline's time) and returns when it stops.
func (b *builder) answer(tr turn, stop, t float64) float64 {
	rng := b.rng
	e2e := tr.e2e
	agentStart := stop + e2e
	if tr.overlap > 0 {
		agentStart = stop - tr.overlap
	}
	if e2e == 0 && tr.overlap == 0 {
		agentStart = stop + 0.9
	}
	agentStop := agentStart + 1.5 + rng.Float64()*3
	if tr.interrupted {
		agentStop = agentStart + 0.6 + rng.Float64()*0.6
	}
	am := map[string]any{"started_speaking_at": r3(agentStart), "stopped_speaking_at": r3(agentStop), "tts_node_ttfb": r3(tr.ttfb),
		"llm_node_ttft": r3(tr.ttft)}
	if e2e > 0 {
		am["e2e_latency"] = r3(e2e)
	}
	if !b.sc.js {
		am["llm_node_tps"] = 58.4
		am["playback_latency"] = 0.004
		am["provider_request_ids"] = []string{fmt.Sprintf("chatcmpl-%08x", rng.Uint32())}
		am["llm_metadata"] = map[string]any{"model_name": "gpt-4.1-mini", "model_provider": "openai"}
		am["tts_metadata"] = map[string]any{"model_name": "sonic-2", "model_provider": "cartesia"}
	}
	// The reply is created just before it is spoken, after any tool output.
	created := max(agentStart-0.3, t+0.01)
	b.items = append(b.items, pyMessage{ID: b.id(), Type: "message", Role: "assistant", Content: []string{tr.agent},
		Interrupted: tr.interrupted, Extra: b.extra(), Metrics: am, CreatedAt: b.ts(created)})
	return agentStop
}

func createdAt(v any) float64 {
	var c any
	switch it := v.(type) {
	case pyMessage:
		c = it.CreatedAt
	case pyCall:
		c = it.CreatedAt
	case pyOutput:
		c = it.CreatedAt
	case pyHandoff:
		c = it.CreatedAt
	}
	switch x := c.(type) {
	case int64:
		return float64(x) / 1000
	case float64:
		return x
	}
	return 0
}

func (sc scenario) write(dir string) error {
	rng := rand.New(rand.NewPCG(uint64(len(sc.name)), 42))
	chat, err := json.Marshal(map[string]any{"items": sc.build(rng)})
	if err != nil {
		return err
	}
	header, err := proto.Marshal(&livekit.MetricsRecordingHeader{
		RoomId: sc.roomID, JobId: sc.jobID, StartTime: timestamppb.New(time.Unix(1764417600, 0)), SessionSummary: sc.summary,
	})
	if err != nil {
		return err
	}
	d := filepath.Join(dir, sc.name)
	if err := os.MkdirAll(d, 0o755); err != nil {
		return err
	}
	for name, b := range map[string][]byte{"header.binpb": header, "chat_history.json": chat} {
		if err := os.WriteFile(filepath.Join(d, name), b, 0o644); err != nil {
			return err
		}
	}
	return nil
}

// lines gives n plausible alternating utterances.
func lines(n int, f func(k int) turn) []turn {
	out := make([]turn, n)
	for k := range out {
		out[k] = f(k)
	}
	return out
}

var userLines = []string{
	"Hi, I'd like to change my booking.", "It's under the name Garcia.", "The one on Friday at ten.",
	"Can we move it to the afternoon?", "Two thirty works.", "Yes, same room please.", "Do you have parking there?",
	"Great, and is breakfast included?", "Okay, can you send me a confirmation?", "To my email on file, yes.",
	"Actually, can I add one more guest?", "Her name is Ana.", "Perfect, thank you.", "That's all, bye.",
}

var agentLines = []string{
	"Sure, I can help with that. What name is the booking under?", "Thanks. I see two bookings, which one?",
	"Got it, Friday at ten. What would you like to change?", "Let me check the afternoon slots.",
	"Two thirty is available. Shall I move it?", "Done, same room. Anything else?", "Yes, parking is free for guests.",
	"Breakfast is included from seven to ten.", "I'll send the confirmation now.", "Sent. You should have it shortly.",
	"Of course. What is the guest's name?", "Added Ana to the booking.", "You're welcome!", "Goodbye, have a nice day!",
}

func say(k int) (string, string) { return userLines[k%len(userLines)], agentLines[k%len(agentLines)] }

func scenarios() []scenario {
	return []scenario{
		{name: "1_clean_call", roomID: "RM_CleanCall01", jobID: "AJ_CleanCall01",
			summary: `{"close_reason":"CR_PARTICIPANT_DISCONNECTED","started_at":1764417600.12,"sdk":"python","sdk_version":"1.8.0"}`,
			turns: lines(14, func(k int) turn {
				u, a := say(k)
				tr := turn{user: u, conf: 0.9 + float64(k%5)*0.02, agent: a, e2e: 0.85 + float64(k%4)*0.12,
					ttft: 0.35 + float64(k%3)*0.05, ttfb: 0.16 + float64(k%2)*0.03}
				if k == 3 {
					tr.tool = &toolUse{name: "lookup_slots", args: `{"day": "friday", "after": "12:00"}`, output: `{"slots": ["14:30", "16:00"]}`, took: 0.6}
				}
				if k == 2 {
					tr.handoffTo = "booking_agent"
					tr.e2e = 0 // the first reply after a handoff carries no e2e_latency
				}
				return tr
			})},
		{name: "2_slow_agent", roomID: "RM_SlowAgent02", jobID: "AJ_SlowAgent02", js: true,
			summary: `{"close_reason":"user_initiated","sdk":"js"}`,
			turns: lines(16, func(k int) turn {
				u, a := say(k)
				return turn{user: u, conf: 0.93, agent: a, e2e: 1.9 + float64(k%6)*0.35, ttft: 1.1 + float64(k%5)*0.2, ttfb: 0.45 + float64(k%3)*0.1}
			})},
		{name: "3_barge_in", roomID: "RM_BargeIn03", jobID: "AJ_BargeIn03",
			summary: `{"close_reason":"CR_PARTICIPANT_DISCONNECTED"}`,
			turns: lines(22, func(k int) turn {
				u, a := say(k)
				tr := turn{user: u, conf: 0.92, agent: a, e2e: 1.0, ttft: 0.4, ttfb: 0.18}
				if k%3 == 1 {
					tr.interrupted = true
				}
				if k%4 == 2 {
					tr.overlap = 0.5 + float64(k%3)*0.2
				}
				return tr
			})},
		{name: "4_tool_trouble", roomID: "RM_ToolTrouble04", jobID: "AJ_ToolTrouble04", js: true,
			summary: `{"close_reason":"CR_COMPLETED"}`,
			turns: lines(14, func(k int) turn {
				u, a := say(k)
				tr := turn{user: u, conf: 0.94, agent: a, e2e: 1.1, ttft: 0.42, ttfb: 0.2}
				switch k {
				case 3:
					tr.tool = &toolUse{name: "lookup_slots", args: `{"day":"friday"}`,
						output: "upstream timeout: calendar service unavailable", isError: true, took: 8.2}
				case 5:
					tr.tool = &toolUse{name: "move_booking", args: `{"booking":"B-1182","slot":"14:30"}`, output: `{"ok":false,"retry":true}`, took: 0.9, repeat: 2}
				case 8:
					tr.tool = &toolUse{name: "send_confirmation", args: `{"to":"email"}`, noOutput: true}
				}
				return tr
			})},
		{name: "5_bad_hearing", roomID: "RM_BadHearing05", jobID: "AJ_BadHearing05",
			summary: `{"close_reason":"participant_disconnected"}`,
			turns: lines(16, func(k int) turn {
				u, a := say(k)
				tr := turn{user: u, conf: 0.88, agent: "Sorry, could you repeat that?", e2e: 1.1, ttft: 0.4, ttfb: 0.2}
				if k%3 == 0 {
					tr.agent = a
				}
				if k%2 == 1 {
					tr.conf = 0.32 + float64(k%4)*0.06
				}
				if k == 5 || k == 9 || k == 13 {
					tr.user, tr.conf = " ", 0.12
				}
				return tr
			})},
		{name: "6_error_close", roomID: "RM_ErrorClose06", jobID: "AJ_ErrorClose06", js: true,
			summary: `{"close_reason":"CR_ERROR","error":"llm provider returned 500 three times"}`,
			turns: lines(11, func(k int) turn {
				u, a := say(k)
				tr := turn{user: u, conf: 0.91, agent: a, e2e: 1.2, ttft: 0.5, ttfb: 0.2}
				if k == 10 {
					tr.noAnswer = true
				}
				return tr
			})},
	}
}

func main() {
	out := flag.String("out", "data", "the directory to write the scenarios into (scenarios/data)")
	flag.Parse()
	for _, sc := range scenarios() {
		if err := sc.write(*out); err != nil {
			fmt.Fprintln(os.Stderr, "genscenarios:", err)
			os.Exit(1)
		}
	}
}
