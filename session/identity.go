package session

// Identity names a session: its key (room id/job id, wire.ParseSessionKey),
// its room and job, and the agent that ran it. Its JSON is the scorecard's
// "session" object's first fields.
type Identity struct {
	Key       string `json:"key"`
	RoomID    string `json:"room_id"`
	RoomName  string `json:"room_name"`
	JobID     string `json:"job_id"`
	AgentName string `json:"agent_name"`
}

// Close is how a session ended: livekit.agent.CloseReason's proto name
// (CR_PARTICIPANT_DISCONNECTED, …), the signal it came from (summary,
// otlp_span, otlp_log, otlp_log_implied, job_status, webhook_room, absent)
// and what that signal said ("otlp_log: AgentSession closed
// reason=user_initiated"). docs/facts.md has the rules that pick it.
type Close struct {
	CloseReason         string `json:"close_reason"`
	CloseReasonSource   string `json:"close_reason_source"`
	CloseReasonEvidence string `json:"close_reason_evidence,omitempty"`
}
