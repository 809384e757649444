package wire

import (
	"time"

	"github.com/lkscore/lkscore/scoring"
)

// Problem is something wrong with a session that does not stop it from
// being parsed (and scored): it is recorded and reported. The recording
// parsers report it (recording.Problem is this type).
type Problem struct {
	Part    string `json:"part"`
	Code    string `json:"code"`
	Item    int    `json:"item,omitempty"`
	Message string `json:"message"`
}

// RecordingRef says where a session's recording is: the locator found it.
type RecordingRef struct {
	SessionKey string `json:"session_key"`
	RoomName   string `json:"room_name,omitempty"`
	// Dir is the store key prefix of a directory-layout upload ("RM_x/AJ_y/").
	Dir string `json:"dir,omitempty"`
	// Object is the key of a raw multipart upload object, instead of Dir;
	// Bucket names its S3 bucket when it is not the store's own.
	Object string `json:"object,omitempty"`
	Bucket string `json:"bucket,omitempty"`
	// Location points back at the recording (file://…, s3://…) for the scorecard.
	Location string    `json:"location"`
	Origin   string    `json:"origin"` // upload, agent_job_ended, room_finished, egress_ended, sweep, spans
	Problems []Problem `json:"problems,omitempty"`
}

// WorkItem is one session's work on lkscore.session.<CLOSE_REASON>: where
// its recording is and what the locator learned, never the recording itself.
// The recording's reference is embedded: its fields are the item's own in
// JSON.
type WorkItem struct {
	RecordingRef
	RoomID            string `json:"room_id"`
	JobID             string `json:"job_id,omitempty"`
	AgentName         string `json:"agent_name,omitempty"`
	CloseReason       string `json:"close_reason"`
	CloseReasonSource string `json:"close_reason_source"`
	// MetadataOnly is set for a session scored from its spans and logs: it
	// uploaded no recording (Dir and Object are empty).
	MetadataOnly bool      `json:"metadata_only,omitempty"`
	LocatedAt    time.Time `json:"located_at"`
	// Facts are the session's settled facts, each from its best source.
	Facts *Resolved `json:"facts,omitempty"`
}

// Resolved are the facts as scored: each field from its best source. The
// scoring model's Facts are embedded, so the worker hands them on as they are.
type Resolved struct {
	CloseReason         string `json:"close_reason"`
	CloseReasonSource   string `json:"close_reason_source"`
	CloseReasonEvidence string `json:"close_reason_evidence,omitempty"`
	AgentName           string `json:"agent_name,omitempty"`
	// Inputs are the signals beyond the recording that said something
	// (scoring.InputTraces, scoring.InputLogs), sorted.
	Inputs []string `json:"inputs,omitempty"`
	// RecordingExpected is the session report's word: "true", "false", or
	// "" when no report said.
	RecordingExpected string `json:"recording_expected,omitempty"`
	// Spans are the session's spans, as the facts entry keeps them.
	Spans []scoring.Span `json:"spans,omitempty"`
	scoring.Facts
}

// UploadNotice is the message published on Subjects.UploadStored once an
// upload is committed to the recording store.
type UploadNotice struct {
	SessionKey string                  `json:"session_key"`
	RoomID     string                  `json:"room_id"`
	JobID      string                  `json:"job_id,omitempty"`
	Dir        string                  `json:"dir"`      // store key prefix of the objects
	Location   string                  `json:"location"` // Dir as a URL (file:// or s3://)
	Objects    map[string]ObjectDigest `json:"objects"`
	APIKey     string                  `json:"api_key"`
	ReceivedAt time.Time               `json:"received_at"`
	// Store is the identity of the store the upload is in (store.Identity):
	// a worker that reads another store dead-letters it (store_not_shared).
	Store string `json:"store,omitempty"`
}

// ObjectDigest describes one stored object.
type ObjectDigest struct {
	Size   int64  `json:"size"`
	SHA256 string `json:"sha256"`
}
