package consumer

import (
	"context"

	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"log/slog"
	"math"
	"sync"
	"time"

	gojson "github.com/goccy/go-json"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/lkscore/lkscore/config"
	"github.com/lkscore/lkscore/consumer/internal/failure"
	"github.com/lkscore/lkscore/regress"
	"github.com/lkscore/lkscore/scoring"
	"github.com/lkscore/lkscore/wire"
)

// alertState is what the detector remembers per agent/version/scoring
// version: the alerts firing now, by kind/metric, and the outbox of state
// changes recorded but maybe not yet published.
type alertState struct {
	Firing map[string]wire.Alert `json:"firing"`
	Outbox []wire.Alert          `json:"outbox,omitempty"`
	// Basis is the history size the last recorded change was judged on:
	// a replica that judged an older snapshot changes nothing.
	Basis int `json:"basis"`
}

// versionIndex lists an agent's versions (per scoring version), for
// finding the previous one.
type versionIndex struct {
	Versions map[string]versionSpan `json:"versions"`
}

type versionSpan struct {
	First uint64 `json:"first_seq"`
	Total int    `json:"total"` // sessions, counted up to min_sessions
}

// regressor keeps per-agent/version history in a KV bucket and raises
// alerts. Replicas share its durable consumer; every state change is a
// compare-and-set, and every alert carries a message id derived from the
// state it changes, so two replicas never publish one alert twice.
type regressor struct {
	kv       jetstream.KeyValue
	js       jetstream.JetStream
	subjects wire.Subjects
	cfg      config.Regression
	timeouts timeouts
	alerts   *prometheus.CounterVec // kind, status
	sessions *prometheus.CounterVec // agent, version
	log      *slog.Logger
	now      func() time.Time
	// stripes serialize, within this process, the handling of scorecards of
	// one agent/version: they share one history entry, and goroutines
	// racing on it would only lose compare-and-sets to each other.
	stripes [64]sync.Mutex
	cacheMu sync.Mutex
	cache   map[string]cachedHistory // by history key
}

// OpenRegressionBucket creates or opens the detector's KV bucket.
func OpenRegressionBucket(ctx context.Context, js jetstream.JetStream, s wire.Subjects, n config.NATS) (jetstream.KeyValue, error) {
	ctx, cancel := context.WithTimeout(ctx, n.RequestTimeout) // the caller's deadline, if shorter, wins
	defer cancel()
	kv, err := js.CreateOrUpdateKeyValue(ctx, jetstream.KeyValueConfig{
		Bucket: s.RegressionBucket(), Description: "lkscore regression detection: history per agent/version, alert state, sealed baselines",
		Storage: storageType(n.Storage), Replicas: n.Replicas, History: 1,
	})
	if err != nil {
		return nil, fmt.Errorf("regression bucket: %w", err)
	}
	return kv, nil
}

// handle feeds one scorecard to detection.
func (r *regressor) handle(ctx context.Context, m jetstream.Msg) error {
	var card scoring.Scorecard
	if err := gojson.Unmarshal(m.Data(), &card); err != nil { // the workers' own bytes: goccy, 4x encoding/json
		return failure.Permanent(fmt.Errorf("scorecard is not valid JSON: %w", err))
	}
	meta, err := m.Metadata()
	if err != nil {
		return failure.Permanent(fmt.Errorf("scorecard without stream metadata: %w", err))
	}
	seq := meta.Sequence.Stream
	key := regress.KeyOf(&card, r.cfg.VersionTag)
	stripe := &r.stripes[fnv32(wire.HistoryKey(key))%uint32(len(r.stripes))]
	stripe.Lock()
	defer stripe.Unlock()
	sample := regress.SampleOf(&card, seq)
	h, added, err := r.addSample(ctx, key, sample)
	if err != nil {
		return fmt.Errorf("regression history %s: %w", key, err)
	}
	var idx versionIndex
	if err := modifyJSON(ctx, r, wire.VersionIndexKey(key.Agent, key.ScoringVersion), &idx, func() bool {
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
	}); err != nil {
		return fmt.Errorf("regression index %s: %w", key.Agent, err)
	}
	if added {
		r.sessions.WithLabelValues(key.Agent, key.Version).Inc()
	}
	// Judging costs more than recording: every evaluate_every-th session of
	// a version, and the one that reaches min_sessions (docs/regression.md).
	if every := r.cfg.EvaluateEvery; every > 1 && h.Total%every != 0 && h.Total != r.cfg.Detect.MinSessions {
		return nil
	}
	evals, err := r.evaluate(ctx, key, h, idx)
	if err != nil {
		return err
	}
	return r.reconcile(ctx, key, evals, h.Total, card.Session.Key, seq)
}

