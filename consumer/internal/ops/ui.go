package ops

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/lkscore/lkscore/config"
	"github.com/lkscore/lkscore/consumer/broker"
	"github.com/lkscore/lkscore/consumer/cases"
	"github.com/lkscore/lkscore/consumer/internal/facts"
	"github.com/lkscore/lkscore/consumer/internal/factstore"
	"github.com/lkscore/lkscore/consumer/internal/score"
	"github.com/lkscore/lkscore/consumer/internal/seen"
	"github.com/lkscore/lkscore/dashboard"
	"github.com/lkscore/lkscore/recording"
	"github.com/lkscore/lkscore/scoring"
	"github.com/lkscore/lkscore/session"
	"github.com/lkscore/lkscore/wire"
)

// UI is the dashboard on the ops listener: it answers 503 until the
// daemon has started, then serves dashboard.Handler.
//
// The index starts following the results stream on the first request, not
// at start-up: every replica serves the dashboard, and none should decode
// every scorecard for a page nobody opened. The first request waits (a few
// seconds at most) for the index to catch up.
type UI struct {
	mu      sync.RWMutex
	handler http.Handler
	follow  func()          // starts the index following the stream
	ready   <-chan struct{} // the index caught up
	once    sync.Once
	stopped bool // set by Stop: no follower starts after it
	cancel  context.CancelFunc
	done    sync.WaitGroup
	// forgetSub takes lkscore forget's requests to drop a session.
	forgetSub *nats.Subscription
}

// catchUpWait bounds how long the first dashboard request waits for the index.
const catchUpWait = 3 * time.Second

// alertWindow is how many alert messages the dashboard reads back.
const alertWindow = 1000

func (u *UI) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	u.mu.RLock()
	h, follow, ready := u.handler, u.follow, u.ready
	u.mu.RUnlock()
	if h == nil {
		http.Error(w, "starting", http.StatusServiceUnavailable)
		return
	}
	u.once.Do(follow)
	select {
	case <-ready:
	case <-time.After(catchUpWait):
	case <-r.Context().Done():
		return
	}
	h.ServeHTTP(w, r)
}

// caseArchive serves a session's case archive, as `lkscore case export
// --archive` writes it (docs/cases.md).
func caseArchive(e cases.Exporter) func(context.Context, string) ([]byte, string, error) {
	return func(ctx context.Context, key string) ([]byte, string, error) {
		f, err := e.Export(ctx, key)
		if err != nil {
			return nil, "", err
		}
		name := cases.Name(key)
		data, err := f.Archive(name)
		return data, name + ".tar", err
	}
}

// sources are where the dashboard reads what its index does not hold.
type sources struct {
	js       jetstream.JetStream
	subjects wire.Subjects
	facts    *factstore.Store
	store    score.Reader
	limits   config.Limits
	privacy  config.Privacy
	selected []string // pipeline.close_reasons
}

// Start builds the dashboard (cfg: dashboard, regression, limits, privacy)
// and makes its index follow the results and alerts streams from the first
// request on, until Stop.
func (u *UI) Start(ctx context.Context, cfg config.Config, js jetstream.JetStream, subjects wire.Subjects, fs *factstore.Store,
	st score.Reader, gatherer prometheus.Gatherer, guard *dashboard.Guard, log *slog.Logger) error {
	index := dashboard.NewIndex(cfg.Dashboard.Window, cfg.Regression.VersionTag)
	alerts := dashboard.NewAlertIndex(alertWindow)
	s := &sources{js: js, subjects: subjects, facts: fs, store: st, limits: cfg.Limits, privacy: cfg.Privacy, selected: cfg.Pipeline.CloseReasons}
	src := dashboard.Sources{Scorecard: s.scorecard, Items: s.items, Recording: s.recording, Audio: s.audio, DeadLetters: s.deadLetters,
		NotSelected: s.notSelected, Steps: func() dashboard.PipelineSteps { return pipelineSteps(gatherer) },
		SearchDeadLetters: s.searchDeadLetters, Ingestion: s.ingestion, APIKeys: slices.Sorted(maps.Keys(cfg.LiveKit.Keys)),
		Listen: cfg.Listen}
	scorer, err := cfg.Scorer()
	if err != nil {
		return fmt.Errorf("dashboard: %w", err)
	}
	src.Case = caseArchive(cases.Exporter{JS: js, Subjects: subjects, Store: st, Config: cfg, Scorer: scorer, Wait: cfg.NATS.RequestTimeout})
	h, err := dashboard.NewHandler(index, alerts, src, guard, log)
	if err != nil {
		return err
	}
	// lkscore forget asks every running dashboard to drop the session.
	sub, err := js.Conn().Subscribe(subjects.Forget(), func(m *nats.Msg) {
		n := index.Forget(string(m.Data))
		log.Info("dashboard: session forgotten", "session_key", string(m.Data), "entries", n)
		_ = m.Respond([]byte(strconv.Itoa(n)))
	})
	if err != nil {
		return fmt.Errorf("dashboard: subscribe %s: %w", subjects.Forget(), err)
	}
	uctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	u.mu.Lock()
	defer u.mu.Unlock()
	u.handler, u.cancel, u.ready, u.forgetSub = h, cancel, index.CaughtUp(), sub
	u.follow = func() {
		u.mu.Lock()
		defer u.mu.Unlock()
		if u.stopped {
			return
		}
		u.done.Add(2)
		go func() {
			defer u.done.Done()
			index.Follow(uctx, js, subjects.ResultStream(), log)
		}()
		go func() {
			defer u.done.Done()
			alerts.Follow(uctx, js, subjects.AlertStream(), log)
		}()
	}
	return nil
}

