package consumer

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"time"

	gojson "github.com/goccy/go-json"
	"github.com/livekit/protocol/livekit"
	"github.com/livekit/protocol/livekit/agent"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/lkscore/lkscore/config"
	"github.com/lkscore/lkscore/consumer/internal/failure"
	"github.com/lkscore/lkscore/recording"
	"github.com/lkscore/lkscore/scoring"
	"github.com/lkscore/lkscore/wire"
)

// Session facts: what every signal said about one session (the recording
// header, webhooks, OTLP logs and spans), kept as a set of observations with
// their provenance in the KV bucket <stream prefix>_SESSION_FACTS, key
// "<room_id>.<job_id>" ("<room_id>._" for an upload without a job id). The
// set only grows, duplicates are dropped and everything derived from it is a
// pure function of the set, so the final facts depend neither on the order
// in which signals arrive nor on how often. docs/facts.md has the rules.

// Fact fields.
const (
	fieldCloseReason  = "close_reason"
	fieldAgentName    = "agent_name"
	fieldSDKLanguage  = "sdk_language"
	fieldSDKVersion   = "sdk_version"
	fieldDeploymentID = "deployment_id"
	fieldCloudAgentID = "cloud_agent_id"
	fieldSimulated    = "simulated"
	fieldRedaction    = "redaction_enabled"
	fieldTag          = "tag"
	fieldOutcome      = "outcome"
	fieldEvaluation   = "evaluation"
	fieldJobStatus    = "job_status"
	// fieldInput names a signal that said something: traces or logs.
	fieldInput = "input"
	// fieldRecordingExpected is the session report's word on whether a
	// recording upload follows ("true", "false").
	fieldRecordingExpected = "recording_expected"
)

// Fact sources, in the order close reasons are trusted (docs/facts.md).
const (
	sourceSummary        = recording.SourceSummary // the header's session_summary
	sourceOTLPSpan       = "otlp_span"             // a span's lk.close_reason
	sourceOTLPLog        = "otlp_log"              // a log record that names the reason
	sourceOTLPLogImplied = "otlp_log_implied"      // a log record that implies it
	sourceJobStatus      = "job_status"            // agent_job_ended: JS_FAILED (not a departure) → CR_ERROR
	sourceAbsent         = recording.SourceAbsent  // no signal said anything
	sourceHeader         = "header"                // other header fields
	sourceWebhook        = "webhook"               // agent_job_ended's job
	sourceOTLP           = "otlp"                  // other OTLP attributes
)

// closeReasonRank orders close-reason sources: higher wins.
var closeReasonRank = map[string]int{
	sourceSummary: 6, sourceOTLPSpan: 5, sourceOTLPLog: 4, sourceOTLPLogImplied: 3, sourceJobStatus: 2, sourceRoom: 1,
}

// fieldRank orders the sources of the other fields: higher wins.
var fieldRank = map[string]int{sourceWebhook: 3, sourceHeader: 2, sourceOTLP: 1}

// maxObservations bounds one session's facts: a hostile or chatty agent
// cannot grow an entry without limit.
const maxObservations = 256

// factUpdate is what one signal adds to a session's facts.
type factUpdate struct {
	roomID, jobID string
	observations  []wire.Observation
	recording     *wire.RecordingRef
	jobEnded      bool
	spans         []scoring.Span
}

// merge adds u to f and reports whether anything changed.
func mergeFacts(f *wire.SessionFacts, u factUpdate) bool {
	changed := false
	for _, o := range u.observations {
		i, found := slices.BinarySearchFunc(f.Observations, o, wire.Observation.Compare)
		if found || len(f.Observations) >= maxObservations {
			continue
		}
		f.Observations = slices.Insert(f.Observations, i, o)
		changed = true
	}
	// The first recording found stays: a re-upload of the same session has
	// the same key, and the dedup of session work made the first one win
	// before facts existed too.
	if u.recording != nil && f.Recording == nil {
		f.Recording, changed = u.recording, true
	}
	if u.jobEnded && !f.JobEnded {
		f.JobEnded, changed = true, true
	}
	if len(u.spans) > 0 {
		var added bool
		if f.Spans, added = mergeSpans(f.Spans, u.spans); added {
			changed = true
		}
	}
	return changed
}

