package settle

import (
	"slices"
	"time"

	"github.com/lkscore/lkscore/consumer/internal/facts"
)

// The due-time rule: when a session's facts are settled enough to publish
// its work (docs/facts.md, "Settling"). Settler.consider applies it.

// Complete reports whether nothing more is expected: the recording is
// stored, the job has ended, and a signal named the close reason outright
// (a summary, a span or a log record that names it). Anything less waits
// for the settle window, or for the room's (RoomFinished).
func Complete(f *facts.SessionFacts) bool {
	if f.Recording == nil || !f.JobEnded {
		return false
	}
	return facts.NamedOutright(facts.Resolve(f.Observations).CloseReasonSource)
}

// SpansOnly reports whether the session is to be scored from its spans and
// logs alone: no recording, spans kept under a job id, and no session report
// saying a recording follows (one that does keeps the session waiting for
// it, as a session without spans waits).
func SpansOnly(f *facts.SessionFacts) bool {
	return f.Recording == nil && len(f.Spans) > 0 && f.JobID != "" && f.JobID != facts.RoomKeyJob && RecordingExpected(f) != "true"
}

// RecordingExpected is what the session reports said: "true" when any said
// a recording follows, "false" when they said none does, "" when none said.
func RecordingExpected(f *facts.SessionFacts) string {
	out := ""
	for _, o := range f.Observations {
		if o.Field == facts.FieldRecordingExpected && out != "true" {
			out = o.Value
		}
	}
	return out
}

// RoomFinished reports whether the recording is stored and room_finished
// came: LiveKit has nothing more to say about the room, and the SDKs send
// their logs before the upload, so the settler waits only RoomSettle for
// signals still in flight (one room's webhooks are handled concurrently).
func RoomFinished(f *facts.SessionFacts) bool {
	return f.Recording != nil && slices.ContainsFunc(f.Observations, func(o facts.Observation) bool { return o.Field == facts.FieldRoomEnd })
}

// RoomEmptying reports whether the recording is stored, a participant of
// the room has left and room_finished has not come: the room's webhooks
// are flowing, and its end is on its way.
func RoomEmptying(f *facts.SessionFacts) bool {
	return f.Recording != nil && !RoomFinished(f) && slices.ContainsFunc(f.Observations, func(o facts.Observation) bool {
		return o.Field == facts.FieldDeparture
	})
}

// RoomSettle is how long a finished room's session waits after its last
// signal: enough for the room's other webhooks, handled in parallel, to land.
const RoomSettle = time.Second
