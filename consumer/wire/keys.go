package wire

import (
	"encoding/base64"
	"fmt"
	"hash/fnv"
	"strings"

	"github.com/lkscore/lkscore/regress"
)

// Keys of the session facts bucket (Subjects.SessionFacts).

// RoomKeyJob is the job part of a room's own facts entry, which holds what
// the room's webhooks said and lists the room's sessions.
const RoomKeyJob = "_room"

// FactsKey is a session's entry: "<room_id>.<job_id>", each a Token; an
// upload without a job id is "<room_id>._".
func FactsKey(roomID, jobID string) string {
	if jobID == "" {
		jobID = "_"
	}
	return Token(roomID) + "." + Token(jobID)
}

// RoomFactsKey is a room's own entry.
func RoomFactsKey(roomID string) string { return Token(roomID) + "." + RoomKeyJob }

// IsRoomFactsKey reports whether key is a room's own entry.
func IsRoomFactsKey(key string) bool { return strings.HasSuffix(key, "."+RoomKeyJob) }

// RoomFactsFilter matches every entry of a room, its own included.
func RoomFactsFilter(roomID string) string { return Token(roomID) + ".*" }

// SettlerLowWaterKey holds the settlers' low-water mark in the facts bucket:
// a revision below which every entry is published or has no recording.
const SettlerLowWaterKey = "_lkscore.settler_low_water"

// EgressLinkKey is an egress file's entry in the egress links bucket
// (Subjects.EgressLinks): "<room_id>.<egress_id>".
func EgressLinkKey(roomID, egressID string) string { return Token(roomID) + "." + Token(egressID) }

// EgressLink records an egress's output files for a room, in the
// <stream prefix>_EGRESS_LINKS key-value bucket under "<room_id>.<egress_id>".
type EgressLink struct {
	RoomID    string   `json:"room_id"`
	RoomName  string   `json:"room_name,omitempty"`
	EgressID  string   `json:"egress_id"`
	Status    string   `json:"status"`
	Locations []string `json:"locations"`
	EndedAt   int64    `json:"ended_at,omitempty"` // Unix ns, as EgressInfo has it
}

// Keys of the regression bucket (Subjects.RegressionBucket). Each part is
// base64url, so any agent, version or scoring version is one token.

func b64(s string) string { return base64.RawURLEncoding.EncodeToString([]byte(s)) }

// HistoryKey is an agent version's capped history of samples.
func HistoryKey(k regress.Key) string {
	return "h." + b64(k.Agent) + "." + b64(k.Version) + "." + b64(k.ScoringVersion)
}

// HistoryKeysFilter matches every history key.
const HistoryKeysFilter = "h.>"

// VersionIndexKey lists an agent's versions under one scoring version.
func VersionIndexKey(agent, scoringVersion string) string {
	return "i." + b64(agent) + "." + b64(scoringVersion)
}

// AlertStateKey is an agent version's alert state.
func AlertStateKey(k regress.Key) string {
	return "a." + b64(k.Agent) + "." + b64(k.Version) + "." + b64(k.ScoringVersion)
}

// AlertStatesFilter matches every alert state entry.
const AlertStatesFilter = "a.>"

// AlertState is the entry under AlertStateKey: what the detector remembers per agent/version/scoring
// version: the alerts firing now, by kind/metric, and the outbox of state
// changes recorded but maybe not yet published.
type AlertState struct {
	Firing map[string]Alert `json:"firing"`
	Outbox []Alert          `json:"outbox,omitempty"`
	// Basis is the history size the last recorded change was judged on:
	// a replica that judged an older snapshot changes nothing.
	Basis int `json:"basis"`
}

// BaselineKey is where `lkscore baseline seal` keeps an agent's sealed baseline.
func BaselineKey(agent, scoringVersion string) string {
	return "b." + b64(agent) + "." + b64(scoringVersion)
}

// Stages of the pipeline, as named in dead letters (Subjects.DLQ,
// HeaderDLQStage) and metrics.
const (
	StageLocate  = "locate"
	StageScore   = "score"
	StageRegress = "regress"
	StageNotify  = "notify"
)

// Durable consumers of the pipeline's stages.
const (
	LocatorWebhooks = "locator-webhooks"
	LocatorUploads  = "locator-uploads"
	RegressConsumer = "lkscore-regress"
)

// ScoreConsumer names a worker pool's durable consumer.
func ScoreConsumer(pool string) string { return "score-" + pool }

// NotifyConsumer names the durable consumer of one alert delivery target,
// from its kind ("am", "webhook") and URL: reordering the configuration
// keeps every target's place in the stream.
func NotifyConsumer(kind, url string) string {
	h := fnv.New32a()
	_, _ = h.Write([]byte(url))
	return fmt.Sprintf("lkscore-notify-%s-%08x", kind, h.Sum32())
}
