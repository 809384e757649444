// Package work holds the messages the pipeline's stages hand each other
// on NATS: the upload notice ingest publishes once an upload is stored (the
// locator reads it) and the session work item the settler publishes (the
// scoring workers read it). They are lkscore's own, not its public contract
// (the top-level package wire is): they may change between releases, and a
// stream holding old ones is read by the release that follows.
package work

import (
	"time"

	"github.com/lkscore/lkscore/consumer/internal/facts"
	"github.com/lkscore/lkscore/session"
)

// Item is one session's work on lkscore.session.<CLOSE_REASON>: where
// its recording is and what the locator learned, never the recording itself.
// The recording's reference is embedded: its fields are the item's own in
// JSON.
type Item struct {
	facts.RecordingRef
	RoomID    string `json:"room_id"`
	JobID     string `json:"job_id,omitempty"`
	AgentName string `json:"agent_name,omitempty"`
	// Close is the session's close reason as its facts resolved it.
	session.Close
	// MetadataOnly is set for a session scored from its spans and logs: it
	// uploaded no recording (Dir and Object are empty).
	MetadataOnly bool      `json:"metadata_only,omitempty"`
	LocatedAt    time.Time `json:"located_at"`
	// Facts are the session's settled facts, each from its best source.
	Facts *facts.Resolved `json:"facts,omitempty"`
	// ScoringVersion is set on a rescore's item (lkscore rescore): score it
	// under this scoring version, whose config the scoring bucket holds.
	// Empty: the worker's own config.
	ScoringVersion string `json:"scoring_version,omitempty"`
}

// UploadNotice is the message published on wire.Subjects.UploadStored once an
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
