// Package locate turns what ingest stored into session facts: the locator
// records where each session's recording is and what the webhooks and the
// header say (package settle publishes the work once the facts are
// settled); the sweeper and the egress reconciler recover what LiveKit's
// notifier dropped; retention deletes old local uploads.
package locate

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/livekit/protocol/livekit"
	"github.com/livekit/protocol/livekit/agent"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/lkscore/lkscore/config"
	"github.com/lkscore/lkscore/consumer/broker"
	"github.com/lkscore/lkscore/consumer/internal/facts"
	"github.com/lkscore/lkscore/consumer/internal/factstore"
	"github.com/lkscore/lkscore/consumer/internal/failure"
	"github.com/lkscore/lkscore/consumer/internal/ingest"
	"github.com/lkscore/lkscore/consumer/internal/metrics"
	"github.com/lkscore/lkscore/consumer/internal/work"
	"github.com/lkscore/lkscore/recording"
	"github.com/lkscore/lkscore/regress"
	"github.com/lkscore/lkscore/store"
	"github.com/lkscore/lkscore/wire"
)

// Recordings is what the pipeline needs from the recording store: read
// and list it, read egress files in other buckets, delete (retention,
// metadata_only), and name locations.
type Recordings interface {
	recording.ObjectReader
	store.Lister
	store.BucketReader
	store.Deleter
	Location(dir string) string
	Identity() string
}

// Locator turns stored webhooks and upload notices into session facts;
// the settler (package settle) publishes each session's work from them.
type Locator struct {
	broker.Env
	facts     *factstore.Store
	kv        jetstream.KeyValue // egress links by room; nil disables them
	store     Recordings
	layout    recording.Layout
	lp        recording.LocationParser
	cfg       config.Pipeline
	lim       recording.Limits
	maxUpload int64 // a raw multipart object's size cap (config.Limits.UploadBytes)
	version   versionFromMetadata
	shared    *StoreCheck // nil: no check
	metrics   *metrics.Pipeline
}

// Options are what a Locator needs: where it reads and writes, and the
// config sections it uses.
type Options struct {
	Facts   *factstore.Store
	Store   Recordings
	Egress  jetstream.KeyValue // the egress links bucket (OpenEgressLinks); nil: no links
	Shared  *StoreCheck        // checks upload notices' store; nil: no check
	Metrics *metrics.Pipeline

	Pipeline   config.Pipeline
	Limits     config.Limits
	S3         config.S3         // the key prefix and how s3:// URLs of egress files are read
	Recordings config.Recordings // the key template
	// VersionMetadataKey is regression.version_metadata_key.
	VersionMetadataKey string
}

// New locates recordings as o says; env's JetStream, clock and logger and
// o's facts, store and metrics are required.
func New(env broker.Env, o Options) (*Locator, error) {
	if err := broker.Require("locator", map[string]bool{"js": env.JS == nil, "log": env.Log == nil, "now": env.Now == nil,
		"facts": o.Facts == nil, "store": o.Store == nil, "metrics": o.Metrics == nil}); err != nil {
		return nil, err
	}
	if env.Timeouts.Publish <= 0 || env.Timeouts.Request <= 0 {
		return nil, errors.New("locator: timeouts must be positive")
	}
	layout, err := recording.NewLayout(o.S3.Prefix, o.Recordings.KeyTemplate)
	if err != nil {
		return nil, fmt.Errorf("locator: %w", err)
	}
	return &Locator{Env: env, facts: o.Facts, kv: o.Egress, store: o.Store, layout: layout, cfg: o.Pipeline,
		lp:  recording.LocationParser{Endpoint: o.S3.Endpoint, ForcePathStyle: o.S3.ForcePathStyle},
		lim: o.Limits.Parser(), maxUpload: o.Limits.UploadBytes(),
		version: versionFromMetadata{key: o.VersionMetadataKey, prefix: regress.MetadataVersionTag},
		shared:  o.Shared, metrics: o.Metrics}, nil
}

// located is a session the locator found in the store.
type located struct {
	dir    string
	origin string
	// job is the ended job a webhook announced: its facts go with the
	// recording's.
	job *livekit.Job
	// version is the job's metadata version ingest kept
	// (wire.HeaderMetadataVersion).
	version string
	// apiKey signed the upload or the webhook ("" when unknown).
	apiKey string
}

