package wire

// Headers on result messages (both results streams).
const (
	HeaderVerdict        = "Lk-Verdict"
	HeaderAgentName      = "Lk-Agent-Name"
	HeaderScoringVersion = "Lk-Scoring-Version"
	HeaderCloseReason    = "Lk-Close-Reason"
)

// Headers lkscore sets on stored webhook messages.
const (
	HeaderEvent      = "Lk-Event"
	HeaderAPIKey     = "Lk-Api-Key"
	HeaderSessionKey = "Lk-Session-Key"
	// HeaderSessions lists, comma-separated, the session keys a forwarded
	// SDK request concerned (an OTLP request may carry several).
	HeaderSessions = "Lk-Sessions"
	// HeaderMetadataVersion is the value of regression.version_metadata_key
	// in an agent_job_* event's job (else room) metadata, read at ingest
	// before the stored event loses its metadata: the only piece of
	// metadata a stored webhook keeps (docs/security.md).
	HeaderMetadataVersion = "Lk-Metadata-Version"
)

// HeaderDLQPrefix starts every header a dead letter adds (HeaderDLQ*).
const HeaderDLQPrefix = "Lk-Dlq-"

// Headers of a dead letter. The body is the original message's body.
const (
	HeaderDLQStage      = "Lk-Dlq-Stage"
	HeaderDLQError      = "Lk-Dlq-Error"
	HeaderDLQSubject    = "Lk-Dlq-Subject"
	HeaderDLQStream     = "Lk-Dlq-Stream"
	HeaderDLQSeq        = "Lk-Dlq-Seq"
	HeaderDLQDeliveries = "Lk-Dlq-Deliveries"
	HeaderDLQAt         = "Lk-Dlq-At"
	HeaderDLQMsgID      = "Lk-Dlq-Msg-Id"
	// HeaderReplayedFrom is set on a dead letter put back by
	// `lkscore dlq replay`: the dead letter's sequence.
	HeaderReplayedFrom = "Lk-Replayed-From"
)

// HeaderAlertStatus is an alert's status (AlertFiring, AlertResolved);
// alerts carry HeaderAgentName too.
const HeaderAlertStatus = "Lk-Alert-Status"
