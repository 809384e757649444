package settle

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/lkscore/lkscore/config"
	"github.com/lkscore/lkscore/consumer/broker"
	"github.com/lkscore/lkscore/consumer/internal/facts"
	"github.com/lkscore/lkscore/consumer/internal/factstore"
	"github.com/lkscore/lkscore/consumer/internal/metrics"
	"github.com/lkscore/lkscore/consumer/internal/seen"
	"github.com/lkscore/lkscore/consumer/internal/work"
	"github.com/lkscore/lkscore/internal/retrylog"
	"github.com/lkscore/lkscore/scoring"
	"github.com/lkscore/lkscore/wire"
)

// LowWaterKey holds the settlers' low-water mark in the facts bucket:
// a revision below which every entry is published or has no recording.
const LowWaterKey = facts.InternalKeyPrefix + "settler_low_water"

// Settler publishes session work once a session's facts are settled: at
// once when they are complete (recording stored, job ended, close reason
// named outright), RoomSettle after the last signal once the room has
// finished, else when the settle window has passed since the last signal.
// It watches the facts bucket, so it sees every signal whoever wrote it;
// every worker replica runs one, and the session stream's dedup on the
// session key keeps their publications to one. Once published, an entry is
// marked, so a restart or a late signal does not publish it again.
type Settler struct {
	broker.Env
	nc     *nats.Conn // nil in tests without reconnects
	facts  *factstore.Store
	window time.Duration
	tick   time.Duration
	// noReport is how long a session with spans and no recording waits for
	// one when no session report said whether one follows
	// (pipeline.recording_deadline).
	noReport time.Duration
	// roomFinishedWait is how long a session whose room is emptying waits
	// for room_finished (pipeline.room_finished_wait).
	roomFinishedWait time.Duration
	selected         map[string]bool // close reasons this deployment's pool scores
	metrics          *metrics.Pipeline

	// retries logs the publishing loop: the first failure, a summary a
	// minute, the recovery (with how long it failed).
	retries *retrylog.Log
	// mu guards pending, waiting and inflight: the watch loop and the publishers
	// share them.
	mu      sync.Mutex
	pending map[string]time.Time // facts key → when to publish at the latest
	// waiting are the sessions whose job ended with no recording yet (and
	// no spans to score instead), since when this settler saw them so.
	waiting  map[string]time.Time
	inflight map[string]time.Time // facts keys a publisher has now → since when each was ready
	// work feeds the publishers: sessions are published in parallel, at
	// most one publication per key at a time, so the watch never waits on
	// a round trip per session (docs/performance.md, "The settle step").
	work       chan publishJob
	publishers int
	// revs are the revisions of the entries this settler has yet to see
	// published (a recording and no published_at); lastRev is the highest
	// revision watched. They make the low-water mark (lowWater).
	revs      map[string]uint64
	lastRev   uint64
	savedLow  uint64    // the mark last stored
	lastSaved time.Time // when
	// watchedFrom is the revision the current watch started at (0: all).
	watchedFrom atomic.Uint64
}

// selectedReasons are the close reasons this deployment's pool scores.
func selectedReasons(cfg config.Pipeline) map[string]bool {
	selected := map[string]bool{}
	for _, r := range cfg.CloseReasons {
		selected[r] = true
	}
	return selected
}

// Options are what a Settler needs.
type Options struct {
	Facts *factstore.Store
	// Conn, when not nil, tells the settler of reconnects (it re-watches).
	Conn     *nats.Conn
	Metrics  *metrics.Pipeline
	Pipeline config.Pipeline // settle_window, recording_deadline, room_finished_wait, close_reasons
}

// New publishes the sessions of o.Facts as o.Pipeline says.
func New(env broker.Env, o Options) (*Settler, error) {
	if err := broker.Require("settler", map[string]bool{"js": env.JS == nil, "log": env.Log == nil, "now": env.Now == nil,
		"facts": o.Facts == nil, "metrics": o.Metrics == nil}); err != nil {
		return nil, err
	}
	cfg := o.Pipeline
	if cfg.SettleWindow <= 0 {
		return nil, errors.New("settler: pipeline.settle_window must be positive")
	}
	return &Settler{Env: env, nc: o.Conn, facts: o.Facts, window: cfg.SettleWindow, tick: min(250*time.Millisecond, cfg.SettleWindow),
		noReport: cfg.RecordingDeadline, roomFinishedWait: cfg.RoomFinishedWait, selected: selectedReasons(cfg), metrics: o.Metrics,
		publishers: settlePublishers, waiting: map[string]time.Time{}, retries: retrylog.New(env.Log, env.Now, 0)}, nil
}

