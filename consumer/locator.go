package consumer

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"time"

	"github.com/livekit/protocol/livekit"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/lkscore/lkscore/config"
	"github.com/lkscore/lkscore/recording"
)

// errNotYet means the recording a webhook announces is not in the store
// (yet): the locator retries with growing delays until its deadline.
var errNotYet = errors.New("recording not found (yet)")

// storeReader is what the locator and workers need from the recording store.
type storeReader interface {
	recording.ObjectReader
	List(ctx context.Context, prefix string) ([]ObjectInfo, error)
}

// bucketReader is implemented by stores that can read other buckets (S3).
type bucketReader interface {
	OpenBucket(ctx context.Context, bucket, key string, maxBytes int64) (io.ReadCloser, error)
}

// Locator turns stored webhooks and upload notices into session work: one
// message per session on lkscore.session.<CLOSE_REASON>, keyed by session.
type Locator struct {
	js       jetstream.JetStream
	kv       jetstream.KeyValue // egress links by room; nil disables them
	store    storeReader
	layout   recording.Layout
	lp       recording.LocationParser
	subjects Subjects
	cfg      config.Pipeline
	lim      recording.Limits
	selected map[string]bool // close reasons this deployment's pool scores
	metrics  *pipelineMetrics
	log      *slog.Logger
	now      func() time.Time
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
func (l *Locator) handle(ctx context.Context, m jetstream.Msg) error {
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

func (l *Locator) jobEnded(ctx context.Context, ev *livekit.WebhookEvent) error {
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

func (l *Locator) roomFinished(ctx context.Context, ev *livekit.WebhookEvent) error {
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

// publish reads a located session's header and publishes its work item.
func (l *Locator) publish(ctx context.Context, f located) error {
	s, err := l.readHeader(ctx, f.dir)
	if err != nil {
		return err
	}
	item := l.workItem(s, f.origin)
	item.AgentName, item.Dir, item.Location = f.agentName, f.dir, l.location(f.dir)
	if item.CloseReasonSource == recording.SourceAbsent && f.inferredError {
		item.CloseReason, item.CloseReasonSource = "CR_ERROR", recording.SourceInferred
	}
	return l.submit(ctx, item)
}

// workItem is the work for a parsed session; the caller says where it is.
func (l *Locator) workItem(s *recording.Session, origin string) WorkItem {
	return WorkItem{
		SessionKey: s.Key, RoomID: s.RoomID, RoomName: s.RoomName, JobID: s.JobID,
		CloseReason: s.CloseReason, CloseReasonSource: s.CloseReasonSource,
		Origin: origin, Problems: s.Problems, LocatedAt: l.now().UTC(),
	}
}

func (l *Locator) readHeader(ctx context.Context, dir string) (*recording.Session, error) {
	s, err := recording.LoadHeader(ctx, l.store, dir, l.lim)
	if errors.Is(err, recording.ErrNotFound) {
		return nil, errNotYet
	}
	return s, err // parse errors and limits are permanent (isPermanent)
}

func (l *Locator) location(dir string) string {
	if w, ok := l.store.(recordingWriter); ok {
		return w.Location(dir)
	}
	return dir
}

// submit publishes a work item with the session key as Nats-Msg-Id: the
// stream drops the second of two locators' copies.
func (l *Locator) submit(ctx context.Context, item WorkItem) error {
	data, err := json.Marshal(item)
	if err != nil {
		return permanent(err)
	}
	msg := nats.NewMsg(l.subjects.Session(item.CloseReason))
	msg.Data = data
	msg.Header.Set(HeaderSessionKey, item.SessionKey)
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
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
