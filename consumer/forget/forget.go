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

	"github.com/lkscore/lkscore/consumer/broker"
	"github.com/lkscore/lkscore/consumer/internal/facts"
	"github.com/lkscore/lkscore/consumer/internal/factstore"
	"github.com/lkscore/lkscore/consumer/internal/forward"
	"github.com/lkscore/lkscore/consumer/internal/ingest"
	"github.com/lkscore/lkscore/consumer/internal/spool"
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
	store.Writer // the spool's entries that name other sessions too are written again
}

// Place is one place lkscore keeps data: a stream, a key space of a
// bucket, a prefix of the recording store, a path of the data dir, or the
// running processes' memory. Holds says what of a session it keeps ("":
// nothing of any session, and Why says so).
type Place struct {
	Kind  string `json:"kind"` // stream, keys, store, dir, memory
	Name  string `json:"name"` // e.g. LKSCORE_RESULTS, LKSCORE_REGRESSION b.>, lkscore-spool/
	Holds string `json:"holds,omitempty"`
	Why   string `json:"why,omitempty"`
}

// place is a Place and how forget erases the session there (nil: nothing
// to erase).
type place struct {
	Place
	forget func() Step
}

// Places is every place lkscore keeps data, the one list `lkscore forget`
// walks (docs/security.md, "Forget"): a part that starts keeping data
// somewhere adds it here, or TestEveryPlaceListed fails.
func Places(s wire.Subjects) []Place {
	var out []Place
	for _, p := range plan(context.Background(), nil, s, nil, recording.Layout{}, 0, "", "", "") {
		out = append(out, p.Place)
	}
	return out
}

// Run erases one session everywhere lkscore keeps it (Places): stream and
// bucket messages with JetStream's secure delete where JetStream allows
// it (the bytes are overwritten in the store's files, on every replica),
// entries that name it among others rewritten without it, its objects in
// the recording store deleted; it asks running dashboards to drop it. It
// reports each place, with what it could not erase. requestTimeout (config
// nats.request_timeout) bounds each KV request and each wait for a
// stream's next message.
func Run(ctx context.Context, js jetstream.JetStream, s wire.Subjects, st forgetStore, layout recording.Layout, requestTimeout time.Duration,
	sessionKey string) []Step {
	room, job, err := wire.ParseSessionKey(sessionKey)
	if err != nil {
		return []Step{{Place: "session key", Err: err.Error()}}
	}
	var steps []Step
	for _, p := range plan(ctx, js, s, st, layout, requestTimeout, sessionKey, room, job) {
		if p.forget != nil {
			steps = append(steps, p.forget())
		}
	}
	return append(steps, Step{Place: "deduplication", Note: "the streams remember the session key for " +
		"pipeline.dedup_window: a re-upload of this session within it is dropped as a duplicate, after it the session " +
		"would be scored again; streams drop their copies at nats.max_age and retention.results anyway"})
}