// publishTarget names the settler's publishing in its retry log.
const publishTarget = "settler publish"

// publishJob is one session to publish: its entry when the caller has it
// fresh (f, rev; nil: read it again), and since when it was ready (its
// facts complete, or its settle window over) with the step that says which.
type publishJob struct {
	key   string
	f     *facts.SessionFacts
	rev   uint64
	ready time.Time
	step  string
}

// Steps of a session's wait, as lkscore_session_step_seconds names them.
const (
	stepReady = "ready_to_located" // facts complete → work published
	stepDue   = "due_to_located"   // settle window over → work published
)

// WatchedFrom is the revision the current watch started at (0: all).
func (s *Settler) WatchedFrom() uint64 { return s.watchedFrom.Load() }

// settlePublishers is how many sessions one settler publishes at once: each
// publication is two round trips (the work's PubAck, the mark's
// compare-and-set), and in line, under load, those waits stretched until
// the watch fell behind at 150 sessions/s while the CPU idled
// (docs/performance.md, "The settle step").
const settlePublishers = 16

// lowWaterEvery is how often a settler stores its mark.
const lowWaterEvery = 5 * time.Second

// Run watches the facts until ctx ends.
func (s *Settler) Run(ctx context.Context) {
	s.pending, s.revs, s.inflight = map[string]time.Time{}, map[string]uint64{}, map[string]time.Time{}
	s.work = make(chan publishJob)
	var publishers sync.WaitGroup
	for range max(s.publishers, 1) {
		publishers.Add(1)
		go func() {
			defer publishers.Done()
			s.publisher(ctx)
		}()
	}
	defer publishers.Wait()
	t := time.NewTicker(s.tick)
	defer t.Stop()
	from := s.loadLowWater(ctx)
	for ctx.Err() == nil {
		var opts []jetstream.WatchOpt
		if from > 0 {
			opts = append(opts, jetstream.ResumeFromRevision(from))
		}
		s.watchedFrom.Store(from)
		w, err := s.facts.Bucket().WatchAll(ctx, opts...)
		if err != nil {
			s.retries.Failed("settler watch", "settler: watch session facts", err)
			select {
			case <-ctx.Done():
				return
			case <-time.After(s.tick):
				continue
			}
		}
		s.retries.OK("settler watch", "settler: watch session facts works again")
		s.Log.Info("settler: watching session facts", "from_revision", from)
		s.watch(ctx, w, t.C)
		_ = w.Stop()
		from = s.lowWater() // after a reconnect: from what is still open
	}
}

// lowWaterKV is the stored mark: a decimal revision, JSON's encoding of it.
func (s *Settler) lowWaterKV() broker.KV[uint64] {
	return broker.KV[uint64]{Bucket: s.facts.Bucket(), Timeout: s.Timeouts.Request, Attempts: 3}
}

// loadLowWater reads the stored mark (0: none, replay everything).
func (s *Settler) loadLowWater(ctx context.Context) uint64 {
	v, _, err := s.lowWaterKV().Get(ctx, LowWaterKey)
	if err != nil {
		s.Log.Warn("settler: low-water mark not read; watching every session's facts", "err", err)
		return 0
	}
	s.savedLow = *v
	return *v
}

// lowWater is the revision below which this settler knows every entry to be
// published or without a recording.
func (s *Settler) lowWater() uint64 {
	low := s.lastRev + 1
	for _, r := range s.revs {
		low = min(low, r)
	}
	return max(low, s.savedLow)
}

// saveLowWater stores the mark when it moved, keeping the highest any
// replica stored.
func (s *Settler) saveLowWater(ctx context.Context) {
	if s.Now().Sub(s.lastSaved) < lowWaterEvery {
		return
	}
	s.lastSaved = s.Now()
	low := s.lowWater()
	if low <= s.savedLow {
		return
	}
	stored, _, err := s.lowWaterKV().Modify(ctx, LowWaterKey, nil, func(cur *uint64) bool {
		if *cur >= low {
			return false
		}
		*cur = low
		return true
	})
	if err == nil { // else tried again in lowWaterEvery
		s.savedLow = *stored.Value
	}
}

