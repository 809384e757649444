package scenarios

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

var updateField = flag.Bool("update-field", false, "rewrite scenarios/load/field (the JS files need node and consumer/testdata/agents-js/node_modules)")

// A call plan: what happened in one call, in seconds at full precision. The
// Python form is written from it here; the JS form by the agents-js SDK
// (gen-history.mjs), which rounds its timestamps to Date.now()'s
// milliseconds and derives e2e latency as the SDK does.
type planItem struct {
	Kind        string  `json:"kind"` // config, user, assistant, call, output, handoff
	ID          string  `json:"id"`
	Text        string  `json:"text,omitempty"`
	Interrupted bool    `json:"interrupted,omitempty"`
	Confidence  float64 `json:"confidence,omitempty"`
	Created     float64 `json:"created"`
	Start       float64 `json:"start,omitempty"`
	Stop        float64 `json:"stop,omitempty"`
	STTDelay    float64 `json:"stt_delay,omitempty"`
	EOUDelay    float64 `json:"eou_delay,omitempty"`
	OnCompleted float64 `json:"on_completed,omitempty"`
	TTFT        float64 `json:"ttft,omitempty"`
	TPS         float64 `json:"tps,omitempty"`
	TTFB        float64 `json:"ttfb,omitempty"`
	Playback    float64 `json:"playback,omitempty"`
	E2E         float64 `json:"e2e,omitempty"`
	ReqID       string  `json:"req_id,omitempty"`
	CallID      string  `json:"call_id,omitempty"`
	Name        string  `json:"name,omitempty"`
	Args        string  `json:"args,omitempty"`
	Output      string  `json:"output,omitempty"`
	IsError     bool    `json:"is_error,omitempty"`
	OldAgent    string  `json:"old_agent,omitempty"`
	NewAgent    string  `json:"new_agent,omitempty"`
}

var words = strings.Fields(`the booking friday afternoon slot available please move my order delivery address
	card payment refund week tomorrow morning evening time change cancel confirm number account email phone name
	again sorry yes no thanks great okay sure could would like need help check status today later before after`)

func sentence(r *rand.Rand, lo, hi int) string {
	n := lo + r.IntN(hi-lo+1)
	w := make([]string, n)
	for i := range w {
		w[i] = words[r.IntN(len(words))]
	}
	s := strings.Join(w, " ")
	return strings.ToUpper(s[:1]) + s[1:] + "."
}

func hexID(r *rand.Rand, n int) string {
	const digits = "0123456789abcdef"
	b := make([]byte, n)
	for i := range b {
		b[i] = digits[r.IntN(16)]
	}
	return string(b)
}

// callPlan is a seeded call of `turns` user turns: a config update, a
// greeting, a handoff after the greeting and every ~60 turns, a tool call
// in a quarter of the answers (5% of them failing), a tenth of the answers
// interrupted, delays drawn around what the SDKs report.
func callPlan(turns int, seed uint64) []planItem {
	r := rand.New(rand.NewPCG(seed, 0x6c6b73636f7265))
	u := func(lo, hi float64) float64 { return lo + r.Float64()*(hi-lo) }
	t := 1764699269.0 + float64(r.IntN(86400*30)) + r.Float64()
	items := []planItem{{Kind: "config", ID: "item_" + hexID(r, 12), Text: "You are a helpful booking assistant. Be concise and friendly.", Created: t}}
	t += u(0.3, 0.8)
	greet := u(1.2, 2.4)
	items = append(items, planItem{Kind: "assistant", ID: "item_" + hexID(r, 12), Text: "Hi! How can I help you today?", Created: t,
		Start: t + u(0.1, 0.3), Stop: t + greet, TTFB: u(0.08, 0.3), Playback: u(0.002, 0.03)})
	t += greet + u(0.5, 1.5)
	agents := []string{"greeter_agent", "booking_agent"}
	for i := 0; i < turns; i++ {
		if i == 1 || (i > 1 && i%60 == 0) {
			items = append(items, planItem{Kind: "handoff", ID: "item_" + hexID(r, 12), Created: t, OldAgent: agents[0], NewAgent: agents[1]})
			agents[0], agents[1] = agents[1], agents[0]
		}
		speak := u(0.7, 4.5)
		user := planItem{Kind: "user", ID: "item_" + hexID(r, 12), Text: sentence(r, 2, 22), Confidence: u(0.62, 0.999),
			Start: t, Stop: t + speak, STTDelay: u(0.04, 0.45), EOUDelay: u(0.18, 1.3), OnCompleted: u(1e-5, 4e-4)}
		user.Created = user.Start
		items = append(items, user)
		t = user.Stop + user.EOUDelay
		if r.IntN(4) == 0 {
			callID := "call_" + hexID(r, 24)
			isErr := r.IntN(20) == 0
			out := `{"slots": ["14:00", "15:30", "16:45"], "timezone": "Europe/Berlin"}`
			if isErr {
				out = "An internal error occurred while executing the tool"
			}
			t += u(0.3, 0.9)
			items = append(items, planItem{Kind: "call", ID: "item_" + hexID(r, 12), Created: t, CallID: callID, Name: "lookup_booking",
				Args: fmt.Sprintf(`{"day": "%s", "slot": "afternoon"}`, words[r.IntN(len(words))])})
			t += u(0.05, 1.6)
			items = append(items, planItem{Kind: "output", ID: "item_" + hexID(r, 12), Created: t, CallID: callID, Name: "lookup_booking",
				Output: out, IsError: isErr})
		}
		ttft, ttfb := u(0.18, 0.95), u(0.07, 0.38)
		a := planItem{Kind: "assistant", ID: "item_" + hexID(r, 12), Text: sentence(r, 6, 60), Created: t, TTFT: ttft, TPS: u(18, 95),
			TTFB: ttfb, Playback: u(0.002, 0.03), ReqID: "chatcmpl-" + hexID(r, 29), Interrupted: r.IntN(10) == 0}
		a.Start = t + ttft + ttfb + a.Playback
		a.E2E = a.Start - user.Stop
		a.Stop = a.Start + u(0.9, 9.5)
		if a.Interrupted {
			a.Stop = a.Start + u(0.2, 1.2)
		}
		items = append(items, a)
		t = a.Stop + u(0.2, 1.8)
	}
	return items
}

