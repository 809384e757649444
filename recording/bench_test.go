package recording

import (
	"bytes"
	"encoding/json"
	"os"
	"testing"
)

// BenchmarkChatHistory200Turns and BenchmarkJSONValid200Turns run side by
// side on the same bytes: json.Valid is the floor for any decoder.
func BenchmarkChatHistory200Turns(b *testing.B) {
	data := realisticHistory(200)
	b.SetBytes(int64(len(data)))
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		h, err := ParseChatHistory(bytes.NewReader(data), ChatLimits{})
		if err != nil || len(h.Items) < 400 {
			b.Fatal(err)
		}
	}
}

func BenchmarkJSONValid200Turns(b *testing.B) {
	data := realisticHistory(200)
	b.SetBytes(int64(len(data)))
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if !json.Valid(data) {
			b.Fatal("invalid")
		}
	}
}

// fieldDir holds the field mix (scenarios/field.go): both SDKs' forms with
// their full-precision numbers, 20 to 200 turns.
const fieldDir = "../scenarios/load/field/"

// BenchmarkFieldHistory decodes the field mix's 200-turn histories, each
// beside json.Valid on the same bytes (the floor for any decoder).
func BenchmarkFieldHistory(b *testing.B) {
	for _, name := range []string{"py_200", "js_200"} {
		data, err := os.ReadFile(fieldDir + name + ".json")
		if err != nil {
			b.Fatal(err)
		}
		b.Run(name+"/parse", func(b *testing.B) {
			b.SetBytes(int64(len(data)))
			b.ReportAllocs()
			for b.Loop() {
				h, err := ParseChatHistoryBytes(data, ChatLimits{})
				if err != nil || len(h.Items) < 400 {
					b.Fatal(err)
				}
			}
		})
		b.Run(name+"/decoder", func(b *testing.B) { // one ChatDecoder's memory reused, as lkscore score does
			var d ChatDecoder
			b.SetBytes(int64(len(data)))
			b.ReportAllocs()
			for b.Loop() {
				h, err := d.Decode(bytes.NewReader(data), ChatLimits{})
				if err != nil || len(h.Items) < 400 {
					b.Fatal(err)
				}
			}
		})
		b.Run(name+"/goccy", func(b *testing.B) { // the fast path before the scanner
			b.SetBytes(int64(len(data)))
			b.ReportAllocs()
			for b.Loop() {
				if h, ok := goccyChat(data, ChatLimits{}.withDefaults()); !ok || len(h.Items) < 400 {
					b.Fatal("declined")
				}
			}
		})
		b.Run(name+"/valid", func(b *testing.B) {
			b.SetBytes(int64(len(data)))
			for b.Loop() {
				if !json.Valid(data) {
					b.Fatal("invalid")
				}
			}
		})
	}
}
