// Package detect is the regression stage: it keeps each agent version's
// history of scorecards in the regression bucket, judges it with the pure
// detector (regress.Evaluate), and publishes an alert when a condition
// starts or ends, once, whatever the number of replicas.
package detect

import (
	"context"
	"encoding/json"
	"fmt"
	"hash/fnv"
	"slices"
	"sync"
	"time"

	gojson "github.com/goccy/go-json"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/lkscore/lkscore/config"
	"github.com/lkscore/lkscore/consumer/broker"
	"github.com/lkscore/lkscore/consumer/internal/failure"
	"github.com/lkscore/lkscore/consumer/internal/metrics"
	"github.com/lkscore/lkscore/regress"
	"github.com/lkscore/lkscore/session"
	"github.com/lkscore/lkscore/wire"
)

// versionIndex lists an agent's versions (per scoring version), for
// finding the previous one.
type versionIndex struct {
	Versions map[string]versionSpan `json:"versions"`
}

type versionSpan struct {
	First uint64 `json:"first_seq"`
	Total int    `json:"total"` // sessions, counted up to min_sessions
}

// Detector keeps per-agent/version history in a KV bucket and raises
// alerts. Replicas share its durable consumer; every state change is a
// compare-and-set, and every alert carries a message id derived from the
// state it changes, so two replicas never publish one alert twice.
type Detector struct {
	broker.Env
	kv       jetstream.KeyValue
	cfg      config.Regression
	alerts   *prometheus.CounterVec // kind, status
	sessions *prometheus.CounterVec // agent, version
	// sessionLabels caps the sessions' (agent, version) pairs (metrics.max_agents).
	sessionLabels *metrics.LabelCap
	// stripes serialize, within this process, the handling of scorecards of
	// one agent/version: they share one history entry, and goroutines
	// racing on it would only lose compare-and-sets to each other.
	stripes [64]sync.Mutex
	// recent remembers the histories and version indexes this process
	// wrote or read last: a session's sample is written on the revision
	// remembered, without reading the history first (broker.Recent).
	recent *broker.Recent
	// pending are the samples waiting for their history's stripe, by
	// history key: whoever holds the stripe writes them all (addSamples).
	pendingMu sync.Mutex
	pending   map[string][]*pendingSample
	cacheMu   sync.Mutex
	cache     map[string]cachedHistory // by history key
}

// Options are what a Detector needs.
type Options struct {
	Bucket     jetstream.KeyValue // the regression bucket (OpenBucket)
	Metrics    *metrics.Pipeline
	Regression config.Regression
}

// New detects on the scorecards it is handed, keeping its state in
// o.Bucket, as o.Regression says.
func New(env broker.Env, o Options) (*Detector, error) {
	if err := broker.Require("detector", map[string]bool{"js": env.JS == nil, "log": env.Log == nil, "now": env.Now == nil,
		"bucket": o.Bucket == nil, "metrics": o.Metrics == nil}); err != nil {
		return nil, err
	}
	kv, cfg, m := o.Bucket, o.Regression, o.Metrics
	for _, kind := range []string{regress.KindRegression, regress.KindDrift, regress.KindFailures, regress.KindThreshold} {
		for _, status := range []string{wire.AlertFiring, wire.AlertResolved} {
			m.Alerts.WithLabelValues(kind, status).Add(0)
		}
	}
	return &Detector{Env: env, kv: kv, cfg: cfg, alerts: m.Alerts, sessions: m.AgentSessions, sessionLabels: m.AgentVersions,
		recent: broker.NewRecent(256, time.Minute)}, nil
}

// Bucket is the regression bucket.
func (r *Detector) Bucket() jetstream.KeyValue { return r.kv }

// OpenBucket creates or opens the detector's KV bucket.
func OpenBucket(ctx context.Context, js jetstream.JetStream, s wire.Subjects, n config.NATS) (jetstream.KeyValue, error) {
	ctx, cancel := context.WithTimeout(ctx, n.RequestTimeout) // the caller's deadline, if shorter, wins
	defer cancel()
	kv, err := js.CreateOrUpdateKeyValue(ctx, jetstream.KeyValueConfig{
		Bucket: s.RegressionBucket(), Description: "lkscore regression detection: history per agent/version, alert state, sealed baselines",
		Storage: broker.StorageType(n.Storage), Replicas: n.Replicas, History: 1,
	})
	if err != nil {
		return nil, fmt.Errorf("regression bucket: %w", err)
	}
	return kv, nil
}