// closeReasonOrder breaks ties between equally trusted close reasons: the
// more serious one wins.
var closeReasonOrder = map[string]int{agent.CloseReason_CR_ERROR.String(): 0, agent.CloseReason_CR_PARTICIPANT_DISCONNECTED.String(): 1,
	agent.CloseReason_CR_USER_INITIATED.String(): 2, agent.CloseReason_CR_JOB_SHUTDOWN.String(): 3,
	agent.CloseReason_CR_COMPLETED.String(): 4, agent.CloseReason_CR_UNKNOWN.String(): 5}

// resolve derives the facts from a set of observations. It is a pure
// function of the set: the same observations in any order resolve alike.
func resolve(obs []wire.Observation) wire.Resolved {
	r := wire.Resolved{CloseReason: agent.CloseReason_CR_UNKNOWN.String(), CloseReasonSource: sourceAbsent}
	r.Provenance = map[string]string{}
	best := map[string]wire.Observation{}
	better := func(o, cur wire.Observation, rank map[string]int) bool {
		if d := rank[o.Source] - rank[cur.Source]; d != 0 {
			return d > 0
		}
		if o.Field == fieldCloseReason {
			if d := closeReasonOrder[o.Value] - closeReasonOrder[cur.Value]; d != 0 {
				return d < 0
			}
		}
		return o.Compare(cur) < 0
	}
	tags := map[string]bool{}
	for _, o := range obs {
		switch o.Field {
		case fieldTag:
			tags[o.Value] = true
			continue
		case fieldSimulated:
			r.Simulated = r.Simulated || o.Value == "true"
			continue
		case fieldRedaction:
			r.RedactionEnabled = r.RedactionEnabled || o.Value == "true"
			continue
		case fieldEvaluation:
			continue // kept in the facts; the scorecard does not carry them yet
		case fieldInput:
			if !slices.Contains(r.Inputs, o.Value) {
				r.Inputs = append(r.Inputs, o.Value)
			}
			continue
		case fieldRecordingExpected:
			if r.RecordingExpected != "true" { // any report that says a recording follows wins
				r.RecordingExpected = o.Value
			}
			continue
		case fieldDeparture, fieldRoomEnd, fieldAgentIdentity:
			continue // the room's story, below
		}
		rank := fieldRank
		if o.Field == fieldCloseReason {
			rank = closeReasonRank
			if o.Value == agent.CloseReason_CR_UNKNOWN.String() {
				continue // says nothing
			}
		}
		if cur, ok := best[o.Field]; !ok || better(o, cur, rank) {
			best[o.Field] = o
		}
	}
	// Where each single-valued field lands.
	dst := map[string]*string{fieldAgentName: &r.AgentName, fieldSDKLanguage: &r.SDKLanguage, fieldSDKVersion: &r.SDKVersion,
		fieldDeploymentID: &r.DeploymentID, fieldCloudAgentID: &r.CloudAgentID, fieldOutcome: &r.Outcome, fieldJobStatus: &r.JobStatus,
		fieldJobError: &r.JobError}
	story := storyOf(obs)
	story.apply(&r)
	if reason, evidence := story.closeReason(); reason != "" {
		o := wire.Observation{Field: fieldCloseReason, Value: reason, Source: sourceRoom, Evidence: evidence}
		if cur, ok := best[fieldCloseReason]; !ok || better(o, cur, closeReasonRank) {
			best[fieldCloseReason] = o
		}
	}
	for field, o := range best {
		r.Provenance[field] = o.Source
		if field == fieldCloseReason {
			r.CloseReason, r.CloseReasonSource, r.CloseReasonEvidence = o.Value, o.Source, o.Evidence
		} else if p := dst[field]; p != nil {
			*p = o.Value
		}
	}
	if _, named := best[fieldCloseReason]; !named {
		r.CloseReasonEvidence = unnamedEvidence(r, story)
	}
	for t := range tags {
		r.Tags = append(r.Tags, t)
	}
	slices.Sort(r.Tags)
	slices.Sort(r.Inputs)
	if len(r.Provenance) == 0 {
		r.Provenance = nil
	}
	return r
}

