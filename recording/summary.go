package recording

import (
	"bytes"
	"encoding/json"
	"fmt"
	"sort"

	"github.com/livekit/protocol/livekit/agent"
)

// MaxSummaryBytes is the documented cap on session_summary (livekit_metrics.proto).
const MaxSummaryBytes = 16 << 10

// Summary is the typed view of MetricsRecordingHeader.session_summary. Its
// key set is not public (docs/formats.md, "Session summary and close reason"), so parsing is tolerant: known keys
// are typed, every key may be missing, unknown keys are listed in Keys.
type Summary struct {
	// Present is true when the header carried a non-empty summary.
	Present bool `json:"present"`
	// Valid is true when the summary is a JSON object within MaxSummaryBytes.
	Valid bool `json:"valid"`
	// CloseReason is the normalized proto value name (CR_UNKNOWN when unknown or absent).
	CloseReason string `json:"close_reason"`
	// CloseReasonSource is SourceSummary or SourceAbsent.
	CloseReasonSource string `json:"close_reason_source"`
	// CloseReasonRaw is the value as found, when it was not recognized.
	CloseReasonRaw json.RawMessage `json:"close_reason_raw,omitempty"`
	Error          string          `json:"error,omitempty"`
	// StartedAt and EndedAt are Unix seconds (milliseconds on input are converted).
	StartedAt  float64          `json:"started_at,omitempty"`
	EndedAt    float64          `json:"ended_at,omitempty"`
	DurationMs float64          `json:"duration_ms,omitempty"`
	SDK        string           `json:"sdk,omitempty"`
	SDKVersion string           `json:"sdk_version,omitempty"`
	Counts     map[string]int64 `json:"counts,omitempty"`
	// Keys are the top-level keys present, sorted.
	Keys []string `json:"keys,omitempty"`
	// Raw is the summary verbatim.
	Raw string `json:"-"`
}

// ParseSummary parses a session summary. It never fails: anything wrong is
// returned as a Problem, and the close reason is then CR_UNKNOWN with its
// source saying why — never a silent CR_UNKNOWN.
func ParseSummary(raw string) (Summary, []Problem) {
	s := Summary{Raw: raw, CloseReason: agent.CloseReason_CR_UNKNOWN.String(), CloseReasonSource: SourceAbsent}
	if raw == "" {
		return s, nil
	}
	s.Present = true
	if len(raw) > MaxSummaryBytes {
		return s, []Problem{{Part: PartSummary, Code: "summary_too_large",
			Message: fmt.Sprintf("session_summary is %d bytes, over the %d-byte limit; close reason not read", len(raw), MaxSummaryBytes)}}
	}
	var obj map[string]json.RawMessage
	if err := json.Unmarshal([]byte(raw), &obj); err != nil || obj == nil {
		code, msg := "summary_invalid_json", fmt.Sprintf("session_summary is not valid JSON: %v", err)
		if err == nil || json.Valid([]byte(raw)) {
			code, msg = "summary_not_object", "session_summary is JSON but not an object"
		}
		return s, []Problem{{Part: PartSummary, Code: code, Message: msg}}
	}
	s.Valid = true
	var problems []Problem
	for k := range obj {
		s.Keys = append(s.Keys, k)
	}
	sort.Strings(s.Keys)

	for _, key := range []string{"close_reason", "closeReason", "reason"} {
		v, ok := obj[key]
		if !ok || bytes.Equal(v, []byte("null")) {
			continue
		}
		s.CloseReasonSource = SourceSummary
		name, known := NormalizeCloseReason(v)
		s.CloseReason = name
		if !known {
			s.CloseReasonRaw = v
			problems = append(problems, Problem{Part: PartSummary, Code: "close_reason_unrecognized",
				Message: fmt.Sprintf("%s %s is not a known close reason; using CR_UNKNOWN", key, truncate(string(v), 80))})
		}
		break
	}
	if s.CloseReasonSource == SourceAbsent {
		problems = append(problems, Problem{Part: PartSummary, Code: "close_reason_missing",
			Message: "session_summary has no close_reason"})
	}
	s.Error = stringField(obj, "error")
	s.SDK = stringField(obj, "sdk")
	s.SDKVersion = stringField(obj, "sdk_version", "sdkVersion")
	if v, ok := numberField(obj, "started_at", "startedAt"); ok {
		s.StartedAt = UnixSeconds(v)
	}
	if v, ok := numberField(obj, "ended_at", "endedAt"); ok {
		s.EndedAt = UnixSeconds(v)
	}
	if v, ok := numberField(obj, "duration_ms", "durationMs"); ok {
		s.DurationMs = v
	}
	if c, ok := obj["counts"]; ok {
		var counts map[string]json.Number
		if json.Unmarshal(c, &counts) == nil {
			s.Counts = map[string]int64{}
			for k, n := range counts {
				if i, err := n.Int64(); err == nil {
					s.Counts[k] = i
				}
			}
		}
	}
	return s, problems
}

func stringField(obj map[string]json.RawMessage, keys ...string) string {
	for _, k := range keys {
		var s string
		if v, ok := obj[k]; ok && json.Unmarshal(v, &s) == nil {
			return s
		}
	}
	return ""
}

func numberField(obj map[string]json.RawMessage, keys ...string) (float64, bool) {
	for _, k := range keys {
		var f float64
		if v, ok := obj[k]; ok && json.Unmarshal(v, &f) == nil {
			return f, true
		}
	}
	return 0, false
}

// UnixSeconds converts a Unix timestamp given in seconds, milliseconds,
// microseconds or nanoseconds to seconds, telling them apart by magnitude:
// 1e11 s is the year 5138, 1e11 ms is 1973, so any real session is unambiguous.
func UnixSeconds(v float64) float64 {
	switch {
	case v >= 1e17:
		return v / 1e9
	case v >= 1e14:
		return v / 1e6
	case v >= 1e11:
		return v / 1e3
	}
	return v
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}