// addSample adds a sample to its history entry with compare-and-set. The
// decoded history of the last revision this process wrote is kept, so a
// process that handles an agent's sessions one after another decodes the
// entry only when another replica wrote it since.
func (r *regressor) addSample(ctx context.Context, key regress.Key, s regress.Sample) (*regress.History, bool, error) {
	k := wire.HistoryKey(key)
	for attempt := 0; ; attempt++ {
		gctx, cancel := context.WithTimeout(ctx, r.timeouts.request)
		e, err := r.kv.Get(gctx, k)
		cancel()
		var h regress.History
		var rev uint64
		switch {
		case errors.Is(err, jetstream.ErrKeyNotFound):
		case err != nil:
			return nil, false, fmt.Errorf("read %s: %w", k, err)
		default:
			rev = e.Revision()
			r.cacheMu.Lock()
			c, ok := r.cache[k]
			r.cacheMu.Unlock()
			if ok && c.rev == rev {
				h = c.h.Clone()
			} else if err := gojson.Unmarshal(e.Value(), &h); err != nil {
				return nil, false, failure.Permanent(fmt.Errorf("%s is not valid JSON: %w", k, err))
			}
		}
		h.Key = key
		if !h.Add(s, r.cfg.Detect) {
			return &h, false, nil // a redelivery: already there
		}
		data, err := gojson.Marshal(&h)
		if err != nil {
			return nil, false, failure.Permanent(err)
		}
		if rev, err = r.put(ctx, k, data, rev); err == nil {
			r.remember(k, rev, &h)
			return &h, true, nil
		}
		if !isCASConflict(err) || attempt >= 50 {
			return nil, false, err
		}
	}
}

// cachedHistory is a history as this process last wrote it.
type cachedHistory struct {
	rev uint64
	h   regress.History
}

// maxCachedHistories bounds the cache: beyond it, an arbitrary entry goes.
const maxCachedHistories = 1024

