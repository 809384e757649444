package wire

import (
	"cmp"
	"strings"
	"time"

	"github.com/lkscore/lkscore/scoring"
)

// Session facts: what every signal said about one session (the recording
// header, webhooks, OTLP logs and spans), kept as a set of observations with
// their provenance in the KV bucket Subjects.SessionFacts under FactsKey.
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
