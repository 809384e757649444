package decoders

import (
	"bytes"
	stdjson "encoding/json"
	"os"
	"testing"

	"github.com/bytedance/sonic"
	jsonv2 "github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"
	gojson "github.com/goccy/go-json"
	segjson "github.com/segmentio/encoding/json"
	"github.com/valyala/fastjson"

	"github.com/lkscore/lkscore/recording"
)

// item mirrors the fields recording reads from one chat item (both key styles).
type item struct {
	ID          string             `json:"id"`
	Type        string             `json:"type"`
	CreatedAt   *float64           `json:"created_at"`
	CreatedAC   *float64           `json:"createdAt"`
	Role        string             `json:"role"`
	Content     stdjson.RawMessage `json:"content"`
	Interrupted bool               `json:"interrupted"`
	TConf       *float64           `json:"transcript_confidence"`
	Metrics     struct {
		Started *float64 `json:"started_speaking_at"`
		Stopped *float64 `json:"stopped_speaking_at"`
		E2E     *float64 `json:"e2e_latency"`
		TTFT    *float64 `json:"llm_node_ttft"`
		TTFB    *float64 `json:"tts_node_ttfb"`
		EOT     *float64 `json:"end_of_turn_delay"`
		TD      *float64 `json:"transcription_delay"`
	} `json:"metrics"`
	CallID    string `json:"call_id"`
	CallIDC   string `json:"callId"`
	Name      string `json:"name"`
	Arguments string `json:"arguments"`
	Output    string `json:"output"`
	IsError   bool   `json:"is_error"`
	OldAgent  string `json:"old_agent_id"`
	NewAgent  string `json:"new_agent_id"`
}

type history struct {
	Items []item `json:"items"`
}

// fixtures are the field mix's histories (scenarios/load/field): each SDK's
// own form with full-precision numbers, 200 and 20 turns.
var fixtures = []string{"py_200", "js_200", "py_020a"}

// load reads a fixture and the number of items encoding/json finds in it.
func load(b *testing.B, name string) ([]byte, int) {
	data, err := os.ReadFile("../../scenarios/load/field/" + name + ".json")
	if err != nil {
		b.Fatal(err)
	}
	var h history
	if err := stdjson.Unmarshal(data, &h); err != nil {
		b.Fatal(err)
	}
	b.SetBytes(int64(len(data)))
	b.ReportAllocs()
	b.ResetTimer()
	return data, len(h.Items)
}

func check(b *testing.B, n, want int) {
	if n != want {
		b.Fatalf("%d items, want %d", n, want)
	}
}

// BenchmarkDecoders decodes each fixture with every candidate: lkscore's
// own scanner as lkscore score runs it (a recording.ChatDecoder whose memory
// is reused) and as one history is parsed alone, the general decoders into
// a struct of the fields lkscore reads, and fastjson (its parser reused)
// with those fields read and their numbers converted.
func BenchmarkDecoders(b *testing.B) {
	for _, name := range fixtures {
		b.Run(name, func(b *testing.B) { decoders(b, name) })
	}
}

func decoders(b *testing.B, name string) {
	b.Run("floor=json.Valid", func(b *testing.B) {
		data, _ := load(b, name)
		for b.Loop() {
			if !stdjson.Valid(data) {
				b.Fatal("invalid")
			}
		}
	})
	b.Run("lkscore=ChatDecoder", func(b *testing.B) {
		data, want := load(b, name)
		var d recording.ChatDecoder
		for b.Loop() {
			h, err := d.Decode(bytes.NewReader(data), recording.ChatLimits{})
			if err != nil {
				b.Fatal(err)
			}
			check(b, len(h.Items), want)
		}
	})
	b.Run("lkscore=ParseChatHistory", func(b *testing.B) {
		data, want := load(b, name)
		for b.Loop() {
			h, err := recording.ParseChatHistory(bytes.NewReader(data), recording.ChatLimits{})
			if err != nil {
				b.Fatal(err)
			}
			check(b, len(h.Items), want)
		}
	})
	unmarshal := map[string]func([]byte, any) error{
		"encoding/json.Unmarshal": stdjson.Unmarshal,
		"goccy/go-json":           gojson.Unmarshal,
		"segmentio/encoding":      segjson.Unmarshal,
		"bytedance/sonic":         sonic.Unmarshal,
		"go-json-experiment/json (v2)": func(b []byte, v any) error {
			return jsonv2.Unmarshal(b, v, jsonv2.MatchCaseInsensitiveNames(true))
		},
	}
	for _, dec := range []string{"encoding/json.Unmarshal", "goccy/go-json", "segmentio/encoding", "bytedance/sonic", "go-json-experiment/json (v2)"} {
		f := unmarshal[dec]
		b.Run(dec, func(b *testing.B) {
			data, want := load(b, name)
			for b.Loop() {
				var h history
				if err := f(data, &h); err != nil {
					b.Fatal(err)
				}
				check(b, len(h.Items), want)
			}
		})
	}
	b.Run("valyala/fastjson", func(b *testing.B) {
		data, want := load(b, name)
		var p fastjson.Parser
		for b.Loop() {
			v, err := p.ParseBytes(data)
			if err != nil {
				b.Fatal(err)
			}
			out := fastItems(v.GetArray("items"))
			check(b, len(out), want)
		}
	})
	b.Run("jsontext.Decoder(tokens only)", func(b *testing.B) {
		data, _ := load(b, name)
		for b.Loop() {
			d := jsontext.NewDecoder(bytes.NewReader(data))
			n := 0
			for {
				_, err := d.ReadToken()
				if err != nil {
					break
				}
				n++
			}
			if n < 100 {
				b.Fatal(n)
			}
		}
	})
}

// fastItems reads the fields lkscore reads from fastjson's values,
// converting the numbers it measures.
func fastItems(arr []*fastjson.Value) []item {
	out := make([]item, 0, len(arr))
	num := func(v *fastjson.Value) *float64 { f := v.GetFloat64(); return &f }
	for _, iv := range arr {
		var it item
		iv.GetObject().Visit(func(k []byte, v *fastjson.Value) {
			switch string(k) {
			case "id":
				it.ID = string(v.GetStringBytes())
			case "type":
				it.Type = string(v.GetStringBytes())
			case "created_at":
				it.CreatedAt = num(v)
			case "role":
				it.Role = string(v.GetStringBytes())
			case "transcript_confidence":
				it.TConf = num(v)
			case "content":
				for _, c := range v.GetArray() {
					_ = string(c.GetStringBytes())
				}
			case "call_id":
				it.CallID = string(v.GetStringBytes())
			case "name":
				it.Name = string(v.GetStringBytes())
			case "arguments":
				it.Arguments = string(v.GetStringBytes())
			case "output":
				it.Output = string(v.GetStringBytes())
			case "metrics":
				v.GetObject().Visit(func(k []byte, v *fastjson.Value) {
					switch string(k) {
					case "e2e_latency":
						it.Metrics.E2E = num(v)
					case "started_speaking_at":
						it.Metrics.Started = num(v)
					case "stopped_speaking_at":
						it.Metrics.Stopped = num(v)
					case "llm_node_ttft":
						it.Metrics.TTFT = num(v)
					case "tts_node_ttfb":
						it.Metrics.TTFB = num(v)
					case "end_of_turn_delay":
						it.Metrics.EOT = num(v)
					case "transcription_delay":
						it.Metrics.TD = num(v)
					}
				})
			}
		})
		out = append(out, it)
	}
	return out
}
