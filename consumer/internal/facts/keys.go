package facts

import (
	"strings"

	"github.com/livekit/protocol/livekit"

	"github.com/lkscore/lkscore/wire"
)

// Keys of the session facts bucket (Subjects.SessionFacts).

// RoomKeyJob is the job part of a room's own facts entry, which holds what
// the room's webhooks said and lists the room's sessions.
const RoomKeyJob = "_room"

// Key is a session's entry: "<room_id>.<job_id>", each a Token; an
// upload without a job id is "<room_id>._".
func Key(roomID, jobID string) string {
	if jobID == "" {
		jobID = "_"
	}
	return wire.Token(roomID) + "." + wire.Token(jobID)
}

// RoomKey is a room's own entry.
func RoomKey(roomID string) string { return wire.Token(roomID) + "." + RoomKeyJob }

// IsRoomKey reports whether key is a room's own entry.
func IsRoomKey(key string) bool { return strings.HasSuffix(key, "."+RoomKeyJob) }

// RoomFilter matches every entry of a room, its own included.
func RoomFilter(roomID string) string { return wire.Token(roomID) + ".*" }

// CheckEvent checks every id and name of a webhook event that a key, a
// subject or a path is made of against the one id rule (wire.CheckID,
// wire.CheckName), and names the first field out of it. Ingest refuses
// such an event with 400; the locator dead-letters one an older lkscore
// stored.
func CheckEvent(ev *livekit.WebhookEvent) error {
	if err := wire.CheckID("id", ev.GetId()); err != nil {
		return err
	}
	job := ev.GetJob()
	ids := []struct{ field, id string }{
		{"room.sid", ev.GetRoom().GetSid()},
		{"job.id", job.GetId()},
		{"job.room.sid", job.GetRoom().GetSid()},
		{"participant.sid", ev.GetParticipant().GetSid()},
		{"egress_info.egress_id", ev.GetEgressInfo().GetEgressId()},
		{"egress_info.room_id", ev.GetEgressInfo().GetRoomId()},
	}
	for _, f := range ids {
		if err := wire.CheckOptionalID(f.field, f.id); err != nil {
			return err
		}
	}
	return wire.CheckName("job.agent_name", job.GetAgentName())
}

// CheckSession checks a session's room id and, when it has one, its job
// id: field names where they came from ("header", "OTLP attribute", …).
func CheckSession(where, roomID, jobID string) error {
	if err := wire.CheckID(where+" room_id", roomID); err != nil {
		return err
	}
	return wire.CheckOptionalID(where+" job_id", jobID)
}

// InternalKeyPrefix begins the facts bucket's keys that hold lkscore's own
// state, not a session: the settlers' low-water mark, the retention
// sweep's last run. No session's key begins with it: the id rule refuses
// ids that begin with wire.ReservedIDPrefix.
const InternalKeyPrefix = wire.ReservedIDPrefix + "."

// IsInternalKey reports a key of lkscore's own state (InternalKeyPrefix).
func IsInternalKey(key string) bool { return strings.HasPrefix(key, InternalKeyPrefix) }
