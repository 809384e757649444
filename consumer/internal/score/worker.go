// Package score is the scoring stage: a Worker reads a work item's
// recording (or, for a metadata-only session, its spans) from the store,
// scores it with the pure scoring model and publishes the scorecard.
package score

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/lkscore/lkscore/audio"
	"github.com/lkscore/lkscore/config"
	"github.com/lkscore/lkscore/consumer/broker"
	"github.com/lkscore/lkscore/consumer/internal/facts"
	"github.com/lkscore/lkscore/consumer/internal/factstore"
	"github.com/lkscore/lkscore/consumer/internal/failure"
	"github.com/lkscore/lkscore/consumer/internal/metrics"
	"github.com/lkscore/lkscore/consumer/internal/work"
	"github.com/lkscore/lkscore/recording"
	"github.com/lkscore/lkscore/rules"
	"github.com/lkscore/lkscore/scoring"
	"github.com/lkscore/lkscore/session"
	"github.com/lkscore/lkscore/store"
	"github.com/lkscore/lkscore/wire"
)

// Reader is what a worker needs from the recording store.
type Reader interface {
	recording.ObjectReader
	store.BucketReader
	store.Deleter
}

// Worker scores sessions: it fetches a work item's chat history, scores it
// and publishes the scorecard on lkscore.result.<CLOSE_REASON> (and on
// lkscore.agent.<agent>.<CLOSE_REASON> with pipeline.agent_results).
type Worker struct {
	broker.Env
	inputs  Inputs
	privacy config.Privacy
	facts   *factstore.Store
	deleted *prometheus.CounterVec // reason
	store   Reader
	scorer  *scoring.Scorer
	quality *metrics.Quality // nil in tests that do not count
	// agentResults: publish on lkscore.agent.<agent>.<close reason> too
	// (pipeline.agent_results).
	agentResults bool
	steps        *prometheus.HistogramVec // lkscore_session_step_seconds; nil in tests
	// decoders are chat decoders whose memory is reused from one session
	// to the next (recording.ChatDecoder): a card keeps nothing of its
	// chat past Handle, which encodes it before it returns the decoder.
	decoders sync.Pool
	// rescorers are the scorers of rescore items' scoring versions, from
	// the scoring bucket, the latest few.
	rescoreMu sync.Mutex
	rescorers map[string]*scoring.Scorer
}

// Options are what a Worker needs.
type Options struct {
	Store   Reader
	Facts   *factstore.Store // records content dropped under privacy.mode metadata_only
	Scorer  *scoring.Scorer
	Metrics *metrics.Pipeline

	Privacy config.Privacy
	Limits  config.Limits
	Audio   config.Audio
	// AudioThresholds are the scoring model's audio settings (scoring.audio).
	AudioThresholds scoring.AudioConfig
	// AgentResults publishes every scorecard by agent too (pipeline.agent_results).
	AgentResults bool
}

// New scores with o.Scorer what o.Store holds, as o says.
func New(env broker.Env, o Options) (*Worker, error) {
	if err := broker.Require("worker", map[string]bool{"js": env.JS == nil, "log": env.Log == nil, "store": o.Store == nil,
		"scorer": o.Scorer == nil, "metrics": o.Metrics == nil}); err != nil {
		return nil, err
	}
	if env.Timeouts.Publish <= 0 {
		return nil, errors.New("worker: the publish timeout must be positive")
	}
	return &Worker{Env: env, inputs: NewInputs(o.Store, o.Privacy, o.Limits, o.Audio, o.AudioThresholds), privacy: o.Privacy,
		facts: o.Facts, deleted: o.Metrics.RecordingsDeleted, store: o.Store, scorer: o.Scorer, quality: o.Metrics.Quality,
		agentResults: o.AgentResults, steps: o.Metrics.Steps}, nil
}

// Inputs builds a work item's scoring input: its recording from the store
// (unless it has none), its facts from every signal, its spans and its
// audio. The scoring workers and `lkscore rescore` share it, so both score
// the same input.
type Inputs struct {
	store      Reader
	privacy    config.Privacy
	lim        recording.Limits
	maxUpload  int64
	audioCfg   config.Audio
	analysis   audio.Config // from the scoring config (audio.ForScoring)
	audioBytes int64
}