// Handle feeds one scorecard to detection.
func (r *Detector) Handle(ctx context.Context, m jetstream.Msg) error {
	var card session.Scorecard
	if err := gojson.Unmarshal(m.Data(), &card); err != nil { // the workers' own bytes: goccy, 4x encoding/json
		return failure.Permanent(fmt.Errorf("scorecard is not valid JSON: %w", err))
	}
	if err := r.thresholds(ctx, &card, m); err != nil {
		return err
	}
	if !card.Comparable() && card.Overall.Verdict != session.Fail {
		// No evidence (unscored) or a caller who said nothing: not a sample
		// of how the agent does. A failed one still counts, for the
		// failure-rate alerts.
		return nil
	}
	meta, err := m.Metadata()
	if err != nil {
		return failure.Permanent(fmt.Errorf("scorecard without stream metadata: %w", err))
	}
	seq := meta.Sequence.Stream
	key := regress.KeyOf(&card, r.cfg.VersionTag)
	stripe := &r.stripes[fnv32(regress.HistoryKey(key))%uint32(len(r.stripes))]
	p := r.enqueue(regress.HistoryKey(key), regress.SampleOf(&card, seq))
	stripe.Lock()
	defer stripe.Unlock()
	if !p.done {
		r.addSamples(ctx, key)
	}
	if p.err != nil {
		return fmt.Errorf("regression history %s: %w", key, p.err)
	}
	h, added := p.h, p.added
	index, _, err := r.indexes().Modify(ctx, regress.VersionIndexKey(key.Agent, key.ScoringVersion), nil, func(idx *versionIndex) bool {
		if idx.Versions == nil {
			idx.Versions = map[string]versionSpan{}
		}
		// The index only orders versions (First) and tells which have
		// enough sessions to be a baseline: once a version has min_sessions,
		// its count is not written again on every session.
		old, ok := idx.Versions[key.Version]
		v := old
		if !ok || seq < v.First {
			v.First = seq
		}
		if v.Total < r.cfg.Detect.MinSessions {
			v.Total = h.Total
		}
		if ok && v == old {
			return false
		}
		idx.Versions[key.Version] = v
		return true
	})
	if err != nil {
		return fmt.Errorf("regression index %s: %w", key.Agent, err)
	}
	idx := *index.Value
	if added {
		r.sessions.WithLabelValues(r.sessionLabels.Values(key.Agent, key.Version)...).Inc()
	}
	// Judging costs more than recording: every evaluate_every-th session of
	// a version, and the one that reaches min_sessions (docs/regression.md).
	if every := r.cfg.EvaluateEvery; every > 1 && p.total%every != 0 && p.total != r.cfg.Detect.MinSessions {
		return nil
	}
	evals, err := r.evaluate(ctx, key, h, idx)
	if err != nil {
		return err
	}
	return r.reconcile(ctx, key, evals, h.Total, card.Session.Key, seq)
}

// thresholds counts the scorecard in its agent's window when some
// threshold watches the agent (regression.thresholds), judges the window
// and publishes what starts firing or resolves. Every scorecard counts,
// scored or not: a rule can be violated by a session no component measured.
func (r *Detector) thresholds(ctx context.Context, card *session.Scorecard, m jetstream.Msg) error {
	agent := card.Session.AgentName
	if agent == "" {
		agent = regress.Unknown
	}
	keep, maxAge, watched := regress.WindowBounds(r.cfg.Thresholds, agent)
	if !watched {
		return nil
	}
	meta, err := m.Metadata()
	if err != nil {
		return failure.Permanent(fmt.Errorf("scorecard without stream metadata: %w", err))
	}
	seq := meta.Sequence.Stream
	// The stream's timestamp, not this process's clock: every replica
	// sees the same window.
	entry := regress.EntryOf(card, seq, meta.Timestamp)
	wkey := regress.ThresholdWindowKey(agent, card.ScoringVersion)
	stripe := &r.stripes[fnv32(wkey)%uint32(len(r.stripes))]
	stripe.Lock()
	defer stripe.Unlock()
	w, _, err := r.windows().Modify(ctx, wkey, nil, func(w *regress.Window) bool { return w.Add(entry, keep, maxAge) })
	if err != nil {
		return fmt.Errorf("threshold window %s: %w", agent, err)
	}
	ev := regress.EvaluateThresholds(w.Value, agent, r.cfg.Thresholds)
	key := regress.Key{Agent: agent, Version: regress.AllVersions, ScoringVersion: card.ScoringVersion}
	return r.reconcile(ctx, key, []regress.Evaluation{ev}, w.Value.Total, card.Session.Key, seq)
}

// pendingSample is a scorecard's sample waiting to be written to its
// history; once done, the history as written, whether the sample was new
// (not a redelivery's), and the history's total just after it.
type pendingSample struct {
	s     regress.Sample
	done  bool
	h     *regress.History
	added bool
	total int
	err   error
}

