// Package forget erases one session everywhere lkscore keeps it
// (`lkscore forget`, docs/security.md): the recording store, the facts
// bucket, every stream's messages of the session (secure delete), the
// tee's copies, the regression samples and the running dashboards' indexes.
// It owns no data of its own: it knows where every other part keeps a
// session, so a part that starts keeping one must add its place here (and
// to TestForgetForgets). It must not import the daemon's assembly
// (consumer): the CLI calls Run with a JetStream handle and a store.
package forget

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/livekit/protocol/livekit"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/lkscore/lkscore/consumer/internal/facts"
	"github.com/lkscore/lkscore/consumer/internal/factstore"
	"github.com/lkscore/lkscore/consumer/internal/forward"
	"github.com/lkscore/lkscore/consumer/internal/ingest"
	"github.com/lkscore/lkscore/recording"
	"github.com/lkscore/lkscore/regress"
	"github.com/lkscore/lkscore/store"
	"github.com/lkscore/lkscore/wire"
)

// Step is one place `lkscore forget` looked in.
type Step struct {
	Place   string `json:"place"`
	Removed int    `json:"removed"`
	Note    string `json:"note,omitempty"`
	Err     string `json:"error,omitempty"`
}

// forgetStore is what forgetting needs from the recording store.
type forgetStore interface {
	recording.ObjectReader
	store.Lister
	store.Deleter
}

// Run erases one session everywhere lkscore keeps it: its stored
// objects, its facts, its scorecards, work items, upload notices, dead
// letters, its job's and its room's participant webhooks, and its
// regression samples; and it asks running dashboards to drop it. Stream and
// bucket messages are erased with JetStream's secure delete (the bytes are
// overwritten in the store's files, on every replica). It reports each
// place, with what it could not erase.
// requestTimeout (config nats.request_timeout) bounds each KV request and
// each wait for a stream's next message.
func Run(ctx context.Context, js jetstream.JetStream, s wire.Subjects, st forgetStore, layout recording.Layout, requestTimeout time.Duration,
	sessionKey string) []Step {
	room, job, err := wire.ParseSessionKey(sessionKey)
	if err != nil {
		return []Step{{Place: "session key", Err: err.Error()}}
	}
	factsJob := recording.FactsJobID(job)
	var steps []Step
	var ref *facts.RecordingRef
	kv, err := js.KeyValue(ctx, s.SessionFacts())
	fkey := facts.Key(room, factsJob)
	if err == nil {
		fs := factstore.New(kv, requestTimeout, time.Now)
		if f, _, gerr := fs.Get(ctx, fkey); gerr == nil {
			ref = f.Recording
		}
	}

	steps = append(steps, forgetUpload(ctx, st, layout, ref, room, job))

	// The facts. A key-value bucket's stream denies message deletes, so
	// they are purged, not erased: docs/security.md says what they hold.
	step := Step{Place: "bucket " + s.SessionFacts(), Note: kvPurgeNote}
	if errors.Is(err, jetstream.ErrBucketNotFound) {
		step.Note = "no such bucket"
	} else if err != nil {
		step.Err = err.Error()
	} else if perr := kv.Purge(ctx, fkey); perr != nil && !errors.Is(perr, jetstream.ErrKeyNotFound) {
		step.Err = perr.Error()
	} else {
		step.Removed = 1
	}
	steps = append(steps, step)

	// Messages keyed by the session.
	byKey := func(m jetstream.Msg) bool { return m.Headers().Get(wire.HeaderSessionKey) == sessionKey }
	for _, stream := range []string{s.ResultStream(), s.AgentResultStream(), s.SessionStream(), s.UploadStream(), s.DLQStream()} {
		steps = append(steps, forgetIn(ctx, js, stream, nil, requestTimeout, byKey))
	}
	// The job's webhooks and the room's participant webhooks (a caller's
	// identity, as its hash). room_finished and egress_ended concern the
	// whole room: they are stored without free text and kept until
	// nats.max_age.
	events := []string{s.Webhook("agent_job_started"), s.Webhook("agent_job_ended"), s.Webhook("participant_left"),
		s.Webhook("participant_connection_aborted")}
	step = forgetIn(ctx, js, s.WebhookStream(), events, requestTimeout, webhookOf(room, job))
	step.Note = "room_finished and egress_ended concern the whole room: stored without free text, kept until nats.max_age"
	steps = append(steps, step)
	// The tee's copies of the session's SDK requests waiting for their
	// relay (forward.targets), and their notices.
	fstep := Step{Place: "recording store " + forward.Prefix}
	if n, ferr := forward.Forget(ctx, st, sessionKey); ferr != nil {
		fstep.Err = ferr.Error()
	} else {
		fstep.Removed = n
	}
	if v, ok := st.(versionedStore); ok {
		if status, verr := v.Versioning(ctx); verr == nil && status != "" {
			fstep.Note = "the bucket's versioning is " + status + ": earlier versions of copies already relayed (deleted then) " +
				"are not searched; expire them with a lifecycle rule (NoncurrentVersionExpiration) on " + forward.Prefix
		}
	}
	steps = append(steps, fstep)
	steps = append(steps, forgetIn(ctx, js, s.ForwardStream(), nil, requestTimeout, func(m jetstream.Msg) bool {
		return slices.Contains(strings.Split(m.Headers().Get(wire.HeaderSessions), ","), sessionKey)
	}))
	steps = append(steps, forgetSamples(ctx, js, s.RegressionBucket(), sessionKey, requestTimeout))
	steps = append(steps, forgetInDashboards(ctx, js.Conn(), s.Forget(), sessionKey))
	steps = append(steps, Step{Place: "deduplication", Note: "the streams remember the session key for " +
		"pipeline.dedup_window: a re-upload of this session within it is dropped as a duplicate, after it the session " +
		"would be scored again; streams drop their copies at nats.max_age and retention.results anyway"})
	return steps
}