// plan is every place and how the session is erased there, in order: the
// upload first (its facts say where it is), the facts last of the buckets.
func plan(ctx context.Context, js jetstream.JetStream, s wire.Subjects, st forgetStore, layout recording.Layout, wait time.Duration,
	sessionKey, room, job string) []place {
	factsJob := recording.FactsJobID(job)
	byKey := func(m jetstream.Msg) bool { return m.Headers().Get(wire.HeaderSessionKey) == sessionKey }
	stream := func(name, holds string, subjects func() []string, match func(jetstream.Msg) bool) place {
		return place{Place{Kind: "stream", Name: name, Holds: holds}, func() Step { return forgetIn(ctx, js, name, subjects(), wait, match) }}
	}
	none := func() []string { return nil }
	events := func() []string {
		return []string{s.Webhook("agent_job_started"), s.Webhook("agent_job_ended"), s.Webhook("participant_left"),
			s.Webhook("participant_connection_aborted")}
	}
	reg := s.RegressionBucket()
	return []place{
		{Place{Kind: "store", Name: "{key_template}", Holds: "the upload: header, chat history, recording"}, func() Step {
			return forgetUpload(ctx, st, layout, recordingRef(ctx, js, s, wait, room, factsJob), room, job)
		}},
		stream(s.ResultStream(), "scorecards", none, byKey),
		stream(s.AgentResultStream(), "scorecards, by agent", none, byKey),
		stream(s.SessionStream(), "work items", none, byKey),
		stream(s.UploadStream(), "upload notices", none, byKey),
		stream(s.DLQStream(), "dead letters", none, byKey),
		{Place{Kind: "stream", Name: s.WebhookStream(), Holds: "the job's webhooks, the room's participant webhooks"}, func() Step {
			step := forgetIn(ctx, js, s.WebhookStream(), events(), wait, webhookOf(room, job))
			step.Note = "room_finished and egress_ended concern the whole room: stored without free text, kept until nats.max_age"
			return step
		}},
		stream(s.AlertStream(), "alerts that name it (as the one that changed the state, or among the worst)", none, alertNames(sessionKey)),
		{Place{Kind: "store", Name: forward.Prefix, Holds: "the tee's copies of its SDK requests"}, func() Step {
			return forgetForwardCopies(ctx, st, sessionKey)
		}},
		stream(s.ForwardStream(), "relay notices", none, func(m jetstream.Msg) bool {
			return slices.Contains(strings.Split(m.Headers().Get(wire.HeaderSessions), ","), sessionKey)
		}),
		{Place{Kind: "store", Name: spool.Prefix, Holds: "its facts from OTLP requests kept while NATS was down"}, func() Step {
			step := Step{Place: "recording store " + spool.Prefix}
			n, err := spool.Forget(ctx, st, room, factsJob)
			step.Removed = n
			if err != nil {
				step.Err = err.Error()
			}
			return step
		}},
		{Place{Kind: "keys", Name: reg + " " + regress.HistoryKeysFilter, Holds: "regression samples"}, func() Step {
			return forgetEntries[regress.History](ctx, js, reg, regress.HistoryKeysFilter, "regression samples", sessionKey)
		}},
		{Place{Kind: "keys", Name: reg + " " + regress.ThresholdWindowsFilter, Holds: "threshold windows' entries"}, func() Step {
			return forgetEntries[regress.Window](ctx, js, reg, regress.ThresholdWindowsFilter, "threshold windows", sessionKey)
		}},
		{Place{Kind: "keys", Name: reg + " " + regress.AlertStatesFilter, Holds: "alert states' session references"}, func() Step {
			return forgetEntries[regress.AlertState](ctx, js, reg, regress.AlertStatesFilter, "alert states", sessionKey)
		}},
		{Place{Kind: "keys", Name: reg + " " + regress.BaselineKeysFilter, Holds: "sealed baselines' samples"}, func() Step {
			return forgetBaselines(ctx, js, reg, sessionKey)
		}},
		{Place{Kind: "keys", Name: s.EgressLinks() + " >", Holds: "its room's egress files (room_id.egress_id)"}, func() Step {
			return purgeKeys(ctx, js, s.EgressLinks(), facts.RoomFilter(room))
		}},
		{Place{Kind: "keys", Name: s.RedactedRooms() + " >", Holds: "its room's id, when a signal said it is redacted"}, func() Step {
			return purgeKeys(ctx, js, s.RedactedRooms(), wire.Token(room))
		}},
		{Place{Kind: "keys", Name: s.SessionFacts() + " >", Holds: "its facts"}, func() Step {
			return purgeKeys(ctx, js, s.SessionFacts(), facts.Key(room, factsJob))
		}},
		{Place: Place{Kind: "keys", Name: reg + " i.>", Why: "an agent's versions under a scoring version"}},
		{Place: Place{Kind: "keys", Name: s.ScoringBucket() + " >", Why: "scoring configs by scoring version (lkscore rescore)"}},
		{Place{Kind: "memory", Name: "dashboards", Holds: "their indexes"}, func() Step {
			return forgetInDashboards(ctx, js.Conn(), s.Forget(), sessionKey)
		}},
		{Place: Place{Kind: "store", Name: ".staging/", Holds: "uploads being received: one in flight is stored after forget " +
			"(forget again); an abandoned one is removed at the next start"}},
		{Place: Place{Kind: "store", Name: ".lkscore-store-id", Why: "the store's identity"}},
		{Place: Place{Kind: "dir", Name: "recordings", Holds: "the local recording store (the store places above)"}},
		{Place: Place{Kind: "dir", Name: "nats", Holds: "the embedded server's JetStream store (the streams and buckets above)"}},
		{Place: Place{Kind: "dir", Name: broker.TokenFile, Why: "the embedded server's client token"}},
		{Place: Place{Kind: "dir", Name: "lkscore.lock", Why: "the data dir's lock"}},
	}
}