// watch follows one watcher. After a NATS reconnect it returns, so run
// starts a fresh watcher at once instead of waiting for the old one's
// missed heartbeats (about 10 s) to notice.
func (s *Settler) watch(ctx context.Context, w jetstream.KeyWatcher, tick <-chan time.Time) {
	reconnects := s.reconnects()
	for {
		select {
		case <-ctx.Done():
			return
		case e, ok := <-w.Updates():
			if !ok {
				return // the watcher ended; run starts another
			}
			if e != nil {
				s.consider(ctx, e)
			}
		case <-tick:
			if s.reconnects() != reconnects {
				s.Log.Info("settler: nats reconnected, watching the session facts again")
				return
			}
			s.publishDue(ctx)
			s.saveLowWater(ctx)
		}
	}
}

func (s *Settler) reconnects() uint64 {
	if s.nc == nil {
		return 0
	}
	return s.nc.Stats().Reconnects
}

// consider looks at one changed entry.
func (s *Settler) consider(ctx context.Context, e jetstream.KeyValueEntry) {
	key := e.Key()
	s.lastRev = max(s.lastRev, e.Revision())
	if facts.IsInternalKey(key) { // the low-water mark, the retention sweep's time
		return
	}
	s.facts.Observe(e)
	if e.Operation() != jetstream.KeyValuePut {
		s.setWaiting(key, false, time.Time{})
		s.setPending(key, time.Time{})
		delete(s.revs, key)
		return
	}
	var f facts.SessionFacts
	if err := factstore.Decode(e.Value(), &f); err != nil {
		s.Log.Error("settler: session facts are not valid JSON", "key", key, "err", err)
		s.setWaiting(key, false, time.Time{})
		s.setPending(key, time.Time{})
		delete(s.revs, key)
		return
	}
	scoreable := f.Recording != nil || SpansOnly(&f)
	s.setWaiting(key, f.PublishedAt == nil && f.Recording == nil && f.JobEnded && !SpansOnly(&f), e.Created())
	if f.PublishedAt != nil || !scoreable {
		delete(s.revs, key)
	} else {
		s.revs[key] = e.Revision()
	}
	switch {
	case f.PublishedAt != nil || !scoreable:
		s.setPending(key, time.Time{}) // done, or nothing to score yet
	case f.Recording == nil: // spans and logs only: no recording follows, or none came yet
		s.setPending(key, f.LastInputAt.Add(s.spansSettle(&f)))
	case Complete(&f):
		// The watch delivered the latest entry: no need to read it again.
		// Ready since this revision was written.
		s.dispatch(ctx, publishJob{key: key, f: &f, rev: e.Revision(), ready: e.Created(), step: stepReady})
	case RoomFinished(&f):
		s.setPending(key, f.LastInputAt.Add(min(RoomSettle, s.window)))
	case RoomEmptying(&f):
		// The room's webhooks are flowing and room_finished, with the
		// room's end reason, is on its way: wait for it a bounded time.
		s.setPending(key, f.LastInputAt.Add(max(s.window, s.roomFinishedWait)))
	default:
		s.setPending(key, f.LastInputAt.Add(s.window))
	}
}

// maxWaiting bounds the sessions kept as waiting for a recording: past it,
// new ones are not listed (the count of those listed stays exact).
const maxWaiting = 100_000

// setWaiting records whether key waits for its recording, since at (kept
// from the first time it was seen waiting).
func (s *Settler) setWaiting(key string, waiting bool, at time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !waiting {
		delete(s.waiting, key)
		return
	}
	if _, ok := s.waiting[key]; !ok && len(s.waiting) < maxWaiting {
		s.waiting[key] = at
	}
}

// Waiting are the n sessions waiting longest for a recording (their job
// ended, no upload came), as this settler saw them since it started, and
// how many wait.
func (s *Settler) Waiting(n int) ([]wire.IngestWaiting, int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return seen.Oldest(s.waiting, n)
}

// setPending sets when key is due (zero: not pending).
func (s *Settler) setPending(key string, due time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if due.IsZero() {
		delete(s.pending, key)
		return
	}
	s.pending[key] = due
}

