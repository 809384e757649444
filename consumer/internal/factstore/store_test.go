package factstore

import (
	"encoding/json"
	"fmt"
	"testing"
	"time"

	gojson "github.com/goccy/go-json"

	"github.com/lkscore/lkscore/consumer/internal/facts"
	"github.com/lkscore/lkscore/scoring"
)

// benchFacts is a session's facts entry as the bench's sessions leave it
// (an upload, the job's end, its recording's place), with 72 spans as the
// agents-js voice call of issue 23 sends.
func benchFacts() []byte {
	now := time.Date(2026, 12, 2, 10, 0, 0, 123456789, time.UTC)
	f := facts.SessionFacts{RoomID: "RM_bench0001", JobID: "AJ_bench0001", LastInputAt: now, JobEnded: true,
		Recording: &facts.RecordingRef{SessionKey: "RM_bench0001/AJ_bench0001", Dir: "RM_bench0001/AJ_bench0001/", Location: "file:///data/recordings/RM_bench0001/AJ_bench0001/"}}
	for i, field := range []string{"close_reason", "agent_name", "sdk", "job_status", "room_name", "recording_expected", "input"} {
		f.Observations = append(f.Observations, facts.Observation{Field: field, Value: fmt.Sprintf("value-%d", i), Source: "webhook_job",
			Evidence: "agent_job_ended status=JS_SUCCESS"})
	}
	e2e := 0.7869999408721924
	for i := range 72 {
		f.Spans = append(f.Spans, scoring.Span{ID: fmt.Sprintf("%016x", i), Parent: "0000000000000001", Name: "agent_turn",
			Start: 1796220029.626 + float64(i), End: 1796220030.9134934 + float64(i), E2ELatency: &e2e})
	}
	b, _ := json.Marshal(f)
	return b
}

// BenchmarkFactsDecode: the facts entry decoded by encoding/json and by
// goccy/go-json side by side (the daemon reads it several times a session).
func BenchmarkFactsDecode(b *testing.B) {
	data := benchFacts()
	for name, unmarshal := range map[string]func([]byte, any) error{"encoding_json": json.Unmarshal, "goccy": gojson.Unmarshal} {
		b.Run(name, func(b *testing.B) {
			b.SetBytes(int64(len(data)))
			b.ReportAllocs()
			for b.Loop() {
				var f facts.SessionFacts
				if err := unmarshal(data, &f); err != nil || len(f.Spans) != 72 {
					b.Fatal(err)
				}
			}
		})
	}
}