// NewInputs reads from st as the config's privacy, limits and audio
// settings say; thresholds are the scoring model's audio settings.
func NewInputs(st Reader, privacy config.Privacy, limits config.Limits, a config.Audio, thresholds scoring.AudioConfig) Inputs {
	return Inputs{store: st, privacy: privacy, lim: limits.Parser(), maxUpload: limits.UploadBytes(), audioCfg: a,
		analysis: audio.ForScoring(thresholds, a.MaxDuration), audioBytes: limits.AudioBytes}
}

// Handle scores one work item; the caller acks only when it returns nil.
func (w *Worker) Handle(ctx context.Context, m jetstream.Msg) error {
	var item work.Item
	if err := json.Unmarshal(m.Data(), &item); err != nil {
		return failure.Permanent(fmt.Errorf("work item is not valid JSON: %w", err))
	}
	if err := validateItem(item); err != nil {
		return failure.Permanent(err)
	}
	scorer, err := w.scorerFor(ctx, item.ScoringVersion)
	if err != nil {
		return err
	}
	inputs := w.inputs
	if scorer != w.scorer { // a rescore: its model's audio settings
		inputs = inputs.WithAudioThresholds(scorer.Audio())
	}
	dec, _ := w.decoders.Get().(*recording.ChatDecoder)
	if dec == nil {
		dec = new(recording.ChatDecoder)
	}
	defer w.decoders.Put(dec) // nothing of the chat is used past Handle
	in, err := inputs.InputWith(ctx, item, dec)
	if errors.Is(err, recording.ErrNotFound) {
		return failure.Permanent(fmt.Errorf("recording gone from the store: %w", err))
	}
	if err != nil {
		return err
	}
	card := scorer.Score(in)
	scored := w.Now()
	data, err := card.AppendJSON(make([]byte, 0, 8<<10))
	if err != nil {
		return failure.Permanent(fmt.Errorf("encode scorecard: %w", err))
	}
	msg := nats.NewMsg(w.Subjects.Result(item.CloseReason))
	msg.Data = data
	msg.Header.Set(wire.HeaderSessionKey, item.SessionKey)
	msg.Header.Set(wire.HeaderVerdict, card.Overall.Verdict)
	msg.Header.Set(wire.HeaderAgentName, item.AgentName)
	msg.Header.Set(wire.HeaderScoringVersion, card.ScoringVersion)
	msg.Header.Set(wire.HeaderCloseReason, item.CloseReason)
	pctx, cancel := context.WithTimeout(ctx, w.Timeouts.Publish)
	defer cancel()
	// Session key + scoring version: one scorecard per session and version,
	// however often the work is delivered.
	ack, err := w.JS.PublishMsg(pctx, msg, jetstream.WithMsgID(item.SessionKey+"@"+card.ScoringVersion),
		jetstream.WithExpectStream(w.Subjects.ResultStream()))
	if err != nil {
		return fmt.Errorf("publish scorecard %s: %w", item.SessionKey, err)
	}
	if !ack.Duplicate && w.quality != nil {
		w.quality.Observe(&card)
	}
	if !ack.Duplicate && w.steps != nil {
		now := w.Now()
		w.steps.WithLabelValues("scored_to_stored").Observe(now.Sub(scored).Seconds())
		if !item.LocatedAt.IsZero() {
			w.steps.WithLabelValues("located_to_scored").Observe(max(now.Sub(item.LocatedAt), 0).Seconds())
		}
	}
	if w.agentResults {
		// The same message, by agent. A failure here redelivers the work: the
		// results stream drops its repeat, this stream gets its copy.
		byAgent := nats.NewMsg(w.Subjects.AgentResult(item.AgentName, item.CloseReason))
		byAgent.Data, byAgent.Header = msg.Data, msg.Header
		actx, cancel := context.WithTimeout(ctx, w.Timeouts.Publish)
		defer cancel()
		if _, err := w.JS.PublishMsg(actx, byAgent, jetstream.WithMsgID(item.SessionKey+"@"+card.ScoringVersion),
			jetstream.WithExpectStream(w.Subjects.AgentResultStream())); err != nil {
			return fmt.Errorf("publish scorecard %s by agent: %w", item.SessionKey, err)
		}
	}
	w.Log.Info("session scored", "session_key", item.SessionKey, "verdict", card.Overall.Verdict,
		"score", card.Overall.Score, "close_reason", item.CloseReason, "duplicate", ack.Duplicate)
	if w.privacy.Mode == "metadata_only" && !item.MetadataOnly {
		return w.dropContent(ctx, item)
	}
	return nil
}

