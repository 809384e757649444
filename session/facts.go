package session

// Facts are a session's facts beyond the recording, each from its best
// source (Provenance names it per field).
type Facts struct {
	SDKLanguage  string `json:"sdk_language,omitempty"`
	SDKVersion   string `json:"sdk_version,omitempty"`
	DeploymentID string `json:"deployment_id,omitempty"`
	CloudAgentID string `json:"cloud_agent_id,omitempty"`
	// APIKey is the LiveKit API key that signed the session's signals: its
	// project, when a deployment takes several projects' keys.
	APIKey           string   `json:"api_key,omitempty"`
	Simulated        bool     `json:"simulated,omitempty"`
	RedactionEnabled bool     `json:"redaction_enabled,omitempty"`
	Tags             []string `json:"tags,omitempty"`
	Outcome          string   `json:"outcome,omitempty"`
	JobStatus        string   `json:"job_status,omitempty"`
	// JobError is agent_job_ended's state.error, e.g. "agent worker left
	// the room" (a normal departure) or a crashed job's message.
	JobError string `json:"job_error,omitempty"`
	// RoomName is the room's name, from any webhook or the SDK's logs.
	RoomName string `json:"room_name,omitempty"`
	// ErrorText is the SDK's own error message for an error close (its
	// "AgentSession closed" or "unrecoverable error" log record).
	ErrorText string `json:"error_text,omitempty"`
	// EndedBy is who left the room first: caller or agent (room webhooks).
	EndedBy string `json:"ended_by,omitempty"`
	// RoomEndReason is room_finished's end reason, e.g. ROOM_END_API_DELETE.
	RoomEndReason string `json:"room_end_reason,omitempty"`
	// Departures are the participants' departures in order (room webhooks).
	Departures []Departure `json:"departures,omitempty"`
	// Usage is the SDK's session report's usage, per provider and model;
	// UsageReported says a report listed it (an empty list included).
	Usage         []ModelUsage      `json:"usage,omitempty"`
	UsageReported bool              `json:"usage_reported,omitempty"`
	Provenance    map[string]string `json:"provenance,omitempty"`
}

// Departure is one participant leaving the room.
type Departure struct {
	Role   string `json:"role"`   // caller or agent
	Reason string `json:"reason"` // LiveKit's DisconnectReason, or CONNECTION_ABORTED
}