// Handle processes one message: it records where each session's recording
// is, with what the header and webhooks say, in the session facts. The
// settler publishes the work once the facts are complete or settled. It
// returns nil when done, failure.ErrNotYet to retry later, a permanent error to
// dead-letter, or any other error to retry.
func (l *Locator) Handle(ctx context.Context, m jetstream.Msg) error {
	subj := m.Subject()
	switch {
	case subj == l.Subjects.UploadStored():
		var n work.UploadNotice
		if err := json.Unmarshal(m.Data(), &n); err != nil || n.Dir == "" {
			return failure.Permanent(fmt.Errorf("upload notice is not valid: %v", err))
		}
		if err := facts.CheckSession("upload notice", n.RoomID, n.JobID); err != nil {
			return failure.Permanent(err)
		}
		if err := l.shared.check(&n); err != nil {
			return err
		}
		return l.record(ctx, located{dir: n.Dir, origin: "upload", apiKey: n.APIKey})
	case strings.HasPrefix(subj, l.Subjects.Webhook("")):
		var ev livekit.WebhookEvent
		if err := ingest.DecodeEvent(m.Data(), &ev); err != nil {
			return failure.Permanent(fmt.Errorf("stored webhook is not a WebhookEvent: %w", err))
		}
		// An older lkscore stored webhooks without the id rule: one whose
		// ids cannot make a key is dead-lettered, never keyed.
		if err := facts.CheckEvent(&ev); err != nil {
			return failure.Permanent(fmt.Errorf("stored webhook %s: %w", metrics.EventLabel(ev.Event), err))
		}
		switch ev.Event {
		case "agent_job_ended":
			return l.jobEnded(ctx, &ev, m.Headers().Get(wire.HeaderAPIKey), m.Headers().Get(wire.HeaderMetadataVersion))
		case "agent_job_started":
			return l.jobStarted(ctx, &ev, m.Headers().Get(wire.HeaderMetadataVersion))
		case "participant_left", "participant_connection_aborted":
			return l.participantLeft(ctx, &ev, m)
		case "room_finished":
			return l.roomFinished(ctx, &ev)
		case "egress_ended":
			return l.egressEnded(ctx, &ev)
		}
		return nil // an event the locator does not use
	}
	return failure.Permanent(fmt.Errorf("locator: unexpected subject %s", subj))
}

// jobEnded records an agent_job_ended event's facts and looks for its
// recording; version is the metadata value ingest kept
// (wire.HeaderMetadataVersion).
func (l *Locator) jobEnded(ctx context.Context, ev *livekit.WebhookEvent, apiKey, version string) error {
	job, room, err := jobAndRoom(ev)
	if err != nil {
		return err
	}
	// The job's facts count even before its recording arrives.
	obs := withRoomName(room, l.jobObservations(job, version)...)
	if apiKey != "" {
		obs = append(obs, facts.Observation{Field: facts.FieldAPIKey, Value: facts.Bounded(apiKey, 128), Source: facts.SourceWebhook,
			Evidence: "webhook token"})
	}
	if err := l.facts.Add(ctx, facts.Update{RoomID: room.GetSid(), JobID: job.GetId(), Observations: obs, JobEnded: true}); err != nil {
		return err
	}
	found, err := l.find(ctx, room.GetSid(), room.GetName())
	if err != nil {
		return err
	}
	var legacy []located
	for _, f := range found {
		f.origin, f.job, f.version = "agent_job_ended", job, version
		v, _ := l.layout.Match(f.dir + recording.ObjectHeader)
		if v.JobID == job.GetId() {
			return l.record(ctx, f)
		}
		if recording.IsLegacyJobID(v.JobID) {
			legacy = append(legacy, f)
		}
	}
	// SDKs before 1.6.6 send no job_id: their sessions are keyed
	// room_id/h-<hash>, and the room's job can only be matched by room.
	for _, f := range legacy {
		if err := l.record(ctx, f); err != nil {
			return err
		}
	}
	if len(legacy) > 0 {
		return nil
	}
	return failure.ErrNotYet
}

