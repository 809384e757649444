package facts

import (
	"cmp"
	"strings"
	"time"

	"github.com/lkscore/lkscore/recording"
	"github.com/lkscore/lkscore/scoring"
	"github.com/lkscore/lkscore/session"
)

// Session facts: what every signal said about one session (the recording
// header, webhooks, OTLP logs and spans), kept as a set of observations with
// their provenance in the KV bucket Subjects.SessionFacts under Key.
// docs/facts.md has the rules that resolve them.

// Observation is one fact one signal gave.
type Observation struct {
	Field    string `json:"field"`
	Value    string `json:"value"`
	Source   string `json:"source"`
	Evidence string `json:"evidence,omitempty"`
}

// Compare orders observations by field, source, value and evidence: the
// order a facts entry keeps them in.
func (o Observation) Compare(p Observation) int {
	return cmp.Or(strings.Compare(o.Field, p.Field), strings.Compare(o.Source, p.Source),
		strings.Compare(o.Value, p.Value), strings.Compare(o.Evidence, p.Evidence))
}

// SessionFacts is one entry of the session facts bucket.
type SessionFacts struct {
	RoomID       string        `json:"room_id"`
	JobID        string        `json:"job_id,omitempty"`
	Observations []Observation `json:"observations"`
	Recording    *RecordingRef `json:"recording,omitempty"`
	JobEnded     bool          `json:"job_ended,omitempty"`
	// LastInputAt is when a signal last added something; the settle
	// window counts from it.
	LastInputAt time.Time `json:"last_input_at"`
	// PublishedAt is set once the session's work was published.
	PublishedAt *time.Time `json:"published_at,omitempty"`
	// ContentDroppedAt is set when privacy.mode metadata_only removed the
	// chat history and audio from the store after scoring.
	ContentDroppedAt *time.Time `json:"content_dropped_at,omitempty"`
	// RoomJoined is set once the session is listed in its room's entry and
	// holds what the room's webhooks said before.
	RoomJoined bool `json:"room_joined,omitempty"`
	// Sessions are, in a room's own entry, the session keys of the room.
	Sessions []string `json:"sessions,omitempty"`
	// Spans are the session's voice-pipeline spans, a bounded number,
	// sorted by (start, id).
	Spans []scoring.Span `json:"spans,omitempty"`
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
	Location string              `json:"location"`
	Origin   string              `json:"origin"` // upload, agent_job_ended, room_finished, egress_ended, sweep, spans
	Problems []recording.Problem `json:"problems,omitempty"`
}

// Resolved are the facts as scored: each field from its best source. The
// scoring model's Facts are embedded, so the worker hands them on as they are.
type Resolved struct {
	session.Close
	AgentName string `json:"agent_name,omitempty"`
	// Inputs are the signals beyond the recording that said something
	// (session.InputTraces, session.InputLogs), sorted.
	Inputs []string `json:"inputs,omitempty"`
	// RecordingExpected is the session report's word: "true", "false", or
	// "" when no report said.
	RecordingExpected string `json:"recording_expected,omitempty"`
	// Spans are the session's spans, as the facts entry keeps them.
	Spans []scoring.Span `json:"spans,omitempty"`
	session.Facts
}
