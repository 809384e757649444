package recording

import (
	"encoding/json"
	"math"
	"strings"

	"github.com/livekit/protocol/livekit/agent"
)

// Close reason sources: where a session's close reason came from.
const (
	SourceSummary = "summary" // the session summary's close_reason
	SourceAbsent  = "absent"  // no summary, or no close reason in it
)

// sdkNames are the SDKs' lowercase strings for the proto close reasons
// (docs/formats.md, "Session summary and close reason"): what their logs and
// the OTel attribute lk.close_reason say.
var sdkNames = map[agent.CloseReason]string{
	agent.CloseReason_CR_ERROR:                    "error",
	agent.CloseReason_CR_JOB_SHUTDOWN:             "job_shutdown",
	agent.CloseReason_CR_PARTICIPANT_DISCONNECTED: "participant_disconnected",
	agent.CloseReason_CR_USER_INITIATED:           "user_initiated",
	agent.CloseReason_CR_COMPLETED:                "task_completed",
}

// sdkCloseReasons maps the SDK strings (and two aliases) to proto names.
// Not "CR_"+upper(s): that would produce the nonexistent CR_TASK_COMPLETED.
var sdkCloseReasons = func() map[string]agent.CloseReason {
	m := map[string]agent.CloseReason{"completed": agent.CloseReason_CR_COMPLETED, "unknown": agent.CloseReason_CR_UNKNOWN}
	for cr, s := range sdkNames {
		m[s] = cr
	}
	return m
}()

// SDKCloseReason is the SDK string for a proto close reason name ("unknown"
// for CR_UNKNOWN and anything else).
func SDKCloseReason(name string) string {
	if s, ok := sdkNames[agent.CloseReason(agent.CloseReason_value[name])]; ok {
		return s
	}
	return "unknown"
}

// NormalizeCloseReason maps a close_reason JSON value to a proto value name:
// proto names (and the legacy alias CR_TASK_COMPLETED), SDK strings, or
// numbers 0–5. It reports false when the value is not recognized; the result
// is then CR_UNKNOWN and the caller keeps the raw value.
func NormalizeCloseReason(raw json.RawMessage) (string, bool) {
	var s string
	if err := json.Unmarshal(raw, &s); err == nil {
		return NormalizeCloseReasonString(s)
	}
	var f float64
	if err := json.Unmarshal(raw, &f); err == nil && f == math.Trunc(f) && f >= 0 && f <= 5 {
		if name, ok := agent.CloseReason_name[int32(f)]; ok {
			return name, true
		}
	}
	return agent.CloseReason_CR_UNKNOWN.String(), false
}

// NormalizeCloseReasonString is NormalizeCloseReason for a string (an SDK
// log's reason, the lk.close_reason attribute).
func NormalizeCloseReasonString(s string) (string, bool) {
	t := strings.TrimSpace(s)
	if _, ok := agent.CloseReason_value[t]; ok {
		return t, true
	}
	u := strings.ToUpper(t)
	if u == "CR_TASK_COMPLETED" {
		return agent.CloseReason_CR_COMPLETED.String(), true
	}
	if _, ok := agent.CloseReason_value[u]; ok {
		return u, true
	}
	if cr, ok := sdkCloseReasons[strings.ToLower(t)]; ok {
		return cr.String(), true
	}
	return agent.CloseReason_CR_UNKNOWN.String(), false
}