// unnamedEvidence says why no close reason was named where a signal said
// something about the end: the agent left the room, by LiveKit's job status
// or the room's webhooks.
func unnamedEvidence(r wire.Resolved, story roomStory) string {
	if d, ok := story.first(); ok && d.role == roleAgent {
		return fmt.Sprintf("%s: the agent left first (disconnect_reason=%s): it ended the session, for a reason no signal named", sourceRoom, d.reason)
	}
	if r.JobStatus == livekit.JobStatus_JS_FAILED.String() && isDepartureError(r.JobError) {
		return "job_status: JS_FAILED (" + r.JobError + ") is livekit-server's record of the agent leaving the room, not an error"
	}
	return ""
}

// complete reports whether nothing more is expected: the recording is
// stored, the job has ended, and a signal named the close reason outright
// (a summary, a span or a log record that names it). Anything less waits
// for the settle window, or for the room's (roomFinished).
func complete(f *wire.SessionFacts) bool {
	if f.Recording == nil || !f.JobEnded {
		return false
	}
	r := resolve(f.Observations)
	return closeReasonRank[r.CloseReasonSource] >= closeReasonRank[sourceOTLPLog]
}

// spansOnly reports whether the session is to be scored from its spans and
// logs alone: no recording, spans kept under a job id, and no session report
// saying a recording follows (one that does keeps the session waiting for
// it, as a session without spans waits).
func spansOnly(f *wire.SessionFacts) bool {
	return f.Recording == nil && len(f.Spans) > 0 && f.JobID != "" && f.JobID != wire.RoomKeyJob && recordingExpected(f) != "true"
}

// recordingExpected is what the session reports said: "true" when any said
// a recording follows, "false" when they said none does, "" when none said.
func recordingExpected(f *wire.SessionFacts) string {
	out := ""
	for _, o := range f.Observations {
		if o.Field == fieldRecordingExpected && out != "true" {
			out = o.Value
		}
	}
	return out
}

// roomFinished reports whether the recording is stored and room_finished
// came: LiveKit has nothing more to say about the room, and the SDKs send
// their logs before the upload, so the settler waits only roomSettle for
// signals still in flight (one room's webhooks are handled concurrently).
func roomFinished(f *wire.SessionFacts) bool {
	return f.Recording != nil && slices.ContainsFunc(f.Observations, func(o wire.Observation) bool { return o.Field == fieldRoomEnd })
}

// roomSettle is how long a finished room's session waits after its last
// signal: enough for the room's other webhooks, handled in parallel, to land.
const roomSettle = time.Second

// factStore reads and merges session facts in the KV bucket.
type factStore struct {
	kv      jetstream.KeyValue
	timeout time.Duration // one KV request
	now     func() time.Time
}

// maxCASAttempts bounds the compare-and-swap retries of one merge.
const maxCASAttempts = 16

// add merges u into the session's entry with compare-and-swap, so
// concurrent writers (ingest, locators, settlers) never lose each other's
// facts. An update that adds nothing writes nothing.
func (s *factStore) add(ctx context.Context, u factUpdate) error {
	if u.roomID == "" {
		return failure.Permanent(errors.New("session facts need a room id"))
	}
	key := wire.FactsKey(u.roomID, u.jobID)
	joined := true
	written, rev, err := s.modifyFrom(ctx, key, nil, 0, func(f *wire.SessionFacts) bool {
		if f.RoomID == "" {
			f.RoomID, f.JobID = u.roomID, u.jobID
		}
		joined = f.RoomJoined || wire.IsRoomFactsKey(key)
		if !mergeFacts(f, u) {
			return false
		}
		f.LastInputAt = s.now().UTC()
		return true
	})
	if err != nil || joined {
		return err
	}
	// A session new to its room: register it in the room's entry and take
	// what the room's webhooks said so far (roomEvent does the converse).
	obs, err := s.joinRoom(ctx, u.roomID, key)
	if err != nil {
		return err
	}
	// Continue from the entry just written: no read of it, unless another
	// writer changed it meanwhile (the compare-and-set says so).
	_, _, err = s.modifyFrom(ctx, key, written, rev, func(f *wire.SessionFacts) bool {
		if f.RoomID == "" || f.RoomJoined {
			return false
		}
		f.RoomJoined = true
		if mergeFacts(f, factUpdate{observations: obs}) {
			f.LastInputAt = s.now().UTC()
		}
		return true
	})
	return err
}

