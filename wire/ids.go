package wire

import (
	"fmt"
	"strings"
	"unicode/utf8"
)

// The one id rule (docs/security.md, "Ids"). The ids a key, a subject or a
// path is made of (room, job, egress, participant and event ids) are 1 to
// MaxIDLen bytes of letters, digits, '_' and '-'. LiveKit's own are a
// prefix and 12 such characters (RM_…, AJ_…, EG_…, PA_…, EV_…). Names that
// become a subject token (agent names, AgentToken) are at most MaxNameLen
// bytes of UTF-8 without control characters. Ingest checks every id and
// name where it enters and refuses what breaks the rule; the stages check
// again before they build a key from a stored message and dead-letter it.
const (
	MaxIDLen   = 128
	MaxNameLen = 256
)

// IDError is an id or name out of the rule: which field, and why.
type IDError struct {
	Field  string // e.g. "job.room.sid", "room_id", "header room_id"
	Reason string // e.g. "4203 bytes, over 128"
}

func (e *IDError) Error() string {
	return fmt.Sprintf("%s: invalid id (%s; ids are 1-%d of A-Z a-z 0-9 _ -)", e.Field, e.Reason, MaxIDLen)
}

// CheckID checks id, the value of field, against the id rule.
func CheckID(field, id string) error {
	if id == "" {
		return &IDError{Field: field, Reason: "empty"}
	}
	if len(id) > MaxIDLen {
		return &IDError{Field: field, Reason: fmt.Sprintf("%d bytes, over %d", len(id), MaxIDLen)}
	}
	for i := 0; i < len(id); i++ {
		if c := id[i]; c != '_' && !tokenByte(rune(c)) {
			return &IDError{Field: field, Reason: fmt.Sprintf("byte %#02x at %d", c, i)}
		}
	}
	if strings.HasPrefix(id, ReservedIDPrefix) {
		return &IDError{Field: field, Reason: "begins with " + ReservedIDPrefix + ", kept for lkscore's own keys"}
	}
	return nil
}

// ReservedIDPrefix begins the keys lkscore keeps its own state under beside
// the sessions' (facts.InternalKeyPrefix): no id may begin with it, so a
// room named by a sender can never be one of them.
const ReservedIDPrefix = "_lkscore"

// CheckOptionalID is CheckID for an id that may be absent ("").
func CheckOptionalID(field, id string) error {
	if id == "" {
		return nil
	}
	return CheckID(field, id)
}

// NameError is a name out of the rule.
type NameError struct {
	Field, Reason string
}

func (e *NameError) Error() string {
	return fmt.Sprintf("%s: invalid name (%s; names are at most %d bytes of UTF-8 without control characters)", e.Field, e.Reason, MaxNameLen)
}

// CheckName checks a name that becomes a subject token (AgentToken): at
// most MaxNameLen bytes of valid UTF-8 without control characters. The
// empty name is allowed (it is "_").
func CheckName(field, name string) error {
	if len(name) > MaxNameLen {
		return &NameError{Field: field, Reason: fmt.Sprintf("%d bytes, over %d", len(name), MaxNameLen)}
	}
	if !utf8.ValidString(name) {
		return &NameError{Field: field, Reason: "not UTF-8"}
	}
	for i, r := range name {
		switch {
		case r < 0x20 || r == 0x7f || (r >= 0x80 && r < 0xa0):
			return &NameError{Field: field, Reason: fmt.Sprintf("control character %U at byte %d", r, i)}
		}
	}
	return nil
}

// ParseSessionKey splits a session key, "<room_id>/<job_id>" as a
// scorecard's session.key spells it, and checks both ids against the id
// rule ("_" is the job of an upload without one).
func ParseSessionKey(key string) (roomID, jobID string, err error) {
	room, job, ok := strings.Cut(key, "/")
	if !ok || strings.Contains(job, "/") {
		return "", "", fmt.Errorf("%.200q is not a session key: want room_id/job_id, e.g. RM_xxx/AJ_yyy (as in a scorecard's session.key)", key)
	}
	if err := CheckID("session key room_id", room); err != nil {
		return "", "", err
	}
	if err := CheckID("session key job_id", job); err != nil {
		return "", "", err
	}
	return room, job, nil
}

// ProbeRoomSID is the room of `lkscore doctor`'s signed test webhook: ingest
// verifies it like any other and answers 200, but neither stores it nor
// counts it as LiveKit's traffic (the last-accepted gauge, the ingestion
// view), so a scheduled doctor cannot hide "LiveKit stopped sending".
const ProbeRoomSID = "RM_lkscore_doctor"