// forgetUpload deletes the session's stored upload: where its facts say it
// is (ref, nil when unknown), else the layout's directory for it.
func forgetUpload(ctx context.Context, st interface {
	store.Lister
	store.Deleter
}, layout recording.Layout, ref *facts.RecordingRef, room, job string) Step {
	dir := layout.Dir(recording.Vars{RoomID: room, JobID: job})
	step := Step{Place: "recording store"}
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
	if step.Err == "" {
		if ref != nil && ref.Object != "" && ref.Bucket == "" {
			purgeVersions(ctx, st, ref.Object, true, &step)
		} else if ref == nil || ref.Object == "" {
			purgeVersions(ctx, st, strings.TrimSuffix(dir, "/")+"/", false, &step)
		}
	}
	return step
}

// versionedStore is a store whose bucket may keep versions (S3).
type versionedStore interface {
	Versioning(context.Context) (string, error)
	DeleteVersions(ctx context.Context, prefix string, exact bool) (int, []store.VersionsLeft, error)
}

// purgeVersions deletes, in a bucket with versioning, every version and
// delete marker under prefix (the key itself when exact): a plain delete
// there only adds a marker and keeps the bytes. What it could not delete is
// named in the step's error, version by version.
func purgeVersions(ctx context.Context, st any, prefix string, exact bool, step *Step) {
	v, ok := st.(versionedStore)
	if !ok {
		return
	}
	status, err := v.Versioning(ctx)
	switch {
	case err != nil:
		step.Err = "could not tell whether the bucket keeps older versions of deleted objects: " + err.Error()
		return
	case status == "":
		return
	}
	n, left, err := v.DeleteVersions(ctx, prefix, exact)
	note := fmt.Sprintf("the bucket's versioning is %s: %d versions and delete markers deleted by version id", status, n)
	step.Note = strings.TrimSpace(step.Note + " " + note)
	if err != nil {
		step.Err = "versions not listed, some may remain: " + err.Error()
		return
	}
	if len(left) > 0 {
		var b strings.Builder
		fmt.Fprintf(&b, "%d versions left:", len(left))
		for _, l := range left {
			fmt.Fprintf(&b, " %s (version %s): %s;", l.Key, l.VersionID, l.Err)
		}
		step.Err = strings.TrimSuffix(b.String(), ";")
	}
}