// recordingRef is where the session's facts say its upload is (nil when
// unknown).
func recordingRef(ctx context.Context, js jetstream.JetStream, s wire.Subjects, wait time.Duration, room, factsJob string) *facts.RecordingRef {
	kv, err := js.KeyValue(ctx, s.SessionFacts())
	if err != nil {
		return nil
	}
	if f, _, err := factstore.New(kv, wait, time.Now).Get(ctx, facts.Key(room, factsJob)); err == nil {
		return f.Recording
	}
	return nil
}

// forgetForwardCopies deletes the tee's copies of the session's SDK
// requests waiting for their relay (forward.targets).
func forgetForwardCopies(ctx context.Context, st forgetStore, sessionKey string) Step {
	step := Step{Place: "recording store " + forward.Prefix}
	if n, err := forward.Forget(ctx, st, sessionKey); err != nil {
		step.Err = err.Error()
	} else {
		step.Removed = n
	}
	if v, ok := st.(versionedStore); ok {
		if status, verr := v.Versioning(ctx); verr == nil && status != "" {
			step.Note = "the bucket's versioning is " + status + ": earlier versions of copies already relayed (deleted then) " +
				"are not searched; expire them with a lifecycle rule (NoncurrentVersionExpiration) on " + forward.Prefix
		}
	}
	return step
}

// alertNames matches the alerts that name the session.
func alertNames(sessionKey string) func(jetstream.Msg) bool {
	return func(m jetstream.Msg) bool {
		if !bytes.Contains(m.Data(), []byte(sessionKey)) {
			return false
		}
		var a wire.Alert
		return json.Unmarshal(m.Data(), &a) == nil && a.Forget(sessionKey)
	}
}

// purgeKeys purges the bucket's keys matching filter (one key, or a
// room's). A key-value bucket's stream denies message deletes, so they are
// purged, not erased: docs/security.md says what they hold.
func purgeKeys(ctx context.Context, js jetstream.JetStream, bucket, filter string) Step {
	step := Step{Place: "bucket " + bucket, Note: kvPurgeNote}
	kv, err := js.KeyValue(ctx, bucket)
	if errors.Is(err, jetstream.ErrBucketNotFound) {
		step.Note = "no such bucket"
		return step
	}
	if err != nil {
		step.Err = err.Error()
		return step
	}
	keys := []string{filter}
	if _, err := kv.Get(ctx, filter); errors.Is(err, jetstream.ErrKeyNotFound) {
		keys = nil // a purge would write a marker naming it
	}
	if strings.ContainsAny(filter, "*>") {
		lister, err := kv.ListKeysFiltered(ctx, filter)
		if err != nil {
			step.Err = err.Error()
			return step
		}
		keys = keys[:0]
		for k := range lister.Keys() {
			keys = append(keys, k)
		}
	}
	for _, k := range keys {
		if err := kv.Purge(ctx, k); err != nil && !errors.Is(err, jetstream.ErrKeyNotFound) {
			step.Err = err.Error()
			return step
		}
		step.Removed++
	}
	return step
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

// forgetEntries rewrites without the session every entry of the bucket
// under filter that names it (histories, threshold windows, alert states).
func forgetEntries[T any, P interface {
	*T
	Remove(session string) bool
}](ctx context.Context, js jetstream.JetStream, bucket, filter, what, sessionKey string) Step {
	step := Step{Place: "bucket " + bucket + " (" + what + ")"}
	kv, keys, err := bucketKeys(ctx, js, bucket, filter)
	if kv == nil {
		step.Note, step.Err = "regression detection has not run", err
		return step
	}
	var errs []error
	for _, key := range keys {
		removed, _, err := forgetSample[T, P](ctx, kv, key, sessionKey)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", key, err))
		}
		step.Removed += removed
	}
	if err := errors.Join(errs...); err != nil {
		step.Err = err.Error()
	}
	step.Note = "rewritten without the session; " + kvPurgeNote
	return step
}