func (r *Detector) enqueue(k string, s regress.Sample) *pendingSample {
	p := &pendingSample{s: s}
	r.pendingMu.Lock()
	defer r.pendingMu.Unlock()
	if r.pending == nil {
		r.pending = map[string][]*pendingSample{}
	}
	r.pending[k] = append(r.pending[k], p)
	return p
}

// addSamples writes every sample waiting for key's history in one
// compare-and-set (the caller holds the history's stripe): the scorecards
// of one agent and version, handled side by side, wait for the stripe one
// after another, and the first to hold it writes for all of them — one
// history write for a burst of cards instead of one a card. The decoded
// history of the last revision this process wrote is kept, so a process
// that handles an agent's sessions one after another decodes the entry
// only when another replica wrote it since.
func (r *Detector) addSamples(ctx context.Context, key regress.Key) {
	k := regress.HistoryKey(key)
	r.pendingMu.Lock()
	batch := r.pending[k]
	delete(r.pending, k)
	r.pendingMu.Unlock()
	e, _, err := r.histories().Modify(ctx, k, nil, func(h *regress.History) bool {
		h.Key = key
		any := false
		for _, p := range batch {
			p.added = h.Add(p.s, r.cfg.Detect) // false: a redelivery, already there
			p.total = h.Total
			any = any || p.added
		}
		return any
	})
	if err == nil && slices.ContainsFunc(batch, func(p *pendingSample) bool { return p.added }) {
		r.remember(k, e.Rev, e.Value)
	}
	for _, p := range batch {
		p.done, p.h, p.err = true, e.Value, err
	}
}

// cachedHistory is a history as this process last wrote it.
type cachedHistory struct {
	rev uint64
	h   regress.History
}

// maxCachedHistories bounds the cache: beyond it, an arbitrary entry goes.
const maxCachedHistories = 1024

func (r *Detector) remember(k string, rev uint64, h *regress.History) {
	r.cacheMu.Lock()
	defer r.cacheMu.Unlock()
	if r.cache == nil {
		r.cache = map[string]cachedHistory{}
	}
	if _, ok := r.cache[k]; !ok && len(r.cache) >= maxCachedHistories {
		for old := range r.cache {
			delete(r.cache, old)
			break
		}
	}
	// h is not changed after it is written (the caller only reads it), and
	// a cache hit clones before adding: no copy is needed here.
	r.cache[k] = cachedHistory{rev: rev, h: *h}
}

// evaluate runs every detection key's history h has enough sessions for,
// against the version's baseline (regress.Evaluate).
func (r *Detector) evaluate(ctx context.Context, key regress.Key, h *regress.History, idx versionIndex) ([]regress.Evaluation, error) {
	base, baseOf, err := r.baseline(ctx, key, idx)
	if err != nil {
		return nil, err
	}
	return regress.Evaluate(h, base, baseOf, r.cfg.Detect), nil
}

// baseline returns what a version is compared with: the agent's sealed
// baseline (same scoring version) if there is one, else the latest earlier
// version with enough sessions.
func (r *Detector) baseline(ctx context.Context, key regress.Key, idx versionIndex) ([]regress.Sample, string, error) {
	sealed, rev, err := r.baselines().Get(ctx, regress.BaselineKey(key.Agent, key.ScoringVersion))
	if err != nil {
		return nil, "", err
	}
	if rev > 0 && sealed.Version != key.Version {
		return sealed.Samples, "sealed baseline " + sealed.ID + " (version " + sealed.Version + ")", nil
	}
	cur, ok := idx.Versions[key.Version]
	if !ok {
		return nil, "", nil
	}
	var prev string
	var prevSpan versionSpan
	for v, span := range idx.Versions {
		if v == key.Version || span.Total < r.cfg.Detect.MinSessions || span.First >= cur.First {
			continue
		}
		if prev == "" || span.First > prevSpan.First {
			prev, prevSpan = v, span
		}
	}
	if prev == "" {
		return nil, "", nil
	}
	ph, _, err := r.histories().Get(ctx, regress.HistoryKey(regress.Key{Agent: key.Agent, Version: prev, ScoringVersion: key.ScoringVersion}))
	if err != nil {
		return nil, "", err
	}
	return ph.Recent(), "version " + prev, nil
}

