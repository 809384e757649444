package recording

import (
	"strings"
	"testing"

	"github.com/livekit/protocol/livekit/agent"
)

func TestCloseReasonNormalization(t *testing.T) {
	tests := []struct {
		summary, want, source, raw string
	}{
		{`{"close_reason":"CR_PARTICIPANT_DISCONNECTED"}`, "CR_PARTICIPANT_DISCONNECTED", SourceSummary, ""},
		{`{"close_reason":"CR_COMPLETED"}`, "CR_COMPLETED", SourceSummary, ""},
		{`{"close_reason":"CR_TASK_COMPLETED"}`, "CR_COMPLETED", SourceSummary, ""},
		{`{"close_reason":"task_completed"}`, "CR_COMPLETED", SourceSummary, ""},
		{`{"close_reason":"participant_disconnected"}`, "CR_PARTICIPANT_DISCONNECTED", SourceSummary, ""},
		{`{"close_reason":"error","error":"llm failed"}`, "CR_ERROR", SourceSummary, ""},
		{`{"close_reason":"job_shutdown"}`, "CR_JOB_SHUTDOWN", SourceSummary, ""},
		{`{"close_reason":"user_initiated"}`, "CR_USER_INITIATED", SourceSummary, ""},
		{`{"close_reason":1}`, "CR_ERROR", SourceSummary, ""},
		{`{"close_reason":5}`, "CR_COMPLETED", SourceSummary, ""},
		{`{"close_reason":0}`, "CR_UNKNOWN", SourceSummary, ""},
		{`{"closeReason":"CR_USER_INITIATED"}`, "CR_USER_INITIATED", SourceSummary, ""},
		{`{"reason":"job_shutdown"}`, "CR_JOB_SHUTDOWN", SourceSummary, ""},
		{`{"close_reason":"my_custom_shutdown"}`, "CR_UNKNOWN", SourceSummary, `"my_custom_shutdown"`},
		{`{"close_reason":6}`, "CR_UNKNOWN", SourceSummary, `6`},
		{`{"close_reason":2.5}`, "CR_UNKNOWN", SourceSummary, `2.5`},
		{`{"close_reason":{"a":1}}`, "CR_UNKNOWN", SourceSummary, `{"a":1}`},
		{`{"close_reason":null}`, "CR_UNKNOWN", SourceAbsent, ""},
		{`{"duration_ms":1000}`, "CR_UNKNOWN", SourceAbsent, ""},
		{``, "CR_UNKNOWN", SourceAbsent, ""},
	}
	for _, tc := range tests {
		t.Run(tc.summary, func(t *testing.T) {
			s, _ := ParseSummary(tc.summary)
			if s.CloseReason != tc.want || s.CloseReasonSource != tc.source || string(s.CloseReasonRaw) != tc.raw {
				t.Fatalf("got %s from %s (raw %s), want %s from %s (raw %s)", s.CloseReason, s.CloseReasonSource, s.CloseReasonRaw, tc.want, tc.source, tc.raw)
			}
			if _, ok := agent.CloseReason_value[s.CloseReason]; !ok {
				t.Fatalf("%s is not a proto name", s.CloseReason)
			}
		})
	}
}

func TestSummaryProblems(t *testing.T) {
	pad := `{"close_reason":"CR_ERROR","pad":"` + strings.Repeat("x", MaxSummaryBytes) + `"}`
	tests := []struct {
		name, in, code string
	}{
		{"16 KiB + 1", pad[:0] + `{"close_reason":"CR_ERROR","pad":"` + strings.Repeat("x", MaxSummaryBytes+1-len(`{"close_reason":"CR_ERROR","pad":""}`)) + `"}`, "summary_too_large"},
		{"much too large", pad, "summary_too_large"},
		{"array", `["CR_ERROR"]`, "summary_not_object"},
		{"null", `null`, "summary_not_object"},
		{"invalid JSON", `{"close_reason": CR_ERROR}`, "summary_invalid_json"},
		{"unknown reason", `{"close_reason":"exploded"}`, "close_reason_unrecognized"},
		{"no reason", `{"sdk":"python"}`, "close_reason_missing"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s, problems := ParseSummary(tc.in)
			if len(problems) != 1 || problems[0].Code != tc.code || problems[0].Part != PartSummary {
				t.Fatalf("problems %+v, want one %s", problems, tc.code)
			}
			if s.CloseReason != "CR_UNKNOWN" {
				t.Fatalf("close reason %s", s.CloseReason)
			}
			if s.Raw != tc.in || !s.Present {
				t.Fatal("raw summary not kept")
			}
		})
	}
	exact := `{"close_reason":"CR_ERROR","pad":"` + strings.Repeat("x", MaxSummaryBytes-len(`{"close_reason":"CR_ERROR","pad":""}`)) + `"}`
	if s, p := ParseSummary(exact); len(exact) != MaxSummaryBytes || len(p) != 0 || s.CloseReason != "CR_ERROR" {
		t.Fatalf("exactly 16 KiB: %d bytes, problems %+v", len(exact), p)
	}
}

func TestUnixSeconds(t *testing.T) {
	for in, want := range map[float64]float64{
		1764417600.5:        1764417600.5,
		1764417600500:       1764417600.5,
		1764417600500000:    1764417600.5,
		1764417600500000000: 1764417600.5,
		0:                   0,
	} {
		if got := UnixSeconds(in); got != want {
			t.Errorf("UnixSeconds(%v) = %v, want %v", in, got, want)
		}
	}
}

func FuzzParseSummary(f *testing.F) {
	f.Add(`{"close_reason":"CR_PARTICIPANT_DISCONNECTED","started_at":1764417600.12,"counts":{"user_turns":9}}`)
	f.Add(`{"closeReason":3}`)
	f.Add(`[]`)
	f.Add(`{"close_reason":1e999}`)
	f.Fuzz(func(t *testing.T, in string) {
		s, problems := ParseSummary(in)
		if _, ok := agent.CloseReason_value[s.CloseReason]; !ok {
			t.Fatalf("close reason %q is not a proto name", s.CloseReason)
		}
		if s.CloseReasonSource != SourceSummary && s.CloseReasonSource != SourceAbsent {
			t.Fatalf("source %q", s.CloseReasonSource)
		}
		if in != "" && s.CloseReason == "CR_UNKNOWN" && len(problems) == 0 && string(s.CloseReasonRaw) != "0" && !strings.Contains(in, "CR_UNKNOWN") {
			// A CR_UNKNOWN must always be explained, unless the input said so.
			var explained bool
			for _, raw := range []string{"0", `"unknown"`, `"CR_UNKNOWN"`} {
				explained = explained || strings.Contains(in, raw)
			}
			if !explained {
				t.Fatalf("silent CR_UNKNOWN for %q", in)
			}
		}
	})
}
