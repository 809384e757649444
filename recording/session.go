package recording

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/livekit/protocol/livekit"
	"github.com/lkscore/lkscore/session"
)

// ErrNotFound is wrapped by stores when an object does not exist: a
// permanent condition, unlike a 5xx or a timeout.
var ErrNotFound = errors.New("object not found")

// ObjectReader is what loading a session needs from a store.
type ObjectReader interface {
	// Open opens key for reading. It fails with an error wrapping ErrNotFound
	// when the object is absent, and one wrapping ErrLimit when it is larger
	// than maxBytes; the reader it returns also fails past maxBytes.
	Open(ctx context.Context, key string, maxBytes int64) (io.ReadCloser, error)
}

// Limits bound what loading a session reads.
type Limits struct {
	HeaderBytes int
	Chat        ChatLimits
}

// DefaultLimits are the documented defaults.
func DefaultLimits() Limits {
	return Limits{HeaderBytes: DefaultMaxHeaderBytes, Chat: ChatLimits{MaxBytes: DefaultMaxChatBytes, MaxItems: DefaultMaxChatItems}}
}

// Session is one parsed recording upload.
type Session struct {
	Key              string            `json:"session_key"`
	RoomID           string            `json:"room_id"`
	JobID            string            `json:"job_id,omitempty"`
	RoomName         string            `json:"room_name,omitempty"`
	StartTime        *time.Time        `json:"start_time,omitempty"`
	RoomStartTime    *time.Time        `json:"room_start_time,omitempty"`
	DurationMs       uint64            `json:"duration_ms,omitempty"`
	Simulated        bool              `json:"simulated"`
	RedactionEnabled bool              `json:"redaction_enabled"`
	RoomTags         map[string]string `json:"room_tags,omitempty"`
	Summary          Summary           `json:"summary"`
	// Close is the normalized close reason and where it came from (the
	// summary, or absent).
	session.Close
	Chat     *ChatHistory `json:"-"`
	Problems []Problem    `json:"problems"`
}

// SessionKey returns room_id/job_id, or, for SDKs before 1.6.6 that send no
// job_id, room_id/h-<hash of the header bytes>, stable across the SDK's
// retries of the same upload (docs/formats.md, "Recording header").
func SessionKey(roomID, jobID string, headerBytes []byte) string {
	if jobID != "" {
		return roomID + "/" + jobID
	}
	sum := sha256.Sum256(headerBytes)
	return roomID + "/" + legacyJobPrefix + hex.EncodeToString(sum[:8])
}

// legacyJobPrefix starts the job part SessionKey makes for a header without
// a job_id.
const legacyJobPrefix = "h-"

// FactsJobID returns the job id a session's facts are keyed by: the job id
// itself, or "" for SessionKey's header-hash stand-in, whose session has no
// job to key facts by.
func FactsJobID(job string) string {
	if IsLegacyJobID(job) {
		return ""
	}
	return job
}

// IsLegacyJobID reports whether job is SessionKey's stand-in for a header
// without a job_id.
func IsLegacyJobID(job string) bool { return strings.HasPrefix(job, legacyJobPrefix) }

// NewSession parses header bytes into a Session (no chat history yet).
func NewSession(headerBytes []byte, lim Limits) (*Session, error) {
	h, err := ParseHeader(headerBytes, lim.HeaderBytes)
	if err != nil {
		return nil, err
	}
	s := FromHeader(h, headerBytes)
	if s.RoomID == "" {
		s.Problems = append(s.Problems, Problem{Part: PartHeader, Code: "room_id_missing", Message: "header has no room_id"})
	}
	return s, nil
}