func (r *regressor) remember(k string, rev uint64, h *regress.History) {
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

// evaluation is one kind of detection run on a key: the metrics it judged
// and those firing, with the evidence.
type evaluation struct {
	kind       string
	judged     []string
	firing     map[string]regress.Signal
	baselineOf string
	comparison *regress.Comparison
	worst      []regress.SessionRef      // drift and failures: the worst of the latest sessions
	status     map[string]regress.Signal // drift and failures: every judged metric, firing or not
}

func (r *regressor) evaluate(ctx context.Context, key regress.Key, h *regress.History, idx versionIndex) ([]evaluation, error) {
	cfg := r.cfg.Detect
	var out []evaluation
	continuous, failures := []string{}, []string{regress.MetricCRError, regress.MetricFailed}
	for _, name := range regress.MetricNames() {
		if name != regress.MetricToolErrors && name != regress.MetricInterrupts && name != regress.MetricCRError && name != regress.MetricFailed {
			continuous = append(continuous, name)
		}
	}
	base, baseOf, err := r.baseline(ctx, key, idx)
	if err != nil {
		return nil, err
	}
	if base != nil {
		c, sig := regress.Regression(base, h.Recent(), cfg)
		if c.Judged {
			ev := evaluation{kind: regress.KindRegression, firing: map[string]regress.Signal{}, baselineOf: baseOf, comparison: &c}
			for _, m := range c.Metrics {
				ev.judged = append(ev.judged, m.Metric)
			}
			for _, s := range sig {
				ev.firing[s.Metric] = s
			}
			out = append(out, ev)
		}
	}
	if h.Total >= cfg.DriftWindow*(cfg.DriftCalibration+1) {
		ev := evaluation{kind: regress.KindDrift, judged: continuous, firing: map[string]regress.Signal{},
			baselineOf: fmt.Sprintf("this version's first %d sessions", cfg.DriftWindow*cfg.DriftCalibration),
			worst:      regress.WorstSessions(latestN(h.Recent(), cfg.DriftWindow), 5)}
		ev.status = map[string]regress.Signal{}
		for _, s := range regress.DriftStatus(h, cfg) {
			ev.status[s.Metric] = s
			if s.Firing {
				ev.firing[s.Metric] = s
			}
		}
		out = append(out, ev)
	}
	if len(h.Recent()) >= cfg.SpikeWindow+cfg.MinSessions {
		ev := evaluation{kind: regress.KindFailures, judged: failures, firing: map[string]regress.Signal{},
			baselineOf: "this version's earlier sessions", worst: regress.WorstSessions(latestN(h.Recent(), cfg.SpikeWindow), 5)}
		ev.status = map[string]regress.Signal{}
		for _, s := range regress.SpikeStatus(h, cfg) {
			ev.status[s.Metric] = s
			if s.Firing {
				ev.firing[s.Metric] = s
			}
		}
		out = append(out, ev)
	}
	return out, nil
}

// baseline returns what a version is compared with: the agent's sealed
// baseline (same scoring version) if there is one, else the latest earlier
// version with enough sessions.
func (r *regressor) baseline(ctx context.Context, key regress.Key, idx versionIndex) ([]regress.Sample, string, error) {
	var sealed regress.Baseline
	ok, err := getJSON(ctx, r, wire.BaselineKey(key.Agent, key.ScoringVersion), &sealed)
	if err != nil {
		return nil, "", err
	}
	if ok && sealed.Version != key.Version {
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
	var ph regress.History
	if _, err := getJSON(ctx, r, wire.HistoryKey(regress.Key{Agent: key.Agent, Version: prev, ScoringVersion: key.ScoringVersion}), &ph); err != nil {
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
func (r *regressor) reconcile(ctx context.Context, key regress.Key, evals []evaluation, basis int, session string, seq uint64) error {
	for attempt := 0; ; attempt++ {
		var st alertState
		rev, err := getJSONRev(ctx, r, wire.AlertStateKey(key), &st)
		if err != nil {
			return err
		}
		if st.Firing == nil {
			st.Firing = map[string]wire.Alert{}
		}
		pending := st.Outbox
		st.Outbox = append([]wire.Alert(nil), pending...)
		now := r.now().UTC()
		if basis < st.Basis {
			evals = nil // judged on an older history than the state's: only flush the outbox
		}
		for _, ev := range evals {
			for _, metric := range ev.judged {
				id := ev.kind + "/" + metric
				old, wasFiring := st.Firing[id]
				sig, firing := ev.firing[metric]
				switch {
				case firing && !wasFiring:
					a := r.alertFrom(key, ev, sig, session, seq, now)
					a.Status, a.Since = wire.AlertFiring, now
					a.ID = fmt.Sprintf("%s/%s/%s/%s/%s@%d", ev.kind, key.Agent, key.Version, key.ScoringVersion, metric, seq)
					st.Firing[id] = a
					st.Outbox = append(st.Outbox, a)
				case !firing && wasFiring && ev.clear(metric, r.cfg.Detect) && now.Sub(old.Since) >= r.cfg.MinFiring:
					// Held for regression.min_firing at least: a burst of
					// sessions cannot fire and resolve an alert in one go.
					// The figures and sessions that resolved it, not the firing ones.
					a := old
					if cur, ok := latest(ev, metric); ok {
						a.Baseline, a.Current, a.Effect, a.PValue, a.QValue = cur.Baseline, cur.Current, cur.Effect, cur.P, cur.Q
						if cur.NCurrent > 0 {
							a.Limit, a.NBaseline, a.NCurrent = cur.Limit, cur.NBaseline, cur.NCurrent
						}
					}
					if c := ev.comparison; c != nil {
						a.WorstSessions, a.CodesGrown = c.WorstSessions, c.CodesGrown
					} else {
						a.WorstSessions, a.CodesGrown = ev.worst, nil
					}
					a.Status, a.At, a.Session, a.Seq = wire.AlertResolved, now, session, seq
					delete(st.Firing, id)
					st.Outbox = append(st.Outbox, a)
				}
			}
		}
		if len(st.Outbox) == 0 {
			return nil
		}
		if len(st.Outbox) > len(pending) { // new changes: record them first
			st.Basis = basis
			if rev, err = r.casState(ctx, key, st, rev); err != nil {
				if isCASConflict(err) && attempt < 20 {
					continue // another replica changed the state: judge again against it
				}
				return fmt.Errorf("alert state %s: %w", key, err)
			}
		}
		for _, a := range st.Outbox {
			if err := r.publish(ctx, a); err != nil {
				return err // the outbox keeps it; the redelivery publishes it
			}
		}
		st.Outbox = nil
		if _, err := r.casState(ctx, key, st, rev); err != nil && !isCASConflict(err) {
			return fmt.Errorf("alert state %s: %w", key, err)
		}
		return nil // on a conflict the next handler of this key publishes the outbox again, deduplicated
	}
}

func (r *regressor) casState(ctx context.Context, key regress.Key, st alertState, rev uint64) (uint64, error) {
	data, err := json.Marshal(st)
	if err != nil {
		return 0, failure.Permanent(err)
	}
	return r.put(ctx, wire.AlertStateKey(key), data, rev)
}

// put writes key with compare-and-set: created when rev is 0 (absent),
// else updated only if still at rev. It returns the new revision.
func (r *regressor) put(ctx context.Context, key string, data []byte, rev uint64) (uint64, error) {
	cctx, cancel := context.WithTimeout(ctx, r.timeouts.request)
	defer cancel()
	if rev == 0 {
		return r.kv.Create(cctx, key, data)
	}
	return r.kv.Update(cctx, key, data, rev)
}

// clear reports whether a firing metric is clearly back to normal. For a
// version against its baseline that takes more than "no longer
// significant": the q-value above 2 × fdr, or the effect below half the
// minimum, so that a metric hovering at the threshold does not fire and
// resolve by turns. Drift and failure spikes resolve when their test no
// longer fires.
func (ev evaluation) clear(metric string, cfg regress.Config) bool {
	if ev.comparison == nil {
		return true
	}
	fdr := cfg.FDR
	if fdr <= 0 {
		fdr = regress.DefaultConfig().FDR
	}
	for _, m := range ev.comparison.Metrics {
		if m.Metric == metric {
			return !m.Worse || m.Q > 2*fdr || math.Abs(m.Effect) < m.MinEffect/2
		}
	}
	return true
}

// latest returns the figures of a metric's judgement when it is no longer
// firing (Compare's result), for the resolved message.
func latest(ev evaluation, metric string) (regress.Signal, bool) {
	if ev.comparison == nil {
		s, ok := ev.status[metric] // drift and failures
		return s, ok
	}
	for _, m := range ev.comparison.Metrics {
		if m.Metric == metric {
			return regress.Signal{Baseline: m.Baseline, Current: m.Current, Effect: m.Effect, P: m.P, Q: m.Q}, true
		}
	}
	return regress.Signal{}, false
}

func (r *regressor) alertFrom(key regress.Key, ev evaluation, s regress.Signal, session string, seq uint64, now time.Time) wire.Alert {
	a := wire.Alert{Kind: ev.kind, Agent: key.Agent, Version: key.Version, ScoringVersion: key.ScoringVersion, Metric: s.Metric,
		Baseline: s.Baseline, Current: s.Current, Effect: s.Effect, PValue: s.P, QValue: s.Q, Limit: s.Limit, Test: s.Test,
		NBaseline: s.NBaseline, NCurrent: s.NCurrent, BaselineOf: ev.baselineOf, Session: session, Seq: seq, At: now}
	if c := ev.comparison; c != nil {
		a.WorstSessions, a.CodesGrown = c.WorstSessions, c.CodesGrown
	} else {
		a.WorstSessions = ev.worst
	}
	return a
}

// latestN returns the last n of samples (all of them when fewer).
func latestN(samples []regress.Sample, n int) []regress.Sample {
	return samples[max(0, len(samples)-n):]
}

// publish sends one alert; its message id (the episode's id and the
// status) makes a repeat a duplicate.
func (r *regressor) publish(ctx context.Context, a wire.Alert) error {
	data, err := json.Marshal(a)
	if err != nil {
		return failure.Permanent(err)
	}
	msg := nats.NewMsg(r.subjects.Alert(a.Kind, a.Agent))
	msg.Data = data
	msg.Header.Set(wire.HeaderAlertStatus, a.Status)
	msg.Header.Set(wire.HeaderAgentName, a.Agent)
	pctx, cancel := context.WithTimeout(ctx, r.timeouts.publish)
	defer cancel()
	ack, err := r.js.PublishMsg(pctx, msg, jetstream.WithMsgID(a.ID+"#"+a.Status), jetstream.WithExpectStream(r.subjects.AlertStream()))
	if err != nil {
		return fmt.Errorf("publish alert %s: %w", a.ID, err)
	}
	if !ack.Duplicate {
		r.alerts.WithLabelValues(a.Kind, a.Status).Inc()
		r.log.Warn("regression alert", "kind", a.Kind, "status", a.Status, "agent", a.Agent, "version", a.Version,
			"metric", a.Metric, "baseline", a.Baseline, "current", a.Current, "baseline_of", a.BaselineOf)
	}
	return nil
}

// modifyJSON applies change to the JSON value under key with
// compare-and-set, retrying on conflicts; change returns false when it
// changed nothing (no write). v holds the value afterwards.
func modifyJSON[T any](ctx context.Context, r *regressor, key string, v *T, change func() bool) error {
	for attempt := 0; ; attempt++ {
		var zero T
		*v = zero
		rev, err := getJSONRev(ctx, r, key, v)
		if err != nil {
			return err
		}
		if !change() {
			return nil
		}
		data, err := json.Marshal(v)
		if err != nil {
			return failure.Permanent(err)
		}
		if _, err = r.put(ctx, key, data, rev); err == nil {
			return nil
		}
		if !isCASConflict(err) || attempt >= 50 {
			return err
		}
	}
}

func getJSON(ctx context.Context, r *regressor, key string, v any) (bool, error) {
	rev, err := getJSONRev(ctx, r, key, v)
	return rev > 0, err
}

// getJSONRev reads key into v; revision 0 means absent.
func getJSONRev(ctx context.Context, r *regressor, key string, v any) (uint64, error) {
	gctx, cancel := context.WithTimeout(ctx, r.timeouts.request)
	defer cancel()
	e, err := r.kv.Get(gctx, key)
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("read %s: %w", key, err)
	}
	if err := json.Unmarshal(e.Value(), v); err != nil {
		return 0, failure.Permanent(fmt.Errorf("%s is not valid JSON: %w", key, err))
	}
	return e.Revision(), nil
}

func fnv32(s string) uint32 {
	h := fnv.New32a()
	_, _ = h.Write([]byte(s))
	return h.Sum32()
}