// pyFloat is Python's repr of a float, which json.dumps writes: the
// shortest round-trip digits, in exponent form below 1e-4 or from 1e16.
func pyFloat(f float64) string {
	if f == math.Trunc(f) && math.Abs(f) < 1e16 {
		return strconv.FormatFloat(f, 'f', 1, 64)
	}
	e := strconv.FormatFloat(f, 'e', -1, 64)
	exp, _ := strconv.Atoi(e[strings.IndexByte(e, 'e')+1:])
	if exp < -4 || exp >= 16 {
		return e
	}
	return strconv.FormatFloat(f, 'f', -1, 64)
}

// pyObj is a dict in insertion order, dumped as json.dumps dumps it.
type pyObj []pyKV
type pyKV struct {
	k string
	v any
}

func writePy(b *bytes.Buffer, v any) {
	switch v := v.(type) {
	case pyObj:
		b.WriteByte('{')
		for i, kv := range v {
			if i > 0 {
				b.WriteString(", ")
			}
			writePy(b, kv.k)
			b.WriteString(": ")
			writePy(b, kv.v)
		}
		b.WriteByte('}')
	case []any:
		b.WriteByte('[')
		for i, e := range v {
			if i > 0 {
				b.WriteString(", ")
			}
			writePy(b, e)
		}
		b.WriteByte(']')
	case string:
		s, _ := json.Marshal(v) // ASCII text: json.dumps escapes the same
		b.Write(s)
	case float64:
		b.WriteString(pyFloat(v))
	case bool:
		b.WriteString(strconv.FormatBool(v))
	default:
		panic(fmt.Sprintf("pyObj: %T", v))
	}
}

