package consumer

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/livekit/protocol/livekit"
	"github.com/livekit/protocol/livekit/agent"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/lkscore/lkscore/config"
	"github.com/lkscore/lkscore/recording"
	"github.com/lkscore/lkscore/store"
)

// recordings is what the pipeline needs from the recording store: read
// and list it, read egress files in other buckets, and name locations.
type recordings interface {
	recording.ObjectReader
	store.Lister
	store.BucketReader
	Location(dir string) string
}

// locator turns stored webhooks and upload notices into session work: one
// message per session on lkscore.session.<CLOSE_REASON>, keyed by session.
type locator struct {
	js        jetstream.JetStream
	kv        jetstream.KeyValue // egress links by room; nil disables them
	store     recordings
	layout    recording.Layout
	lp        recording.LocationParser
	subjects  Subjects
	cfg       config.Pipeline
	lim       recording.Limits
	maxUpload int64 // a raw multipart object's size cap (config.Limits.UploadBytes)
	timeouts  timeouts
	selected  map[string]bool // close reasons this deployment's pool scores
	metrics   *pipelineMetrics
	log       *slog.Logger
	now       func() time.Time
}

// locatorOptions configures newLocator.
type locatorOptions struct {
	js       jetstream.JetStream
	kv       jetstream.KeyValue
	store    recordings
	layout   recording.Layout
	lp       recording.LocationParser
	subjects Subjects
	cfg      config.Pipeline
	limits   config.Limits
	timeouts timeouts
	metrics  *pipelineMetrics
	log      *slog.Logger
	now      func() time.Time
}

func newLocator(o locatorOptions) (*locator, error) {
	if o.js == nil || o.store == nil || o.metrics == nil || o.log == nil || o.now == nil {
		return nil, errors.New("locator: js, store, metrics, log and now are required")
	}
	if o.timeouts.publish <= 0 || o.timeouts.request <= 0 {
		return nil, errors.New("locator: timeouts must be positive")
	}
	selected := map[string]bool{}
	for _, r := range o.cfg.CloseReasons {
		selected[r] = true
	}
	return &locator{js: o.js, kv: o.kv, store: o.store, layout: o.layout, lp: o.lp, subjects: o.subjects, cfg: o.cfg,
		lim: o.limits.Parser(), maxUpload: o.limits.UploadBytes(), timeouts: o.timeouts, selected: selected,
		metrics: o.metrics, log: o.log, now: o.now}, nil
}

// located is a session the locator found in the store.
type located struct {
	dir       string
	agentName string
	origin    string
	// inferredError is set when the job ended in failure: it stands in for
	// a close reason the summary does not give.
	inferredError bool
}

// handle processes one message. It returns nil when done, errNotYet to
// retry later, a permanent error to dead-letter, or any other error to retry.
func (l *locator) handle(ctx context.Context, m jetstream.Msg) error {
	subj := m.Subject()
	switch {
	case subj == l.subjects.UploadStored():
		var n UploadNotice
		if err := json.Unmarshal(m.Data(), &n); err != nil || n.Dir == "" {
			return permanent(fmt.Errorf("upload notice is not valid: %v", err))
		}
		return l.publish(ctx, located{dir: n.Dir, origin: "upload"})
	case strings.HasPrefix(subj, l.subjects.Webhook("")):
		var ev livekit.WebhookEvent
		if err := unmarshalEvent.Unmarshal(m.Data(), &ev); err != nil {
			return permanent(fmt.Errorf("stored webhook is not a WebhookEvent: %w", err))
		}
		switch ev.Event {
		case "agent_job_ended":
			return l.jobEnded(ctx, &ev)
		case "room_finished":
			return l.roomFinished(ctx, &ev)
		case "egress_ended":
			return l.egressEnded(ctx, &ev)
		}
		return nil // an event the locator does not use
	}
	return permanent(fmt.Errorf("locator: unexpected subject %s", subj))
}