// FromHeader builds a Session from a decoded header; headerBytes is only
// used for the fallback session key.
func FromHeader(h *livekit.MetricsRecordingHeader, headerBytes []byte) *Session {
	s := &Session{
		Key: SessionKey(h.GetRoomId(), h.GetJobId(), headerBytes), RoomID: h.GetRoomId(), JobID: h.GetJobId(),
		RoomName: h.GetRoomName(), DurationMs: h.GetDuration(), Simulated: h.GetSimulated(),
		RedactionEnabled: h.GetRedactionEnabled(), RoomTags: h.GetRoomTags(), Problems: []Problem{},
	}
	// Epoch 0 means "no audio recording" (docs/formats.md, "Recording header"), not 1970.
	if ts := h.GetStartTime(); ts != nil && (ts.Seconds != 0 || ts.Nanos != 0) {
		t := ts.AsTime()
		s.StartTime = &t
	}
	if ts := h.GetRoomStartTime(); ts != nil && (ts.Seconds != 0 || ts.Nanos != 0) {
		t := ts.AsTime()
		s.RoomStartTime = &t
	}
	sum, problems := ParseSummary(h.GetSessionSummary())
	s.Summary = sum
	s.CloseReason, s.CloseReasonSource = sum.CloseReason, sum.CloseReasonSource
	s.Problems = append(s.Problems, problems...)
	return s
}

// Load reads and parses a session in the directory layout under dir
// (ending in "/"): the header is required; a missing chat history is a
// problem, not an error.
func Load(ctx context.Context, src ObjectReader, dir string, lim Limits) (*Session, error) {
	return (*ChatDecoder)(nil).Load(ctx, src, dir, lim)
}

// Load reads and parses a session as the function Load does, decoding its
// chat history into d's memory: the session's Chat is valid until d's
// next decode (ChatDecoder). A nil d decodes into new memory.
func (d *ChatDecoder) Load(ctx context.Context, src ObjectReader, dir string, lim Limits) (*Session, error) {
	s, err := LoadHeader(ctx, src, dir, lim)
	if err != nil {
		return nil, err
	}
	rc, err := src.Open(ctx, dir+ObjectChatHistory, lim.Chat.MaxBytes)
	switch {
	case errors.Is(err, ErrNotFound):
		s.Problems = append(s.Problems, Problem{Part: PartChatHistory, Code: "chat_history_missing", Message: "no chat_history.json in the upload"})
		return s, nil
	case errors.Is(err, ErrLimit):
		return nil, limitErr(PartChatHistory, -1, lim.Chat.MaxBytes, fmt.Sprintf("max_bytes=%d", lim.Chat.MaxBytes))
	case err != nil:
		return nil, err
	}
	defer rc.Close()
	var chat *ChatHistory
	if d != nil {
		chat, err = d.Decode(rc, lim.Chat)
	} else {
		chat, err = ParseChatHistory(rc, lim.Chat)
	}
	if err != nil {
		return nil, err
	}
	s.AttachChat(chat)
	return s, nil
}

// LoadHeader reads and parses only the header (and its summary) of the
// session under dir: the small read the locator needs.
func LoadHeader(ctx context.Context, src ObjectReader, dir string, lim Limits) (*Session, error) {
	hb, err := readAll(ctx, src, dir+ObjectHeader, int64(lim.HeaderBytes))
	if err != nil {
		return nil, err
	}
	return NewSession(hb, lim)
}

// AttachChat sets the chat history and carries its problems over.
func (s *Session) AttachChat(c *ChatHistory) {
	s.Chat = c
	s.Problems = append(s.Problems, c.Problems...)
}

func readAll(ctx context.Context, src ObjectReader, key string, maxBytes int64) ([]byte, error) {
	rc, err := src.Open(ctx, key, maxBytes)
	if err != nil {
		if errors.Is(err, ErrLimit) {
			return nil, limitErr(PartHeader, -1, maxBytes, fmt.Sprintf("max_bytes=%d", maxBytes))
		}
		return nil, err // the store's error names the key
	}
	defer rc.Close()
	b, err := io.ReadAll(rc)
	if err != nil {
		if errors.Is(err, ErrLimit) {
			return nil, limitErr(PartHeader, -1, maxBytes, fmt.Sprintf("max_bytes=%d", maxBytes))
		}
		return nil, fmt.Errorf("read %s: %w", key, err)
	}
	return b, nil
}