// jobAndRoom is an agent_job_* event's job and its room: job.room first,
// then the event's room (protocol's newer form leaves the event's unset).
func jobAndRoom(ev *livekit.WebhookEvent) (*livekit.Job, *livekit.Room, error) {
	job := ev.GetJob()
	room := job.GetRoom()
	if room == nil {
		room = ev.GetRoom()
	}
	if job.GetId() == "" || room.GetSid() == "" {
		return nil, nil, failure.Permanent(fmt.Errorf("%s without job.id or room.sid", ev.GetEvent()))
	}
	return job, room, nil
}

// jobStarted records what agent_job_started says about the job (its agent
// name, deployment and participant identity); the job has not ended.
func (l *Locator) jobStarted(ctx context.Context, ev *livekit.WebhookEvent, version string) error {
	job, room, err := jobAndRoom(ev)
	if err != nil {
		return err
	}
	obs := slices.DeleteFunc(l.jobObservations(job, version), func(o facts.Observation) bool {
		return o.Field == facts.FieldJobStatus || o.Field == facts.FieldCloseReason || o.Field == facts.FieldJobError
	})
	return l.facts.Add(ctx, facts.Update{RoomID: room.GetSid(), JobID: job.GetId(), Observations: withRoomName(room, obs...)})
}

// jobObservations are the facts an agent_job_ended webhook gives. JS_FAILED
// is CR_ERROR unless its error is the agent's normal departure
// (isDepartureError): livekit-server ends every job whose agent left the
// room that way, a clean one included. version is what ingest read of
// regression.version_metadata_key (wire.HeaderMetadataVersion).
func (l *Locator) jobObservations(job *livekit.Job, version string) []facts.Observation {
	status := job.GetState().GetStatus()
	jobErr := facts.Bounded(job.GetState().GetError(), facts.MaxEvidence)
	obs := []facts.Observation{
		{Field: facts.FieldAgentName, Value: job.GetAgentName(), Source: facts.SourceWebhook},
		{Field: facts.FieldDeploymentID, Value: job.GetDeployment(), Source: facts.SourceWebhook},
		{Field: facts.FieldJobStatus, Value: status.String(), Source: facts.SourceWebhook},
		{Field: facts.FieldJobError, Value: jobErr, Source: facts.SourceWebhook},
	}
	if id := job.GetState().GetParticipantIdentity(); id != "" {
		obs = append(obs, facts.Observation{Field: facts.FieldAgentIdentity, Value: facts.IdentityHash(id), Source: facts.SourceWebhook})
	}
	if job.GetEnableRedaction() {
		obs = append(obs, facts.Observation{Field: facts.FieldRedaction, Value: "true", Source: facts.SourceWebhook})
	}
	if tag := l.version.tag(job, version); tag != "" {
		obs = append(obs, facts.Observation{Field: facts.FieldTag, Value: tag, Source: facts.SourceWebhook, Evidence: "metadata " + l.version.key})
	}
	if status == livekit.JobStatus_JS_FAILED && !facts.IsDepartureError(jobErr) {
		evidence := "job_status: JS_FAILED"
		if jobErr != "" {
			evidence += " (" + jobErr + ")"
		}
		obs = append(obs, facts.Observation{Field: facts.FieldCloseReason, Value: agent.CloseReason_CR_ERROR.String(), Source: facts.SourceJobStatus,
			Evidence: evidence})
	}
	return slices.DeleteFunc(obs, func(o facts.Observation) bool { return o.Value == "" })
}

func (l *Locator) roomFinished(ctx context.Context, ev *livekit.WebhookEvent) error {
	room := ev.GetRoom()
	if room.GetSid() == "" {
		return failure.Permanent(errors.New("room_finished without room.sid"))
	}
	if err := l.roomEvent(ctx, room.GetSid(), withRoomName(room, facts.RoomEndObservation(ev))...); err != nil {
		return err
	}
	found, err := l.find(ctx, room.GetSid(), room.GetName())
	if err != nil {
		return err
	}
	if len(found) == 0 {
		return failure.ErrNotYet
	}
	for _, f := range found {
		f.origin = "room_finished"
		if err := l.record(ctx, f); err != nil {
			return err
		}
	}
	return nil
}

