package consumer

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/livekit/protocol/livekit"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/lkscore/lkscore/consumer/internal/facts"
	"github.com/lkscore/lkscore/consumer/internal/ingest"
	"github.com/lkscore/lkscore/consumer/wire"
	"github.com/lkscore/lkscore/recording"
	"github.com/lkscore/lkscore/store"
)

// ForgetStep is one place `lkscore forget` looked in.
type ForgetStep struct {
	Place   string `json:"place"`
	Removed int    `json:"removed"`
	Note    string `json:"note,omitempty"`
	Err     string `json:"error,omitempty"`
}

// forgetStore is what forgetting needs from the recording store.
type forgetStore interface {
	store.Lister
	store.Deleter
}

// Forget removes one session everywhere lkscore keeps it: its stored
// objects, its facts, its scorecards, work items, upload notices, dead
// letters and agent_job_ended webhooks. It reports each place, with what it
// could not remove.
// requestTimeout (config nats.request_timeout) bounds each KV request and
// each wait for a stream's next message.
func Forget(ctx context.Context, js jetstream.JetStream, s wire.Subjects, st forgetStore, layout recording.Layout, requestTimeout time.Duration,
	sessionKey string) []ForgetStep {
	room, job, ok := strings.Cut(sessionKey, "/")
	if !ok || room == "" || job == "" {
		return []ForgetStep{{Place: "session key", Err: fmt.Sprintf("%q is not room_id/job_id", sessionKey)}}
	}
	factsJob := recording.FactsJobID(job)
	var steps []ForgetStep
	var ref *wire.RecordingRef
	kv, err := js.KeyValue(ctx, s.SessionFacts())
	fkey := wire.FactsKey(room, factsJob)
	if err == nil {
		fs := facts.NewStore(kv, requestTimeout, time.Now)
		if f, _, gerr := fs.Get(ctx, fkey); gerr == nil {
			ref = f.Recording
		}
	}

	steps = append(steps, forgetUpload(ctx, st, layout, ref, room, job))

	// The facts.
	step := ForgetStep{Place: "session facts (" + s.SessionFacts() + ")"}
	if err != nil {
		step.Err = err.Error()
	} else if perr := kv.Purge(ctx, fkey); perr != nil && !errors.Is(perr, jetstream.ErrKeyNotFound) {
		step.Err = perr.Error()
	} else {
		step.Removed = 1
	}
	steps = append(steps, step)

	// Messages keyed by the session.
	byKey := func(m jetstream.Msg) bool { return m.Headers().Get(wire.HeaderSessionKey) == sessionKey }
	for _, stream := range []string{s.ResultStream(), s.SessionStream(), s.UploadStream(), s.DLQStream()} {
		steps = append(steps, forgetIn(ctx, js, stream, requestTimeout, byKey))
	}
	// agent_job_ended webhooks of the job (room events concern the whole room and stay).
	step = forgetIn(ctx, js, s.WebhookStream(), requestTimeout, jobEndedOf(s, job))
	step.Note = "room_finished and egress_ended events concern the whole room and are kept until nats.max_age"
	steps = append(steps, step)
	steps = append(steps, ForgetStep{Place: "deduplication", Note: "the streams remember the session key for " +
		"pipeline.dedup_window: a re-upload of this session within it is dropped as a duplicate, after it the session " +
		"would be scored again; streams drop their copies at nats.max_age and retention.results anyway"})
	return steps
}

// forgetUpload deletes the session's stored upload: where its facts say it
// is (ref, nil when unknown), else the layout's directory for it.
func forgetUpload(ctx context.Context, st forgetStore, layout recording.Layout, ref *wire.RecordingRef, room, job string) ForgetStep {
	dir := layout.Dir(recording.Vars{RoomID: room, JobID: job})
	step := ForgetStep{Place: "recording store"}
	switch {
	case ref != nil && ref.Object != "" && ref.Bucket != "":
		step.Note = fmt.Sprintf("s3://%s/%s is an egress file in another bucket: lkscore does not delete it", ref.Bucket, ref.Object)
	case ref != nil && ref.Object != "":
		if derr := st.Delete(ctx, ref.Object); derr != nil {
			step.Err = derr.Error()
		} else {
			step.Removed++
		}
	default:
		if ref != nil && ref.Dir != "" {
			dir = ref.Dir
		}
		objs, lerr := st.List(ctx, dir)
		if lerr != nil {
			step.Err = lerr.Error()
		}
		for _, o := range objs {
			if derr := st.Delete(ctx, o.Key); derr != nil {
				step.Err = derr.Error()
				break
			}
			step.Removed++
		}
	}
	return step
}

// jobEndedOf matches the agent_job_ended webhooks of job.
func jobEndedOf(s wire.Subjects, job string) func(jetstream.Msg) bool {
	jobIDs := [][]byte{[]byte(`"id":"` + job + `"`), []byte(`"id": "` + job + `"`)}
	return func(m jetstream.Msg) bool {
		if m.Subject() != s.Webhook("agent_job_ended") {
			return false
		}
		for _, id := range jobIDs {
			if bytes.Contains(m.Data(), id) {
				var ev livekit.WebhookEvent
				return ingest.DecodeEvent(m.Data(), &ev) == nil && ev.GetJob().GetId() == job
			}
		}
		return false
	}
}

// forgetIn deletes the messages of a stream that match.
func forgetIn(ctx context.Context, js jetstream.JetStream, stream string, wait time.Duration, match func(jetstream.Msg) bool) ForgetStep {
	step := ForgetStep{Place: "stream " + stream}
	st, err := js.Stream(ctx, stream)
	if err != nil {
		step.Err = err.Error()
		return step
	}
	info, err := st.Info(ctx)
	if err != nil || info.State.Msgs == 0 {
		if err != nil {
			step.Err = err.Error()
		}
		return step
	}
	cons, err := js.OrderedConsumer(ctx, stream, jetstream.OrderedConsumerConfig{})
	if err != nil {
		step.Err = err.Error()
		return step
	}
	for {
		m, err := cons.Next(jetstream.FetchMaxWait(wait))
		if err != nil {
			break
		}
		meta, err := m.Metadata()
		if err != nil {
			continue
		}
		if match(m) {
			if derr := st.DeleteMsg(ctx, meta.Sequence.Stream); derr != nil {
				step.Err = derr.Error()
			} else {
				step.Removed++
			}
		}
		if meta.NumPending == 0 {
			break
		}
	}
	return step
}