// WithAudioThresholds measures audio with another scoring model's audio
// settings.
func (w Inputs) WithAudioThresholds(c scoring.AudioConfig) Inputs {
	w.analysis = audio.ForScoring(c, w.audioCfg.MaxDuration)
	return w
}

// DisableAudio leaves the audio out of the inputs (a rescore that reuses
// the measurement a scorecard holds).
func (w *Inputs) DisableAudio() { w.audioCfg.Enabled = false }

// Input is the scoring input of one work item: its recording (unless it
// has none), its facts from every signal, and its spans. A recording gone
// from the store is recording.ErrNotFound.
func (w Inputs) Input(ctx context.Context, item work.Item) (scoring.Session, error) {
	return w.InputWith(ctx, item, nil)
}

// InputWith is Input decoding the chat history into dec's memory (nil: new
// memory): the input's chat strings are valid until dec's next decode.
func (w Inputs) InputWith(ctx context.Context, item work.Item, dec *recording.ChatDecoder) (scoring.Session, error) {
	in := scoring.Session{Identity: session.Identity{Key: item.SessionKey, RoomID: item.RoomID, RoomName: item.RoomName,
		JobID: item.JobID, AgentName: item.AgentName}, Source: "spans://" + item.SessionKey}
	if !item.MetadataOnly {
		s, err := w.load(ctx, item, dec)
		if err != nil {
			return in, err
		}
		in = s.ScoringInput(item.Location, item.AgentName)
		in.Inputs = []string{session.InputRecording}
	}
	// The session's facts come from every signal, not the header alone.
	in.Close = item.Close
	in.Redacted = w.privacy.Redacted(in.Redacted || (item.Facts != nil && item.Facts.RedactionEnabled))
	if f := item.Facts; f != nil {
		in.Close = f.Close
		facts := f.Facts
		in.Facts = &facts
		in.Spans = f.Spans
		in.Inputs = append(in.Inputs, f.Inputs...)
	}
	if in.Redacted {
		// A redacted session's card keeps its room's name only as the keyed
		// hash ingest stored; a name in the clear (an event that came
		// before a signal said redacted) is left out.
		in.RoomName = keyedOnly(in.RoomName)
		if in.Facts != nil {
			in.Facts.RoomName = keyedOnly(in.Facts.RoomName)
		}
	}
	if item.MetadataOnly {
		return in, nil
	}
	var err error
	in.Audio, err = w.audio(ctx, item)
	return in, err
}

// keyedOnly is name if it is a keyed hash, else "".
func keyedOnly(name string) string {
	if facts.IsKeyedHash(name) {
		return name
	}
	return ""
}

// dropContent removes a scored session's chat history and audio from the
// store (privacy.mode metadata_only): the header, the facts and the
// scorecard stay. An error retries the message; the scorecard is not
// published twice (its msg id dedups it).
func (w *Worker) dropContent(ctx context.Context, item work.Item) error {
	if item.Dir == "" {
		w.Log.Warn("metadata_only: a raw multipart object cannot be trimmed; it is kept whole", "session_key", item.SessionKey,
			"object", item.Object, "bucket", item.Bucket)
		return nil
	}
	for _, name := range []string{recording.ObjectChatHistory, recording.ObjectAudio} {
		if err := w.store.Delete(ctx, item.Dir+name); err != nil {
			return fmt.Errorf("metadata_only: delete %s: %w", item.Dir+name, err)
		}
	}
	w.deleted.WithLabelValues("metadata_only").Inc()
	w.Log.Info("transcript and audio dropped after scoring (privacy.mode metadata_only)", "session_key", item.SessionKey, "dir", item.Dir)
	room, job := item.RoomID, item.JobID
	now := time.Now().UTC()
	return w.facts.Modify(ctx, facts.Key(room, job), func(f *facts.SessionFacts) bool {
		if f.RoomID == "" || f.ContentDroppedAt != nil {
			return false
		}
		f.ContentDroppedAt = &now
		return true
	})
}