// pythonHistory is ChatContext.to_dict(exclude_timestamp=False) of the plan
// as livekit/agents 1.x dumps it (model_dump(mode="json", exclude_none=True)):
// every field in declaration order, defaults included.
func pythonHistory(plan []planItem) []byte {
	items := make([]any, 0, len(plan))
	meta := func(model, provider string) pyObj {
		return pyObj{{"model_name", model}, {"model_provider", provider}}
	}
	for _, p := range plan {
		switch p.Kind {
		case "config":
			items = append(items, pyObj{{"id", p.ID}, {"type", "agent_config_update"}, {"instructions", p.Text},
				{"tools_added", []any{"lookup_booking"}}, {"created_at", p.Created}})
		case "user":
			items = append(items, pyObj{{"id", p.ID}, {"type", "message"}, {"role", "user"}, {"content", []any{p.Text}},
				{"interrupted", false}, {"transcript_confidence", p.Confidence}, {"extra", pyObj{}},
				{"metrics", pyObj{{"started_speaking_at", p.Start}, {"stopped_speaking_at", p.Stop}, {"transcription_delay", p.STTDelay},
					{"end_of_turn_delay", p.EOUDelay}, {"on_user_turn_completed_delay", p.OnCompleted}, {"stt_metadata", meta("nova-3", "deepgram")}}},
				{"created_at", p.Created}})
		case "assistant":
			m := pyObj{{"started_speaking_at", p.Start}, {"stopped_speaking_at", p.Stop}}
			if p.TTFT != 0 {
				m = append(m, pyKV{"llm_node_ttft", p.TTFT}, pyKV{"llm_node_tps", p.TPS})
			}
			m = append(m, pyKV{"tts_node_ttfb", p.TTFB}, pyKV{"playback_latency", p.Playback})
			if p.E2E != 0 {
				m = append(m, pyKV{"e2e_latency", p.E2E})
			}
			if p.ReqID != "" {
				m = append(m, pyKV{"provider_request_ids", []any{p.ReqID}}, pyKV{"llm_metadata", meta("gpt-4.1-mini", "openai")})
			}
			m = append(m, pyKV{"tts_metadata", meta("sonic-2", "cartesia")})
			items = append(items, pyObj{{"id", p.ID}, {"type", "message"}, {"role", "assistant"}, {"content", []any{p.Text}},
				{"interrupted", p.Interrupted}, {"extra", pyObj{}}, {"metrics", m}, {"created_at", p.Created}})
		case "call":
			items = append(items, pyObj{{"id", p.ID}, {"type", "function_call"}, {"call_id", p.CallID}, {"arguments", p.Args},
				{"name", p.Name}, {"created_at", p.Created}, {"extra", pyObj{}}})
		case "output":
			items = append(items, pyObj{{"id", p.ID}, {"type", "function_call_output"}, {"name", p.Name}, {"call_id", p.CallID},
				{"output", p.Output}, {"is_error", p.IsError}, {"created_at", p.Created}, {"reply_required", true}})
		case "handoff":
			items = append(items, pyObj{{"id", p.ID}, {"type", "agent_handoff"}, {"old_agent_id", p.OldAgent},
				{"new_agent_id", p.NewAgent}, {"created_at", p.Created}})
		}
	}
	var b bytes.Buffer
	writePy(&b, pyObj{{"items", items}})
	return b.Bytes()
}

// jsHistory runs the plan through the real agents-js SDK.
func jsHistory(t *testing.T, plan []planItem) []byte {
	t.Helper()
	dir, _ := filepath.Abs("../consumer/testdata/agents-js")
	if _, err := os.Stat(filepath.Join(dir, "node_modules", "@livekit", "agents")); err != nil {
		t.Skipf("SKIPPING the JS-form fixtures: run `npm ci` in %s (needs node)", dir)
	}
	in, _ := json.Marshal(plan)
	cmd := exec.Command("node", "gen-history.mjs")
	cmd.Dir = dir
	cmd.Stdin = bytes.NewReader(in)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("gen-history.mjs: %v\n%s", err, stderr.Bytes())
	}
	return out
}

// fieldSet is the mix: name → turns and seed.
var fieldSet = []struct {
	name  string
	turns int
	seed  uint64
}{{"020a", 20, 1}, {"020b", 20, 2}, {"050", 50, 3}, {"100", 100, 4}, {"200", 200, 5}}

// TestFieldFixturesCurrent: the committed field mix is what the generators
// write (go test ./scenarios -run TestFieldFixturesCurrent -update-field).
func TestFieldFixturesCurrent(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: regenerates the field fixtures")
	}
	for _, sdk := range []string{"py", "js"} {
		for _, f := range fieldSet {
			name := fmt.Sprintf("load/field/%s_%s.json", sdk, f.name)
			plan := callPlan(f.turns, f.seed)
			var want []byte
			if sdk == "py" {
				want = pythonHistory(plan)
			} else {
				want = jsHistory(t, plan)
			}
			if *updateField {
				if err := os.WriteFile(name, want, 0o644); err != nil {
					t.Fatal(err)
				}
			}
			got, err := os.ReadFile(name)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got, want) {
				t.Errorf("%s is stale: go test ./scenarios -run TestFieldFixturesCurrent -update-field", name)
			}
		}
	}
}

// TestPyFloat: Python's repr of the numbers the SDK writes.
func TestPyFloat(t *testing.T) {
	for f, want := range map[float64]string{1764699269.087637: "1764699269.087637", 0.6231881753028994: "0.6231881753028994",
		3.0994415283203125e-05: "3.0994415283203125e-05", 0.0001: "0.0001", 2.0: "2.0", 1e16: "1e+16", 0.5: "0.5"} {
		if got := pyFloat(f); got != want {
			t.Errorf("pyFloat(%v) = %s, want %s", f, got, want)
		}
	}
}