func (l *locator) jobEnded(ctx context.Context, ev *livekit.WebhookEvent) error {
	job := ev.GetJob()
	room := job.GetRoom()
	if room == nil {
		room = ev.GetRoom()
	}
	if job.GetId() == "" || room.GetSid() == "" {
		return permanent(errors.New("agent_job_ended without job.id or room.sid"))
	}
	found, err := l.find(ctx, room.GetSid(), room.GetName())
	if err != nil {
		return err
	}
	var legacy []located
	for _, f := range found {
		f.agentName, f.origin = job.GetAgentName(), "agent_job_ended"
		f.inferredError = job.GetState().GetStatus() == livekit.JobStatus_JS_FAILED
		v, _ := l.layout.Match(f.dir + recording.ObjectHeader)
		if v.JobID == job.GetId() {
			return l.publish(ctx, f)
		}
		if strings.HasPrefix(v.JobID, "h-") {
			legacy = append(legacy, f)
		}
	}
	// SDKs before 1.6.6 send no job_id: their sessions are keyed
	// room_id/h-<hash>, and the room's job can only be matched by room.
	for _, f := range legacy {
		if err := l.publish(ctx, f); err != nil {
			return err
		}
	}
	if len(legacy) > 0 {
		return nil
	}
	return errNotYet
}

func (l *locator) roomFinished(ctx context.Context, ev *livekit.WebhookEvent) error {
	room := ev.GetRoom()
	if room.GetSid() == "" {
		return permanent(errors.New("room_finished without room.sid"))
	}
	found, err := l.find(ctx, room.GetSid(), room.GetName())
	if err != nil {
		return err
	}
	if len(found) == 0 {
		return errNotYet
	}
	for _, f := range found {
		f.origin = "room_finished"
		if err := l.publish(ctx, f); err != nil {
			return err
		}
	}
	return nil
}

// find lists the sessions stored under a room.
func (l *locator) find(ctx context.Context, roomID, roomName string) ([]located, error) {
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

// publish reads a located session's header and publishes its work item.
func (l *locator) publish(ctx context.Context, f located) error {
	s, err := l.readHeader(ctx, f.dir)
	if err != nil {
		return err
	}
	item := l.workItem(s, f.origin)
	item.AgentName, item.Dir, item.Location = f.agentName, f.dir, l.store.Location(f.dir)
	if item.CloseReasonSource == recording.SourceAbsent && f.inferredError {
		item.CloseReason, item.CloseReasonSource = agent.CloseReason_CR_ERROR.String(), recording.SourceInferred
	}
	return l.submit(ctx, item)
}

// workItem is the work for a parsed session; the caller says where it is.
func (l *locator) workItem(s *recording.Session, origin string) WorkItem {
	return WorkItem{
		SessionKey: s.Key, RoomID: s.RoomID, RoomName: s.RoomName, JobID: s.JobID,
		CloseReason: s.CloseReason, CloseReasonSource: s.CloseReasonSource,
		Origin: origin, Problems: s.Problems, LocatedAt: l.now().UTC(),
	}
}

func (l *locator) readHeader(ctx context.Context, dir string) (*recording.Session, error) {
	s, err := recording.LoadHeader(ctx, l.store, dir, l.lim)
	if errors.Is(err, recording.ErrNotFound) {
		return nil, errNotYet
	}
	return s, err // parse errors and limits are permanent (classify)
}

// submit publishes a work item with the session key as Nats-Msg-Id: the
// stream drops the second of two locators' copies.
func (l *locator) submit(ctx context.Context, item WorkItem) error {
	data, err := json.Marshal(item)
	if err != nil {
		return permanent(err)
	}
	msg := nats.NewMsg(l.subjects.Session(item.CloseReason))
	msg.Data = data
	msg.Header.Set(HeaderSessionKey, item.SessionKey)
	ctx, cancel := context.WithTimeout(ctx, l.timeouts.publish)
	defer cancel()
	ack, err := l.js.PublishMsg(ctx, msg, jetstream.WithMsgID(item.SessionKey), jetstream.WithExpectStream(l.subjects.SessionStream()))
	if err != nil {
		return fmt.Errorf("publish session %s: %w", item.SessionKey, err)
	}
	if !ack.Duplicate {
		l.metrics.sessions.WithLabelValues(item.CloseReason, fmt.Sprint(l.selected[item.CloseReason])).Inc()
		l.log.Info("session located", "session_key", item.SessionKey, "close_reason", item.CloseReason, "origin", item.Origin)
	}
	return nil
}