// maxRoomSessions bounds the sessions a room's entry lists (a room runs
// one agent session, rarely a few).
const maxRoomSessions = 64

// joinRoom lists session key in its room's entry and returns the room's
// observations as of that write. Room webhooks (roomEvent) add to the same
// entry with compare-and-swap and then copy to every session it lists, so
// whichever of the two writes second sees the other: no room fact is missed.
func (s *factStore) joinRoom(ctx context.Context, roomID, key string) ([]wire.Observation, error) {
	var obs []wire.Observation
	err := s.modify(ctx, wire.RoomFactsKey(roomID), func(f *wire.SessionFacts) bool {
		obs = slices.Clone(f.Observations)
		if f.RoomID == "" {
			f.RoomID, f.JobID = roomID, wire.RoomKeyJob
		}
		i, found := slices.BinarySearch(f.Sessions, key)
		if found || len(f.Sessions) >= maxRoomSessions {
			return false
		}
		f.Sessions = slices.Insert(f.Sessions, i, key)
		return true
	})
	return obs, err
}

// addTo adds observations to an existing entry; an absent one stays absent.
func (s *factStore) addTo(ctx context.Context, key string, obs []wire.Observation) error {
	return s.modify(ctx, key, func(f *wire.SessionFacts) bool {
		if f.RoomID == "" || !mergeFacts(f, factUpdate{observations: obs}) {
			return false
		}
		f.LastInputAt = s.now().UTC()
		return true
	})
}

// roomKeys lists the session entries of a room (not its own entry) for a
// legacy upload without a job id.
func (s *factStore) roomKeys(ctx context.Context, roomID string) ([]string, error) {
	rctx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	lister, err := s.kv.ListKeysFiltered(rctx, wire.Token(roomID)+".*")
	if errors.Is(err, jetstream.ErrNoKeysFound) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("list session facts of room %s: %w", roomID, err)
	}
	var keys []string
	for k := range lister.Keys() {
		if !wire.IsRoomFactsKey(k) {
			keys = append(keys, k)
		}
	}
	return keys, nil
}

// modify applies change to the entry under key (a zero entry when absent)
// and writes it if change returns true.
func (s *factStore) modify(ctx context.Context, key string, change func(*wire.SessionFacts) bool) error {
	_, _, err := s.modifyFrom(ctx, key, nil, 0, change)
	return err
}

// modifyFrom is modify starting from a known entry and its revision (the
// caller's own last write) instead of reading it; nil reads it. It returns
// the entry as written (or as read, when change wrote nothing) and its
// revision, so a caller's next change can start from there too. known is
// the caller's to give away: change may modify it.
func (s *factStore) modifyFrom(ctx context.Context, key string, known *wire.SessionFacts, knownRev uint64,
	change func(*wire.SessionFacts) bool) (*wire.SessionFacts, uint64, error) {
	for range maxCASAttempts {
		f, rev := known, knownRev
		known = nil // a conflict reads the entry afresh
		if f == nil {
			var err error
			if f, rev, err = s.get(ctx, key); err != nil {
				return nil, 0, err
			}
		}
		if !change(f) {
			return f, rev, nil
		}
		data, err := json.Marshal(f)
		if err != nil {
			return nil, 0, fmt.Errorf("encode session facts %s: %w", key, err)
		}
		rctx, cancel := context.WithTimeout(ctx, s.timeout)
		var newRev uint64
		if rev == 0 {
			newRev, err = s.kv.Create(rctx, key, data)
		} else {
			newRev, err = s.kv.Update(rctx, key, data, rev)
		}
		cancel()
		if err == nil {
			return f, newRev, nil
		}
		if !isCASConflict(err) {
			return nil, 0, fmt.Errorf("write session facts %s: %w", key, err)
		}
	}
	return nil, 0, fmt.Errorf("write session facts %s: %d conflicting writers in a row", key, maxCASAttempts)
}

