package facts

import (
	"strings"

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