// webhookOf matches the session's webhooks: its job's events and its
// room's participant events.
func webhookOf(room, job string) func(jetstream.Msg) bool {
	return func(m jetstream.Msg) bool {
		if !bytes.Contains(m.Data(), []byte(job)) && !bytes.Contains(m.Data(), []byte(room)) {
			return false
		}
		var ev livekit.WebhookEvent
		if ingest.DecodeEvent(m.Data(), &ev) != nil {
			return false
		}
		if ev.GetJob() != nil {
			return ev.GetJob().GetId() == job
		}
		return ev.GetParticipant() != nil && ev.GetRoom().GetSid() == room
	}
}

// forgetIn erases the messages of a stream (on subjects, nil for all) that
// match, with secure delete.
func forgetIn(ctx context.Context, js jetstream.JetStream, stream string, subjects []string, wait time.Duration,
	match func(jetstream.Msg) bool) Step {
	step := Step{Place: "stream " + stream}
	st, err := js.Stream(ctx, stream)
	if errors.Is(err, jetstream.ErrStreamNotFound) {
		step.Note = "no such stream"
		return step
	}
	if err != nil {
		step.Err = err.Error()
		return step
	}
	n, err := eraseMatching(ctx, js, st, subjects, wait, match)
	step.Removed = n
	if err != nil {
		step.Err = err.Error()
	}
	if info := st.CachedInfo(); info != nil && info.Config.Replicas > 1 {
		step.Note = fmt.Sprintf("erased on its %d replicas; a node that was down meanwhile erases when it catches up; each node's "+
			"Raft log keeps the bytes until the stream's next snapshot (nats-server takes one every 2-3 minutes)", info.Config.Replicas)
	}
	return step
}

// eraseMatching securely deletes the stream's messages that match.
func eraseMatching(ctx context.Context, js jetstream.JetStream, st jetstream.Stream, subjects []string, wait time.Duration,
	match func(jetstream.Msg) bool) (int, error) {
	info, err := st.Info(ctx)
	if err != nil || info.State.Msgs == 0 {
		return 0, err
	}
	if len(subjects) > 0 { // skip a wait for messages that are not there
		held := 0
		for _, subj := range subjects {
			si, err := st.Info(ctx, jetstream.WithSubjectFilter(subj))
			if err != nil {
				return 0, err
			}
			held += len(si.State.Subjects)
		}
		if held == 0 {
			return 0, nil
		}
	}
	cons, err := js.OrderedConsumer(ctx, info.Config.Name, jetstream.OrderedConsumerConfig{FilterSubjects: subjects})
	if err != nil {
		return 0, err
	}
	removed := 0
	var errs []error
	for {
		m, err := cons.Next(jetstream.FetchMaxWait(wait))
		if err != nil {
			break // nothing more within wait
		}
		meta, err := m.Metadata()
		if err != nil {
			continue
		}
		if match(m) {
			if derr := st.SecureDeleteMsg(ctx, meta.Sequence.Stream); derr != nil && !errors.Is(derr, jetstream.ErrMsgNotFound) {
				errs = append(errs, fmt.Errorf("seq %d: %w", meta.Sequence.Stream, derr))
			} else {
				removed++
			}
		}
		if meta.NumPending == 0 {
			break
		}
	}
	return removed, errors.Join(errs...)
}

// kvPurgeNote is what forget cannot do in a key-value bucket.
const kvPurgeNote = "purged: JetStream lets no message of a key-value bucket be securely erased, so the bytes of its old " +
	"revisions stay in the store's files until their block is compacted or expires; the bucket holds no free text"