// find lists the sessions stored under a room.
func (l *Locator) find(ctx context.Context, roomID, roomName string) ([]located, error) {
	objs, err := l.store.List(ctx, l.layout.RoomPrefix(recording.Vars{RoomID: roomID, RoomName: roomName}))
	if err != nil {
		return nil, fmt.Errorf("list room %s: %w", roomID, err)
	}
	var out []located
	for _, o := range objs {
		if v, ok := l.layout.Match(o.Key); ok && v.RoomID == roomID {
			out = append(out, located{dir: recording.SessionDir(o.Key)})
		}
	}
	return out, nil
}

// record reads a located session's header and adds it to its facts.
func (l *Locator) record(ctx context.Context, f located) error {
	s, err := l.readHeader(ctx, f.dir)
	if err != nil {
		return err
	}
	ref := &facts.RecordingRef{SessionKey: s.Key, RoomName: s.RoomName, Dir: f.dir, Location: l.store.Location(f.dir),
		Origin: f.origin, Problems: s.Problems}
	u := l.recordingUpdate(s, ref, f.job, f.version)
	if f.apiKey != "" {
		u.Observations = append(u.Observations, facts.Observation{Field: facts.FieldAPIKey, Value: facts.Bounded(f.apiKey, 128), Source: facts.SourceHeader,
			Evidence: "upload token"})
	}
	return l.facts.Add(ctx, u)
}

// recordingUpdate is what a located recording adds to its session's facts:
// where it is, what its header says, and the ended job when one came with it.
func (l *Locator) recordingUpdate(s *recording.Session, ref *facts.RecordingRef, job *livekit.Job, version string) facts.Update {
	u := facts.Update{RoomID: s.RoomID, JobID: s.JobID, Recording: ref}
	if s.CloseReasonSource == recording.SourceSummary {
		u.Observations = append(u.Observations, facts.Observation{Field: facts.FieldCloseReason, Value: s.CloseReason,
			Source: facts.SourceSummary, Evidence: "summary: close_reason=" + s.CloseReason})
	}
	if v := s.Summary.SDK; v != "" {
		u.Observations = append(u.Observations, facts.Observation{Field: facts.FieldSDKLanguage, Value: facts.Bounded(v, 32), Source: facts.SourceHeader,
			Evidence: "summary sdk"})
	}
	if v := s.Summary.SDKVersion; v != "" {
		u.Observations = append(u.Observations, facts.Observation{Field: facts.FieldSDKVersion, Value: facts.Bounded(v, 32), Source: facts.SourceHeader,
			Evidence: "summary sdk_version"})
	}
	if s.Simulated {
		u.Observations = append(u.Observations, facts.Observation{Field: facts.FieldSimulated, Value: "true", Source: facts.SourceHeader})
	}
	if s.RedactionEnabled {
		u.Observations = append(u.Observations, facts.Observation{Field: facts.FieldRedaction, Value: "true", Source: facts.SourceHeader})
	}
	if job != nil {
		u.Observations = append(u.Observations, l.jobObservations(job, version)...)
		u.JobEnded = true
	}
	return u
}

func (l *Locator) readHeader(ctx context.Context, dir string) (*recording.Session, error) {
	s, err := recording.LoadHeader(ctx, l.store, dir, l.lim)
	if errors.Is(err, recording.ErrNotFound) {
		return nil, failure.ErrNotYet
	}
	return s, err // parse errors and limits are permanent (failure.Classify)
}

// versionFromMetadata turns the value of a key of the job's (else the
// room's) JSON metadata into a tag regression detection reads after the
// version tag and the deployment id (regression.version_metadata_key,
// regress.KeyOf). Ingest reads the value before the stored event loses its
// metadata and keeps it in wire.HeaderMetadataVersion; an event stored
// without that header (by a version that kept the metadata) is read from
// its metadata.
type versionFromMetadata struct {
	key, prefix string
}

// tag is the version tag of a job: stored (the header's value) when ingest
// kept one, else what the job's own metadata says.
func (v versionFromMetadata) tag(job *livekit.Job, stored string) string {
	if v.key == "" {
		return ""
	}
	val := stored
	if val == "" {
		val = facts.MetadataValue(v.key, job.GetMetadata(), job.GetRoom().GetMetadata())
	}
	if val == "" {
		return ""
	}
	return facts.Bounded(v.prefix+val, 128)
}