// decodeFacts decodes a facts entry. The entries are lkscore's own writing
// and read several times a session (the store, the settler's watch), so
// goccy/go-json decodes them: a quarter of encoding/json's CPU on an entry
// with spans (BenchmarkFactsDecode, docs/performance.md).
func decodeFacts(data []byte, f *wire.SessionFacts) error { return gojson.Unmarshal(data, f) }

// get returns the entry under key and its revision (0 when absent).
func (s *factStore) get(ctx context.Context, key string) (*wire.SessionFacts, uint64, error) {
	rctx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	e, err := s.kv.Get(rctx, key)
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return &wire.SessionFacts{}, 0, nil
	}
	if err != nil {
		return nil, 0, fmt.Errorf("read session facts %s: %w", key, err)
	}
	var f wire.SessionFacts
	if err := decodeFacts(e.Value(), &f); err != nil {
		return nil, 0, failure.Permanent(fmt.Errorf("session facts %s are not valid JSON: %w", key, err))
	}
	return &f, e.Revision(), nil
}

// roomObservations returns the observations of every session of a room but
// skip: an upload without a job id (SDKs before 1.6.6) borrows what other
// signals said about its room.
//
// The room's entry lists its sessions (joinRoom). Only a room whose entry
// lists none (entries written before sessions joined their room) is listed
// with ListKeysFiltered, which under concurrent writes was seen to return
// no keys although they existed.
func (s *factStore) roomObservations(ctx context.Context, roomID, skip string) ([]wire.Observation, error) {
	room, _, err := s.get(ctx, wire.RoomFactsKey(roomID))
	if err != nil {
		return nil, err
	}
	keys := room.Sessions
	if len(keys) == 0 {
		if keys, err = s.roomKeys(ctx, roomID); err != nil {
			return nil, err
		}
	}
	var out []wire.Observation
	for _, k := range keys {
		if k == skip {
			continue
		}
		f, _, err := s.get(ctx, k)
		if err != nil {
			return nil, err
		}
		out = append(out, f.Observations...)
	}
	return out, nil
}

func isCASConflict(err error) bool {
	var apiErr *jetstream.APIError
	return errors.Is(err, jetstream.ErrKeyExists) ||
		(errors.As(err, &apiErr) && (apiErr.ErrorCode == jetstream.JSErrCodeStreamWrongLastSequence ||
			apiErr.ErrorCode == jetstream.JSErrCodeStreamWrongLastSequenceConstant))
}

// openFacts creates or updates the session facts bucket. Entries live as
// long as the streams keep messages (nats.max_age).
func openFacts(ctx context.Context, js jetstream.JetStream, s wire.Subjects, n config.NATS, log *slog.Logger) (*factStore, error) {
	var kv jetstream.KeyValue
	err := retrySetup(ctx, log, "session facts bucket", n.RequestTimeout, func(ctx context.Context) (err error) {
		kv, err = js.CreateOrUpdateKeyValue(ctx, jetstream.KeyValueConfig{
			Bucket: s.SessionFacts(), Description: "session facts from every signal (room_id.job_id)",
			TTL: n.MaxAge, Storage: storageType(n.Storage), Replicas: n.Replicas, History: 1,
		})
		return err
	})
	if err != nil {
		return nil, err
	}
	return &factStore{kv: kv, timeout: n.RequestTimeout, now: time.Now}, nil
}