// reconcile records the alerts whose state changed and publishes them. A
// change is first written, with compare-and-set, into the state entry's
// outbox, then published with a message id naming the firing episode and the
// status, then cleared from the outbox. Replicas that judged the same state
// cannot both record a change (one loses the compare-and-set and judges
// again); a process that dies after recording leaves the outbox to whoever
// handles the key next; a repeated publish is dropped by JetStream.
func (r *Detector) reconcile(ctx context.Context, key regress.Key, evals []regress.Evaluation, basis int, session string, seq uint64) error {
	states := r.states()
	var pending int
	st, _, err := states.Modify(ctx, regress.AlertStateKey(key), nil, func(st *regress.AlertState) bool {
		pending = len(st.Outbox)
		if basis < st.Basis {
			return false // judged on an older history than the state's: only flush the outbox
		}
		now := r.Now().UTC()
		for _, ev := range evals {
			regress.Advance(st, key, ev, r.cfg.Detect, r.cfg.MinFiring, regress.Trigger{Session: session, Seq: seq, At: now})
		}
		if len(st.Outbox) == pending {
			return false
		}
		st.Basis = basis // new changes: record them first
		return true
	})
	if err != nil {
		return fmt.Errorf("alert state %s: %w", key, err)
	}
	if len(st.Value.Outbox) == 0 {
		return nil
	}
	for _, a := range st.Value.Outbox {
		if err := r.publish(ctx, a); err != nil {
			return err // the outbox keeps it; the redelivery publishes it
		}
	}
	st.Value.Outbox = nil
	if _, err := states.Put(ctx, regress.AlertStateKey(key), st.Value, st.Rev); err != nil && !broker.IsConflict(err) {
		return fmt.Errorf("alert state %s: %w", key, err)
	}
	return nil // on a conflict the next handler of this key publishes the outbox again, deduplicated
}

// publish sends one alert; its message id (the episode's id and the
// status) makes a repeat a duplicate.
func (r *Detector) publish(ctx context.Context, a wire.Alert) error {
	if a.Kind == regress.KindThreshold {
		a.Severity = regress.ThresholdSeverity(r.cfg.Thresholds, a.Metric)
	}
	data, err := json.Marshal(a)
	if err != nil {
		return failure.Permanent(err)
	}
	msg := nats.NewMsg(r.Subjects.Alert(a.Kind, a.Agent))
	msg.Data = data
	msg.Header.Set(wire.HeaderAlertStatus, a.Status)
	msg.Header.Set(wire.HeaderAgentName, a.Agent)
	pctx, cancel := context.WithTimeout(ctx, r.Timeouts.Publish)
	defer cancel()
	ack, err := r.JS.PublishMsg(pctx, msg, jetstream.WithMsgID(a.ID+"#"+a.Status), jetstream.WithExpectStream(r.Subjects.AlertStream()))
	if err != nil {
		return fmt.Errorf("publish alert %s: %w", a.ID, err)
	}
	if !ack.Duplicate {
		r.alerts.WithLabelValues(a.Kind, a.Status).Inc()
		r.Log.Warn("regression alert", "kind", a.Kind, "status", a.Status, "agent", a.Agent, "version", a.Version,
			"metric", a.Metric, "baseline", a.Baseline, "current", a.Current, "baseline_of", a.BaselineOf)
	}
	return nil
}

// states, indexes, baselines and histories are the detector's entries.
func (r *Detector) states() broker.KV[regress.AlertState] {
	return broker.KV[regress.AlertState]{Bucket: r.kv, Timeout: r.Timeouts.Request, Attempts: 20}
}

func (r *Detector) windows() broker.KV[regress.Window] {
	return broker.KV[regress.Window]{Bucket: r.kv, Timeout: r.Timeouts.Request, Attempts: 50}
}

func (r *Detector) indexes() broker.KV[versionIndex] {
	return broker.KV[versionIndex]{Bucket: r.kv, Timeout: r.Timeouts.Request, Attempts: 50, Recent: r.recent}
}

func (r *Detector) baselines() broker.KV[regress.Baseline] {
	return broker.KV[regress.Baseline]{Bucket: r.kv, Timeout: r.Timeouts.Request}
}

// histories encode with goccy/go-json, and decode the revision this process
// last wrote from its cache.
func (r *Detector) histories() broker.KV[regress.History] {
	return broker.KV[regress.History]{Bucket: r.kv, Timeout: r.Timeouts.Request, Attempts: 50, Recent: r.recent,
		Encode: func(h *regress.History) ([]byte, error) { return gojson.Marshal(h) },
		Decode: func(key string, rev uint64, data []byte, h *regress.History) error {
			r.cacheMu.Lock()
			c, ok := r.cache[key]
			r.cacheMu.Unlock()
			if ok && c.rev == rev {
				*h = c.h.Clone()
				return nil
			}
			return gojson.Unmarshal(data, h)
		}}
}

func fnv32(s string) uint32 {
	h := fnv.New32a()
	_, _ = h.Write([]byte(s))
	return h.Sum32()
}