// forgetBaselines takes the session out of every sealed baseline and
// seals it again: its statistics are computed from the samples left, its
// id changes, and the step names each baseline that changed.
func forgetBaselines(ctx context.Context, js jetstream.JetStream, bucket, sessionKey string) Step {
	step := Step{Place: "bucket " + bucket + " (sealed baselines)"}
	kv, keys, err := bucketKeys(ctx, js, bucket, regress.BaselineKeysFilter)
	if kv == nil {
		step.Note, step.Err = "no baseline sealed", err
		return step
	}
	var changed []string
	var errs []error
	for _, key := range keys {
		removed, b, err := forgetSample[regress.Baseline](ctx, kv, key, sessionKey)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", key, err))
		}
		if removed > 0 {
			changed = append(changed, fmt.Sprintf("agent %s scoring %s (%d sessions left, now %s)", b.Agent, b.ScoringVersion, len(b.Samples), b.ID))
		}
		step.Removed += removed
	}
	if err := errors.Join(errs...); err != nil {
		step.Err = err.Error()
	}
	step.Note = "no sealed baseline named the session"
	if len(changed) > 0 {
		step.Note = "sealed again without the session, statistics recomputed: " + strings.Join(changed, "; ") +
			"; files exported before hold it still (export again)"
	}
	return step
}

// bucketKeys opens a bucket and lists its keys under filter; a nil
// bucket with an empty error means it does not exist.
func bucketKeys(ctx context.Context, js jetstream.JetStream, bucket, filter string) (jetstream.KeyValue, []string, string) {
	kv, err := js.KeyValue(ctx, bucket)
	if errors.Is(err, jetstream.ErrBucketNotFound) {
		return nil, nil, ""
	}
	if err != nil {
		return nil, nil, err.Error()
	}
	lister, err := kv.ListKeysFiltered(ctx, filter)
	if err != nil {
		return nil, nil, err.Error()
	}
	var keys []string
	for k := range lister.Keys() {
		keys = append(keys, k)
	}
	return kv, keys, ""
}

// forgetSample rewrites one entry (a history, a threshold window, an
// alert state, a baseline) without the session, and returns it.
func forgetSample[T any, P interface {
	*T
	Remove(session string) bool
}](ctx context.Context, kv jetstream.KeyValue, key, sessionKey string) (int, T, error) {
	var h T
	for attempt := 0; attempt < 3; attempt++ {
		e, err := kv.Get(ctx, key)
		if errors.Is(err, jetstream.ErrKeyNotFound) {
			return 0, h, nil
		}
		if err != nil {
			return 0, h, err
		}
		h = *new(T)
		if err := json.Unmarshal(e.Value(), &h); err != nil {
			return 0, h, fmt.Errorf("entry: %w", err)
		}
		if !P(&h).Remove(sessionKey) {
			return 0, h, nil
		}
		data, err := json.Marshal(&h)
		if err != nil {
			return 0, h, err
		}
		if _, err := kv.Update(ctx, key, data, e.Revision()); err == nil {
			return 1, h, nil
		} else if !errors.Is(err, jetstream.ErrKeyExists) { // a detector wrote meanwhile: read it again
			return 0, h, err
		}
	}
	return 0, h, errors.New("the entry kept changing; run forget again")
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