// dispatch hands a session to a publisher, unless one has it already (it
// publishes what the entry holds then; a later revision's facts go with a
// later publication only if that one fails, as when published in line).
// It waits for a free publisher: the watch slows down rather than queue
// without bound.
func (s *Settler) dispatch(ctx context.Context, j publishJob) {
	s.mu.Lock()
	if _, busy := s.inflight[j.key]; busy {
		s.mu.Unlock()
		return
	}
	s.inflight[j.key] = j.ready
	s.mu.Unlock()
	select {
	case s.work <- j:
	case <-ctx.Done():
		s.mu.Lock()
		delete(s.inflight, j.key)
		s.mu.Unlock()
	}
}

// publisher publishes the sessions it is handed until ctx ends.
func (s *Settler) publisher(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case j := <-s.work:
			s.publish(ctx, j)
		}
	}
}

// publishDue hands every session whose settle window has passed to the
// publishers, and reports the backlog: the sessions ready (complete, or
// due) and not yet published, those a publisher has included, and how long
// the oldest has been ready.
func (s *Settler) publishDue(ctx context.Context) {
	now := s.Now()
	var due []publishJob
	var oldest time.Duration
	s.mu.Lock()
	for key, at := range s.pending {
		if _, busy := s.inflight[key]; !busy && !now.Before(at) {
			oldest = max(oldest, now.Sub(at))
			due = append(due, publishJob{key: key, ready: at, step: stepDue})
		}
	}
	for _, at := range s.inflight {
		if !at.IsZero() {
			oldest = max(oldest, now.Sub(at))
		}
	}
	backlog := len(due) + len(s.inflight)
	var waitedLongest time.Duration
	for _, at := range s.waiting {
		waitedLongest = max(waitedLongest, now.Sub(at))
	}
	waiting := len(s.waiting)
	s.mu.Unlock()
	if s.metrics != nil {
		s.metrics.SettlerBacklog.Set(float64(backlog))
		s.metrics.SettlerBacklogAge.Set(oldest.Seconds())
		s.metrics.Waiting.Set(float64(waiting))
		s.metrics.WaitingAge.Set(waitedLongest.Seconds())
	}
	for _, j := range due {
		s.dispatch(ctx, j)
	}
}

// publish publishes one session's work and marks its facts published. On
// failure the session stays pending and is tried again on the next tick.
// j.f is the entry when the caller has it fresh, with its revision, else nil.
func (s *Settler) publish(ctx context.Context, j publishJob) {
	published, err := s.publishKey(ctx, j.key, j.f, j.rev)
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.inflight, j.key)
	if err != nil {
		if inProcess(err) {
			// Another replica's settler is publishing the same session at this
			// moment: it wins, and the next tick sees the duplicate and marks it.
			s.Log.Debug("settler: another replica is publishing this session", "key", j.key)
		} else {
			s.retries.Failed(publishTarget, "settler: session work not published; retrying", err, "key", j.key)
		}
		if _, ok := s.pending[j.key]; !ok {
			s.pending[j.key] = s.Now()
		}
		return
	}
	// How long publishing failed (a NATS restart, the facts bucket's or
	// the sessions stream's leader election): lkscore's share of a stall
	// starts where the server answers again.
	s.retries.OK(publishTarget, "settler: publishing resumed")
	delete(s.pending, j.key)
	if published && s.metrics != nil && !j.ready.IsZero() {
		s.metrics.Steps.WithLabelValues(j.step).Observe(max(s.Now().Sub(j.ready), 0).Seconds())
	}
}