// Stop stops the index from following the streams and waits for it.
func (u *UI) Stop() {
	u.mu.Lock()
	cancel, sub := u.cancel, u.forgetSub
	u.stopped = true
	u.mu.Unlock()
	if sub != nil {
		_ = sub.Unsubscribe()
	}
	if cancel != nil {
		cancel()
	}
	u.done.Wait()
}

// scorecard reads one scorecard back from the results stream.
func (s *sources) scorecard(ctx context.Context, seq uint64) (session.Scorecard, error) {
	var sc session.Scorecard
	stream, err := s.js.Stream(ctx, s.subjects.ResultStream())
	if err != nil {
		return sc, err
	}
	m, err := stream.GetMsg(ctx, seq)
	if err != nil {
		return sc, err
	}
	return sc, json.Unmarshal(m.Data, &sc)
}

// items are a session's transcript, redacted as privacy says.
func (s *sources) items(ctx context.Context, key string) ([]scoring.Item, error) {
	f, err := factsOf(ctx, s.facts, key)
	if err != nil {
		return nil, err
	}
	if f.Recording == nil && len(f.Spans) > 0 {
		// metadata-only: the turns as the scorer built them from
		// the spans (timing, interruptions, tool errors; no text)
		return scoring.ItemsFromSpans(f.Spans), nil
	}
	if f.Recording == nil {
		return nil, errors.New("lkscore has no record of where this session's recording is")
	}
	if f.ContentDroppedAt != nil {
		return nil, errors.New(contentDropped)
	}
	ref := f.Recording
	sess, err := score.Load(ctx, s.store, ref, s.limits.Parser(), s.limits.UploadBytes())
	if errors.Is(err, recording.ErrNotFound) {
		return nil, fmt.Errorf("the recording is no longer in the store (%s)", ref.Location)
	}
	if err != nil {
		return nil, err
	}
	if sess.Chat == nil {
		return nil, errors.New("the upload has no chat history (transcript recording was off)")
	}
	items := sess.ScoringInput(ref.Location, "").Items
	if s.privacy.Redacted(sess.RedactionEnabled || facts.Resolve(f.Observations).RedactionEnabled) {
		redactItems(items)
	}
	return items, nil
}

// contentDropped is why a metadata_only session serves no content.
const contentDropped = "privacy.mode metadata_only dropped the transcript and audio after scoring"

// recording opens one object of a session's directory upload.
func (s *sources) recording(ctx context.Context, key, object string) (io.ReadCloser, error) {
	f, err := recordingOf(ctx, s.facts, key)
	if err != nil {
		return nil, err
	}
	ref := f.Recording
	if object != recording.ObjectHeader && s.privacy.Redacted(facts.Resolve(f.Observations).RedactionEnabled) {
		return nil, errors.New("the session is redacted: its transcript and audio are not served")
	}
	if f.ContentDroppedAt != nil && object != recording.ObjectHeader {
		return nil, errors.New(contentDropped)
	}
	if ref.Dir == "" {
		return nil, errors.New("the session is stored as one multipart object; its parts are not served separately")
	}
	rc, err := s.store.Open(ctx, ref.Dir+object, s.limits.UploadBytes())
	if errors.Is(err, recording.ErrNotFound) {
		return nil, fmt.Errorf("%s is not in the store", object)
	}
	return rc, err
}

// audio says whether a session's audio can be played, or why not.
func (s *sources) audio(ctx context.Context, key string) (bool, string) {
	f, err := recordingOf(ctx, s.facts, key)
	switch {
	case err != nil:
		return false, err.Error()
	case s.privacy.Redacted(facts.Resolve(f.Observations).RedactionEnabled):
		return false, "the session is redacted: its audio is not served"
	case f.ContentDroppedAt != nil:
		return false, contentDropped
	case f.Recording.Dir == "":
		return false, "the session is stored as one multipart object; its audio is not served separately"
	}
	rc, err := s.store.Open(ctx, f.Recording.Dir+recording.ObjectAudio, s.limits.UploadBytes())
	if errors.Is(err, recording.ErrNotFound) {
		return false, "this upload has no recording.ogg (the session's audio recording was off)"
	}
	if err != nil {
		return false, err.Error()
	}
	_ = rc.Close()
	return true, ""
}

// dlSearchScan bounds the dead letters one dashboard search reads, newest first.
const dlSearchScan = 5000