// forgetSamples removes the session's samples from every regression history
// that holds one.
func forgetSamples(ctx context.Context, js jetstream.JetStream, bucket, sessionKey string, wait time.Duration) Step {
	step := Step{Place: "bucket " + bucket + " (regression samples)"}
	kv, err := js.KeyValue(ctx, bucket)
	if errors.Is(err, jetstream.ErrBucketNotFound) {
		step.Note = "regression detection has not run"
		return step
	}
	if err != nil {
		step.Err = err.Error()
		return step
	}
	keys, err := kv.ListKeysFiltered(ctx, regress.HistoryKeysFilter)
	if err != nil {
		step.Err = err.Error()
		return step
	}
	var errs []error
	for key := range keys.Keys() {
		removed, err := forgetSample[regress.History](ctx, kv, key, sessionKey)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", key, err))
		}
		step.Removed += removed
	}
	// The threshold windows (regression.thresholds) name sessions too.
	windows, err := kv.ListKeysFiltered(ctx, regress.ThresholdWindowsFilter)
	if err != nil {
		errs = append(errs, err)
	} else {
		for key := range windows.Keys() {
			removed, err := forgetSample[regress.Window](ctx, kv, key, sessionKey)
			if err != nil {
				errs = append(errs, fmt.Errorf("%s: %w", key, err))
			}
			step.Removed += removed
		}
	}
	if err := errors.Join(errs...); err != nil {
		step.Err = err.Error()
	}
	step.Note = "the histories and threshold windows are rewritten without the session; " + kvPurgeNote
	return step
}

// forgetSample takes the session's samples out of one history.
// forgetSample rewrites one entry (a history or a threshold window)
// without the session.
func forgetSample[T any, P interface {
	*T
	Remove(session string) bool
}](ctx context.Context, kv jetstream.KeyValue, key, sessionKey string) (int, error) {
	for attempt := 0; attempt < 3; attempt++ {
		e, err := kv.Get(ctx, key)
		if errors.Is(err, jetstream.ErrKeyNotFound) {
			return 0, nil
		}
		if err != nil {
			return 0, err
		}
		var h T
		if err := json.Unmarshal(e.Value(), &h); err != nil {
			return 0, fmt.Errorf("entry: %w", err)
		}
		if !P(&h).Remove(sessionKey) {
			return 0, nil
		}
		data, err := json.Marshal(&h)
		if err != nil {
			return 0, err
		}
		if _, err := kv.Update(ctx, key, data, e.Revision()); err == nil {
			return 1, nil
		} else if !errors.Is(err, jetstream.ErrKeyExists) { // a detector wrote meanwhile: read it again
			return 0, err
		}
	}
	return 0, errors.New("the entry kept changing; run forget again")
}

// forgetInDashboards asks every running dashboard to drop the session from
// its index, and counts those that answered.
func forgetInDashboards(ctx context.Context, nc *nats.Conn, subject, sessionKey string) Step {
	step := Step{Place: "running dashboards"}
	inbox := nc.NewRespInbox()
	sub, err := nc.SubscribeSync(inbox)
	if err != nil {
		step.Err = err.Error()
		return step
	}
	defer func() { _ = sub.Unsubscribe() }()
	if err := nc.PublishRequest(subject, inbox, []byte(sessionKey)); err != nil {
		step.Err = err.Error()
		return step
	}
	answered := 0
	ctx, cancel := context.WithTimeout(ctx, dashboardAnswerWait)
	defer cancel()
	for {
		m, err := sub.NextMsgWithContext(ctx)
		if err != nil {
			break // the wait is over
		}
		answered++
		n, _ := strconv.Atoi(string(m.Data))
		step.Removed += n
	}
	step.Note = fmt.Sprintf("%d running dashboards answered; one that was not running reads the streams afresh", answered)
	return step
}

// dashboardAnswerWait is how long forget collects dashboards' answers.
const dashboardAnswerWait = time.Second