// publishKey publishes key's work unless it was already; it reports
// whether this call put new work on the stream.
func (s *Settler) publishKey(ctx context.Context, key string, f *facts.SessionFacts, rev uint64) (bool, error) {
	if f == nil {
		var err error
		if f, rev, err = s.facts.Get(ctx, key); err != nil {
			return false, err
		}
	}
	if f.PublishedAt != nil || (f.Recording == nil && !SpansOnly(f)) {
		return false, nil
	}
	obs := f.Observations
	if f.JobID == "" {
		// No job id in the header (SDKs before 1.6.6): what other signals
		// said about the room is all there is, its spans included.
		more, spans, err := s.facts.RoomSignals(ctx, f.RoomID, key)
		if err != nil {
			return false, err
		}
		obs = append(append([]facts.Observation(nil), obs...), more...)
		if len(spans) > 0 {
			merged := *f
			merged.Spans, _ = facts.MergeSpans(slices.Clone(f.Spans), spans)
			f = &merged
		}
	}
	r := facts.Resolve(obs)
	item := workItemFrom(f, r, s.Now())
	data, err := json.Marshal(item)
	if err != nil {
		return false, fmt.Errorf("encode work item: %w", err)
	}
	msg := nats.NewMsg(s.Subjects.Session(item.CloseReason))
	msg.Data = data
	msg.Header.Set(wire.HeaderSessionKey, item.SessionKey)
	pctx, cancel := context.WithTimeout(ctx, s.Timeouts.Publish)
	ack, err := s.JS.PublishMsg(pctx, msg, jetstream.WithMsgID(item.SessionKey), jetstream.WithExpectStream(s.Subjects.SessionStream()))
	cancel()
	if err != nil {
		return false, fmt.Errorf("publish session %s: %w", item.SessionKey, err)
	}
	if !ack.Duplicate {
		selected := s.selected[item.CloseReason]
		s.metrics.Sessions.WithLabelValues(item.CloseReason, fmt.Sprint(selected)).Inc()
		s.metrics.SessionsOldName.WithLabelValues(item.CloseReason, fmt.Sprint(selected)).Inc()
		s.Log.Info("session work published", "session_key", item.SessionKey, "close_reason", item.CloseReason,
			"close_reason_source", item.CloseReasonSource, "agent_name", r.AgentName, "origin", item.Origin, "selected", selected)
		if !selected {
			s.Log.Info("session not scored by configuration: its close reason is not in pipeline.close_reasons",
				"session_key", item.SessionKey, "close_reason", item.CloseReason, "close_reason_evidence", r.CloseReasonEvidence)
		}
	}
	// Marked published from the entry just read: a compare-and-set on its
	// revision, re-read only if it changed meanwhile.
	published := s.Now().UTC()
	err = s.facts.ModifyFrom(ctx, key, broker.Entry[facts.SessionFacts]{Value: f, Rev: rev}, func(f *facts.SessionFacts) bool {
		if f.PublishedAt != nil {
			return false
		}
		f.PublishedAt = &published
		return true
	})
	return !ack.Duplicate, err
}

// errCodeDuplicateInProcess is nats-server's JSStreamDuplicateMessageConflict
// (409, "duplicate message id is in process"): a publish with the same
// message id is being stored right now.
const errCodeDuplicateInProcess jetstream.ErrorCode = 10158

func inProcess(err error) bool {
	var apiErr *jetstream.APIError
	return errors.As(err, &apiErr) && apiErr.ErrorCode == errCodeDuplicateInProcess
}

// originSpans is the origin of a session scored from its spans and logs.
const originSpans = "spans"

// spansSettle is how long after its last signal a session without a
// recording waits (docs/facts.md, "Sessions without a recording"): the
// settle window once the session report said no recording follows, a
// second once the agent_session span (it ends when the session closes) has
// come too, and pipeline.recording_deadline when no report said.
func (s *Settler) spansSettle(f *facts.SessionFacts) time.Duration {
	if RecordingExpected(f) == "" {
		return max(s.noReport, s.window)
	}
	if slices.ContainsFunc(f.Spans, func(sp scoring.Span) bool { return sp.Name == scoring.SpanAgentSession }) {
		return min(RoomSettle, s.window)
	}
	return s.window
}

// workItemFrom is the work for a session with settled facts.
func workItemFrom(f *facts.SessionFacts, r facts.Resolved, now time.Time) work.Item {
	r.Spans = f.Spans
	if f.Recording == nil { // scored from its spans and logs
		return work.Item{RecordingRef: facts.RecordingRef{SessionKey: f.RoomID + "/" + f.JobID, Origin: originSpans},
			RoomID: f.RoomID, JobID: f.JobID, AgentName: r.AgentName, Close: r.Close,
			MetadataOnly: true, LocatedAt: now.UTC(), Facts: &r}
	}
	return work.Item{RecordingRef: *f.Recording, RoomID: f.RoomID, JobID: f.JobID, AgentName: r.AgentName,
		Close: r.Close, LocatedAt: now.UTC(), Facts: &r}
}