// searchDeadLetters finds dead letters by session key (or subject, stage, error).
func (s *sources) searchDeadLetters(ctx context.Context, q string) (dashboard.DeadLetterResult, error) {
	found, looked, more, err := broker.NewDeadLetterAdmin(s.js, s.subjects).Search(ctx, q, dlSearchScan, 200)
	return dashboard.DeadLetterResult{Letters: found, Looked: looked, More: more}, err
}

// ingestionWait is how long the ingestion view waits for the processes' answers.
const ingestionWait = 400 * time.Millisecond

// ingestion asks every running process what its ingest saw.
func (s *sources) ingestion(ctx context.Context) ([]wire.IngestionReport, error) {
	return seen.Gather(ctx, s.js.Conn(), s.subjects.Ingestion(), ingestionWait)
}

// deadLetters counts the dead letters.
func (s *sources) deadLetters(ctx context.Context) (int, error) {
	stream, err := s.js.Stream(ctx, s.subjects.DLQStream())
	if err != nil {
		return 0, err
	}
	info, err := stream.Info(ctx)
	if err != nil {
		return 0, err
	}
	return int(info.State.Msgs), nil
}

// pipelineSteps reads this process's lkscore_session_step_seconds and the
// settler's backlog gauges from its registry.
func pipelineSteps(g prometheus.Gatherer) dashboard.PipelineSteps {
	var out dashboard.PipelineSteps
	if g == nil {
		return out
	}
	mfs, err := g.Gather()
	if err != nil {
		return out
	}
	for _, mf := range mfs {
		switch mf.GetName() {
		case "lkscore_settler_backlog_sessions":
			for _, m := range mf.GetMetric() {
				out.Backlog = m.GetGauge().GetValue()
			}
		case "lkscore_settler_backlog_age_seconds":
			for _, m := range mf.GetMetric() {
				out.BacklogAge = m.GetGauge().GetValue()
			}
		case "lkscore_session_step_seconds":
			for _, m := range mf.GetMetric() {
				h := m.GetHistogram()
				if h.GetSampleCount() == 0 {
					continue
				}
				st := dashboard.StepStat{Sessions: h.GetSampleCount()}
				for _, l := range m.GetLabel() {
					if l.GetName() == "step" {
						st.Step = l.GetValue()
					}
				}
				st.P50Ms, st.P99Ms = bucketQuantile(h, 0.5)*1000, bucketQuantile(h, 0.99)*1000
				out.Steps = append(out.Steps, st)
			}
		}
	}
	slices.SortFunc(out.Steps, func(a, b dashboard.StepStat) int { return strings.Compare(a.Step, b.Step) })
	return out
}

// bucketQuantile is the upper bound of the histogram bucket that holds the
// q quantile (+Inf as the largest finite bound).
func bucketQuantile(h *dto.Histogram, q float64) float64 {
	want := q * float64(h.GetSampleCount())
	last := 0.0
	for _, b := range h.GetBucket() {
		last = b.GetUpperBound()
		if float64(b.GetCumulativeCount()) >= want {
			return last
		}
	}
	return last
}

// notSelected counts the sessions located and not scored by configuration:
// the session stream's messages whose close reason pipeline.close_reasons
// leaves out, per close reason (within the stream's retention).
func (s *sources) notSelected(ctx context.Context) (map[string]uint64, error) {
	stream, err := s.js.Stream(ctx, s.subjects.SessionStream())
	if err != nil {
		return nil, err
	}
	info, err := stream.Info(ctx, jetstream.WithSubjectFilter(s.subjects.SessionAll()))
	if err != nil {
		return nil, err
	}
	out := map[string]uint64{}
	prefix := s.subjects.Session("")
	for subj, n := range info.State.Subjects {
		if reason := strings.TrimPrefix(subj, prefix); !slices.Contains(s.selected, reason) {
			out[reason] += n
		}
	}
	return out, nil
}

// redactItems replaces what the user, the agent and tools said with its length.
func redactItems(items []scoring.Item) {
	for i := range items {
		it := &items[i]
		if it.Text != "" {
			it.Text = fmt.Sprintf("[redacted: %d characters]", len([]rune(it.Text)))
		}
		it.Arguments, it.Output = "", ""
	}
}

// factsOf returns the facts of a scorecard's session key.
func factsOf(ctx context.Context, fs *factstore.Store, key string) (*facts.SessionFacts, error) {
	room, job, err := wire.ParseSessionKey(key)
	if err != nil {
		return nil, err
	}
	f, _, err := fs.Get(ctx, facts.Key(room, recording.FactsJobID(job)))
	return f, err
}

// recordingOf returns a session's facts, which say where its recording is.
func recordingOf(ctx context.Context, fs *factstore.Store, key string) (*facts.SessionFacts, error) {
	f, err := factsOf(ctx, fs, key)
	if err != nil {
		return nil, err
	}
	if f.Recording == nil {
		return nil, errors.New("lkscore has no record of where this session's recording is")
	}
	return f, nil
}
