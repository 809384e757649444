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
		PB      *float64 `json:"playback_latency"`
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

func load(b *testing.B) []byte {
	data, err := os.ReadFile("../../scenarios/load/history_200turns.json")
	if err != nil {
		b.Fatal(err)
	}
	b.SetBytes(int64(len(data)))
	b.ReportAllocs()
	b.ResetTimer()
	return data
}

func check(b *testing.B, n int) {
	if n != 505 {
		b.Fatalf("%d items", n)
	}
}

func BenchmarkDecoders(b *testing.B) {
	b.Run("floor=json.Valid", func(b *testing.B) {
		data := load(b)
		for i := 0; i < b.N; i++ {
			if !stdjson.Valid(data) {
				b.Fatal("invalid")
			}
		}
	})
	b.Run("lkscore=recording.ParseChatHistory", func(b *testing.B) {
		data := load(b)
		for i := 0; i < b.N; i++ {
			h, err := recording.ParseChatHistory(bytes.NewReader(data), recording.ChatLimits{})
			if err != nil {
				b.Fatal(err)
			}
			check(b, len(h.Items))
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
	for _, name := range []string{"encoding/json.Unmarshal", "goccy/go-json", "segmentio/encoding", "bytedance/sonic", "go-json-experiment/json (v2)"} {
		f := unmarshal[name]
		b.Run(name, func(b *testing.B) {
			data := load(b)
			for i := 0; i < b.N; i++ {
				var h history
				if err := f(data, &h); err != nil {
					b.Fatal(err)
				}
				check(b, len(h.Items))
			}
		})
	}
	b.Run("valyala/fastjson", func(b *testing.B) {
		data := load(b)
		var p fastjson.Parser
		for i := 0; i < b.N; i++ {
			v, err := p.ParseBytes(data)
			if err != nil {
				b.Fatal(err)
			}
			arr := v.GetArray("items")
			out := make([]item, 0, len(arr))
			for _, iv := range arr {
				var it item
				iv.GetObject().Visit(func(k []byte, v *fastjson.Value) {
					switch string(k) {
					case "id":
						it.ID = string(v.GetStringBytes())
					case "type":
						it.Type = string(v.GetStringBytes())
					case "created_at":
						f := v.GetFloat64()
						it.CreatedAt = &f
					case "role":
						it.Role = string(v.GetStringBytes())
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
							f := v.GetFloat64()
							switch string(k) {
							case "e2e_latency":
								it.Metrics.E2E = &f
							case "started_speaking_at":
								it.Metrics.Started = &f
							}
						})
					}
				})
				out = append(out, it)
			}
			check(b, len(out))
		}
	})
	b.Run("jsontext.Decoder(tokens only)", func(b *testing.B) {
		data := load(b)
		for i := 0; i < b.N; i++ {
			d := jsontext.NewDecoder(bytes.NewReader(data))
			n := 0
			for {
				_, err := d.ReadToken()
				if err != nil {
					break
				}
				n++
			}
			if n < 1000 {
				b.Fatal(n)
			}
		}
	})
}