// audio measures the session's recording.ogg when it has one (directory
// layout; a raw multipart object's audio is not read) and audio.enabled.
// A recording that cannot be measured is a finding, not an error; a store
// failure is retried.
func (w Inputs) audio(ctx context.Context, item work.Item) (*session.Audio, error) {
	if !w.audioCfg.Enabled || item.Dir == "" {
		return nil, nil
	}
	rc, err := w.store.Open(ctx, item.Dir+recording.ObjectAudio, w.audioBytes)
	switch {
	case errors.Is(err, recording.ErrNotFound):
		return nil, nil
	case errors.Is(err, recording.ErrLimit):
		return &session.Audio{Refused: "too_large", Reason: fmt.Sprintf("larger than limits.audio_bytes (%d)", w.audioBytes)}, nil
	case err != nil:
		return nil, fmt.Errorf("open %s: %w", item.Dir+recording.ObjectAudio, err)
	}
	defer rc.Close()
	res, err := audio.Analyze(rc, w.analysis)
	if err != nil {
		return nil, fmt.Errorf("measure %s: %w", item.Dir+recording.ObjectAudio, err)
	}
	return res.Scoring(), nil
}

// load reads the item's recording.
func (w Inputs) load(ctx context.Context, item work.Item, dec *recording.ChatDecoder) (*recording.Session, error) {
	if item.Dir != "" {
		return dec.Load(ctx, w.store, item.Dir, w.lim)
	}
	return Load(ctx, w.store, &item.RecordingRef, w.lim, w.maxUpload)
}

// Load reads a located session: a directory upload or a raw
// multipart object.
func Load(ctx context.Context, st Reader, ref *facts.RecordingRef, lim recording.Limits, maxUpload int64) (*recording.Session, error) {
	if ref.Dir != "" {
		return recording.Load(ctx, st, ref.Dir, lim)
	}
	rc, err := st.OpenBucket(ctx, ref.Bucket, ref.Object, maxUpload)
	if err != nil {
		return nil, err
	}
	defer rc.Close()
	s, _, err := recording.ParseMultipart(rc, "", lim)
	return s, err
}

// maxRescorers bounds the rescore scorers a worker keeps.
const maxRescorers = 8

// scorerFor is the scorer of a scoring version: the worker's own, or a
// rescore's, built from the config `lkscore rescore` put in the scoring
// bucket. A version the bucket does not hold is a dead letter.
func (w *Worker) scorerFor(ctx context.Context, version string) (*scoring.Scorer, error) {
	if version == "" || version == w.scorer.Version() {
		return w.scorer, nil
	}
	w.rescoreMu.Lock()
	defer w.rescoreMu.Unlock()
	if sc, ok := w.rescorers[version]; ok {
		return sc, nil
	}
	sc, err := LoadScorer(ctx, w.JS, w.Subjects, w.Timeouts.Request, version, w.scorer.VersionTag())
	if err != nil {
		return nil, err
	}
	if w.rescorers == nil || len(w.rescorers) >= maxRescorers {
		w.rescorers = map[string]*scoring.Scorer{}
	}
	w.rescorers[version] = sc
	return sc, nil
}

// ScoringKey is a scoring version's key in the scoring bucket.
func ScoringKey(version string) string { return base64.RawURLEncoding.EncodeToString([]byte(version)) }

// LoadScorer builds the scorer of a scoring version from the scoring
// bucket, reading versions by versionTag (regression.version_tag): a
// missing or different config is permanent.
func LoadScorer(ctx context.Context, js jetstream.JetStream, s wire.Subjects, timeout time.Duration,
	version, versionTag string) (*scoring.Scorer, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	kv, err := js.KeyValue(ctx, s.ScoringBucket())
	if errors.Is(err, jetstream.ErrBucketNotFound) {
		return nil, failure.Permanent(fmt.Errorf("rescore under scoring %s: no bucket %s (lkscore rescore writes it)", version, s.ScoringBucket()))
	}
	if err != nil {
		return nil, fmt.Errorf("scoring bucket: %w", err)
	}
	e, err := kv.Get(ctx, ScoringKey(version))
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return nil, failure.Permanent(fmt.Errorf("rescore under scoring %s: its config is not in %s", version, s.ScoringBucket()))
	}
	if err != nil {
		return nil, fmt.Errorf("scoring bucket: %w", err)
	}
	var cfg scoring.Config
	if err := json.Unmarshal(e.Value(), &cfg); err != nil {
		return nil, failure.Permanent(fmt.Errorf("rescore config %s: %w", version, err))
	}
	cfg.VersionTag = versionTag
	sc, err := rules.NewScorer(cfg)
	if err != nil {
		return nil, failure.Permanent(fmt.Errorf("rescore config %s: %w", version, err))
	}
	if sc.Version() != version {
		return nil, failure.Permanent(fmt.Errorf("rescore config %s gives scoring version %s: this worker's scoring model differs (%s)",
			version, sc.Version(), scoring.ModelVersion))
	}
	return sc, nil
}
