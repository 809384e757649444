package rescore

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/lkscore/lkscore/config"
	"github.com/lkscore/lkscore/consumer/broker"
	"github.com/lkscore/lkscore/consumer/internal/score"
	"github.com/lkscore/lkscore/consumer/internal/work"
	"github.com/lkscore/lkscore/recording"
	"github.com/lkscore/lkscore/rules"
	"github.com/lkscore/lkscore/scoring"
	"github.com/lkscore/lkscore/wire"
)

// Options say what `lkscore rescore` re-scores and how.
type Options struct {
	// Since: the sessions whose work or scorecard the streams stored at or
	// after it.
	Since time.Time
	Agent string // empty: every agent
	// DryRun only prints the diff; otherwise the new scorecards are
	// published through the workers.
	DryRun bool
	// MeasureAudio measures every recording's audio again; otherwise a
	// session's audio comes from its latest scorecard when that was scored
	// by this scoring model (the measurement depends only on the recording,
	// the model and scoring.audio.awkward_silence_ms, audio.max_duration).
	MeasureAudio bool
	// InFlight bounds the rescore items enqueued and not yet scored: the
	// workers' pace sets the rescore's.
	InFlight int
	// Wait bounds how long to wait for the workers' scorecards once all is
	// enqueued.
	Wait time.Duration
	// Progress gets a progress line now and then (nil: none).
	Progress io.Writer
}

// Report is what a rescore found and did.
type Report struct {
	ScoringVersion string   `json:"scoring_version"`
	Since          string   `json:"since"`
	Agent          string   `json:"agent,omitempty"`
	DryRun         bool     `json:"dry_run"`
	OldVersions    []string `json:"old_scoring_versions"`
	// Sessions the streams hold since Since (of Agent); Rescored of them
	// were scored here; Removed could not be (retention or forget removed
	// what they need), Failed for another reason.
	Sessions      int              `json:"sessions"`
	Rescored      int              `json:"rescored"`
	Removed       []MissingSession `json:"removed"`
	Failed        []MissingSession `json:"failed"`
	AudioReused   int              `json:"audio_reused"`
	AudioMeasured int              `json:"audio_measured"`
	Agents        []AgentDiff      `json:"agents"`
	// Movers are the sessions whose score or verdict moved most; Changed
	// every session whose verdict, score, findings or rules changed.
	Movers  []SessionDiff `json:"movers"`
	Changed []SessionDiff `json:"changed"`
	// Publishing (not a dry run): already published under the version
	// before this run, enqueued by it, published by the workers, and
	// published scorecards whose bytes differ from this run's.
	AlreadyPublished int      `json:"already_published"`
	Enqueued         int      `json:"enqueued"`
	Published        int      `json:"published"`
	NotYetPublished  []string `json:"not_yet_published,omitempty"`
	Mismatched       []string `json:"mismatched,omitempty"`
}

// MissingSession is a session a rescore could not score, and why.
type MissingSession struct {
	Session string `json:"session"`
	Agent   string `json:"agent"`
	Why     string `json:"why"`
}

// AgentDiff is how one agent's verdicts move.
type AgentDiff struct {
	Agent    string `json:"agent"`
	Sessions int    `json:"sessions"`
	// Transitions count verdict changes, "pass→fail": n; New counts the
	// sessions with no earlier scorecard.
	Transitions map[string]int `json:"transitions"`
	New         int            `json:"new"`
	MeanDelta   float64        `json:"mean_score_delta"`
	Violations  map[string]int `json:"rule_violations,omitempty"`
}

// SessionDiff is one session's old and new scorecard, in brief.
type SessionDiff struct {
	Session string       `json:"session"`
	Agent   string       `json:"agent"`
	Old     *CardSummary `json:"old,omitempty"`
	New     CardSummary  `json:"new"`
}

// CardSummary is a scorecard in brief.
type CardSummary struct {
	ScoringVersion string   `json:"scoring_version"`
	Policy         string   `json:"policy,omitempty"`
	Verdict        string   `json:"verdict"`
	Score          float64  `json:"score"`
	Findings       []string `json:"findings"`
	RulesViolated  []string `json:"rules_violated,omitempty"`
}

func summarize(c *scoring.Scorecard) CardSummary {
	s := CardSummary{ScoringVersion: c.ScoringVersion, Verdict: c.Overall.Verdict, Score: c.Overall.Score, Findings: []string{}}
	if c.Policy != nil {
		s.Policy = c.Policy.Name
	}
	counts := map[string]int{}
	var codes []string
	for _, comp := range c.Components {
		for _, f := range comp.Findings {
			if counts[f.Code] == 0 {
				codes = append(codes, f.Code)
			}
			counts[f.Code]++
		}
	}
	sort.Strings(codes)
	for _, code := range codes {
		if counts[code] > 1 {
			code = fmt.Sprintf("%s×%d", code, counts[code])
		}
		s.Findings = append(s.Findings, code)
	}
	for _, r := range c.Rules {
		if r.Status == scoring.RuleViolated {
			s.RulesViolated = append(s.RulesViolated, r.Name)
		}
	}
	return s
}

// storedCard is the latest scorecard of a session under one version.
type storedCard struct {
	seq  uint64
	data []byte
}

// rescoreTarget is a session to re-score: its latest work item.
type rescoreTarget struct {
	item work.Item
	key  string
}

// Run re-scores the sessions the streams hold since o.Since under
// cfg's scoring model (its policies and rules): each session's latest work
// item in the sessions stream, its recording and audio in the store, its
// facts as the item carries them. It diffs the new scorecards with the
// latest earlier ones and, unless o.DryRun, has the workers publish them:
// one rescore item per session and scoring version on the session's
// subject (deduplicated by the stream on "rescore:<session>@<version>"),
// the scoring config in the scoring bucket, at most o.InFlight enqueued
// ahead of what the workers published. Run again after a kill, it skips
// what is published or enqueued: each session gets one scorecard per
// version.
func Run(ctx context.Context, js jetstream.JetStream, s wire.Subjects, cfg config.Config, st score.Reader, o Options) (Report, error) {
	scorer, err := rules.NewScorer(cfg.Scoring)
	if err != nil {
		return Report{}, err
	}
	version := scorer.Version()
	// What the workers publish from here on is followed from here: an item
	// an earlier run enqueued may be scored while this one reads.
	began := time.Now().Add(-time.Second)
	rep := Report{ScoringVersion: version, Since: o.Since.UTC().Format(time.RFC3339), Agent: o.Agent, DryRun: o.DryRun,
		Removed: []MissingSession{}, Failed: []MissingSession{}, Agents: []AgentDiff{}, Movers: []SessionDiff{}, Changed: []SessionDiff{},
		OldVersions: []string{}}
	wait := cfg.NATS.RequestTimeout
	progress := func(format string, a ...any) {
		if o.Progress != nil {
			fmt.Fprintf(o.Progress, "rescore: "+format+"\n", a...)
		}
	}

	// The scorecards: the latest per session under another version (the
	// diff's old side), and those already under this one.
	old := map[string]storedCard{}
	oldVersion := map[string]string{}
	published := map[string]storedCard{}
	err = readSince(ctx, js, s.ResultStream(), o.Since, wait, func(m jetstream.Msg, seq uint64) {
		key, v := m.Headers().Get(wire.HeaderSessionKey), m.Headers().Get(wire.HeaderScoringVersion)
		if o.Agent != "" && m.Headers().Get(wire.HeaderAgentName) != o.Agent {
			return
		}
		if v == version {
			published[key] = storedCard{seq: seq, data: m.Data()}
			return
		}
		old[key] = storedCard{seq: seq, data: m.Data()}
		oldVersion[key] = v
	})
	if err != nil {
		return rep, fmt.Errorf("read %s: %w", s.ResultStream(), err)
	}
	// The work: each session's latest original item, and the rescore
	// items of this version already enqueued.
	targets := map[string]*rescoreTarget{}
	enqueued := map[string]bool{}
	err = readSince(ctx, js, s.SessionStream(), o.Since, wait, func(m jetstream.Msg, _ uint64) {
		var item work.Item
		if json.Unmarshal(m.Data(), &item) != nil || item.SessionKey == "" {
			return
		}
		if o.Agent != "" && item.AgentName != o.Agent {
			return
		}
		switch item.ScoringVersion {
		case "":
			targets[item.SessionKey] = &rescoreTarget{item: item, key: item.SessionKey}
		case version:
			enqueued[item.SessionKey] = true
		}
	})
	if err != nil {
		return rep, fmt.Errorf("read %s: %w", s.SessionStream(), err)
	}

	keys := make([]string, 0, len(targets)+len(old))
	for k := range targets {
		keys = append(keys, k)
	}
	for k := range old {
		if targets[k] == nil {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	rep.Sessions = len(keys)
	versions := map[string]bool{}
	for _, v := range oldVersion {
		versions[v] = true
	}
	for v := range versions {
		rep.OldVersions = append(rep.OldVersions, v)
	}
	sort.Strings(rep.OldVersions)
	progress("%d sessions since %s; scoring version %s", len(keys), rep.Since, version)

	inputs := score.NewInputs(st, cfg.Privacy, cfg.Limits, cfg.Audio, cfg.Scoring.Audio)
	noAudio := inputs
	noAudio.DisableAudio()
	fresh := map[string][]byte{} // this run's scorecards, by session
	agents := map[string]*AgentDiff{}
	deltas := map[string][]float64{}
	diffs := []SessionDiff{}
	for i, key := range keys {
		t := targets[key]
		var oldCard *scoring.Scorecard
		if oc, ok := old[key]; ok {
			var c scoring.Scorecard
			if json.Unmarshal(oc.data, &c) == nil {
				oldCard = &c
			}
		}
		agent := ""
		switch {
		case t != nil:
			agent = t.item.AgentName
		case oldCard != nil:
			agent = oldCard.Session.AgentName
		}
		if t == nil {
			rep.Removed = append(rep.Removed, MissingSession{Session: key, Agent: agent,
				Why: "its work item is gone from " + s.SessionStream() + " (nats.max_age): only its scorecard is left"})
			continue
		}
		in := inputs
		reuse := !o.MeasureAudio && oldCard != nil && oldCard.ModelVersion == scoring.ModelVersion && !t.item.MetadataOnly
		if reuse {
			in = noAudio
		}
		sess, err := in.Input(ctx, t.item)
		if errors.Is(err, recording.ErrNotFound) {
			rep.Removed = append(rep.Removed, MissingSession{Session: key, Agent: agent,
				Why: "its recording is gone from the store (retention, privacy.mode metadata_only or forget): " + err.Error()})
			continue
		}
		if err != nil {
			if ctx.Err() != nil {
				return rep, ctx.Err()
			}
			rep.Failed = append(rep.Failed, MissingSession{Session: key, Agent: agent, Why: err.Error()})
			continue
		}
		switch {
		case reuse:
			sess.Audio = oldCard.Audio
			if sess.Audio != nil {
				rep.AudioReused++
			}
		case sess.Audio != nil:
			rep.AudioMeasured++
		}
		card := scorer.Score(sess)
		data, err := json.Marshal(card)
		if err != nil {
			return rep, err
		}
		fresh[key] = data
		rep.Rescored++
		a := agents[agent]
		if a == nil {
			a = &AgentDiff{Agent: agent, Transitions: map[string]int{}}
			agents[agent] = a
		}
		a.Sessions++
		d := SessionDiff{Session: key, Agent: agent, New: summarize(&card)}
		for _, r := range d.New.RulesViolated {
			if a.Violations == nil {
				a.Violations = map[string]int{}
			}
			a.Violations[r]++
		}
		if oldCard == nil {
			a.New++
		} else {
			prev := summarize(oldCard)
			d.Old = &prev
			if prev.Verdict != d.New.Verdict {
				a.Transitions[prev.Verdict+"→"+d.New.Verdict]++
			}
			deltas[agent] = append(deltas[agent], d.New.Score-prev.Score)
		}
		if d.Old == nil || d.Old.Verdict != d.New.Verdict || d.Old.Score != d.New.Score ||
			!slices.Equal(d.Old.Findings, d.New.Findings) || !slices.Equal(d.Old.RulesViolated, d.New.RulesViolated) {
			diffs = append(diffs, d)
		}
		if (i+1)%500 == 0 {
			progress("scored %d/%d", i+1, len(keys))
		}
	}
	for _, a := range agents {
		if ds := deltas[a.Agent]; len(ds) > 0 {
			var sum float64
			for _, d := range ds {
				sum += d
			}
			a.MeanDelta = math.Round(sum/float64(len(ds))*100) / 100
		}
		rep.Agents = append(rep.Agents, *a)
	}
	sort.Slice(rep.Agents, func(i, j int) bool { return rep.Agents[i].Agent < rep.Agents[j].Agent })
	rep.Changed = diffs
	rep.Movers = movers(diffs, 10)
	if o.DryRun {
		return rep, nil
	}
	return rep, publishRescore(ctx, js, s, cfg.NATS, scorer, began, targets, fresh, published, enqueued, o, &rep, progress)
}

// movers are the n sessions that moved most: a verdict change first, then
// the largest score change; ties by session key.
func movers(diffs []SessionDiff, n int) []SessionDiff {
	type scored struct {
		d       SessionDiff
		verdict bool
		delta   float64
	}
	var all []scored
	for _, d := range diffs {
		if d.Old == nil {
			continue
		}
		all = append(all, scored{d, d.Old.Verdict != d.New.Verdict, math.Abs(d.New.Score - d.Old.Score)})
	}
	sort.SliceStable(all, func(i, j int) bool {
		if all[i].verdict != all[j].verdict {
			return all[i].verdict
		}
		if all[i].delta != all[j].delta {
			return all[i].delta > all[j].delta
		}
		return all[i].d.Session < all[j].d.Session
	})
	out := []SessionDiff{}
	for _, s := range all[:min(n, len(all))] {
		out = append(out, s.d)
	}
	return out
}

// publishRescore puts the scoring config where the workers find it,
// enqueues one rescore item per session not yet published or enqueued
// under the version, and follows the results stream until the workers have
// published every one (or o.Wait passes).
func publishRescore(ctx context.Context, js jetstream.JetStream, s wire.Subjects, n config.NATS, scorer *scoring.Scorer, start time.Time,
	targets map[string]*rescoreTarget,
	fresh map[string][]byte, published map[string]storedCard, enqueued map[string]bool, o Options, rep *Report,
	progress func(string, ...any)) error {
	version := scorer.Version()
	cfgJSON, err := json.Marshal(scorer.Config())
	if err != nil {
		return err
	}
	kv, err := js.CreateOrUpdateKeyValue(ctx, jetstream.KeyValueConfig{Bucket: s.ScoringBucket(),
		Description: "lkscore rescore: the scoring configs the workers score rescore items with, by scoring version",
		Storage:     broker.StorageType(n.Storage), Replicas: n.Replicas, History: 1})
	if err != nil {
		return fmt.Errorf("scoring bucket: %w", err)
	}
	if _, err := kv.Put(ctx, score.ScoringKey(version), cfgJSON); err != nil {
		return fmt.Errorf("scoring bucket: %w", err)
	}
	var todo, waiting []string
	for key := range fresh {
		switch {
		case published[key].data != nil:
			rep.AlreadyPublished++
		case enqueued[key]:
			waiting = append(waiting, key)
		default:
			todo = append(todo, key)
		}
	}
	sort.Strings(todo)
	want := len(todo) + len(waiting)
	progress("%d already published under %s, %d enqueued by an earlier run, %d to enqueue", rep.AlreadyPublished, version, len(waiting), len(todo))

	// Follow what the workers publish under the version for the sessions
	// this run waits for.
	wanted := map[string][]byte{}
	for _, key := range append(append([]string(nil), todo...), waiting...) {
		wanted[key] = fresh[key]
	}
	w := &rescoreWatch{version: version, targets: wanted, got: map[string][]byte{}}
	watchCtx, stopWatch := context.WithCancel(ctx)
	defer stopWatch()
	var wg sync.WaitGroup
	var watchErr error
	wg.Add(1)
	go func() {
		defer wg.Done()
		watchErr = w.follow(watchCtx, js, s.ResultStream(), start)
	}()
	defer wg.Wait()

	inFlight := max(o.InFlight, 1)
	last := time.Now()
	for i, key := range todo {
		for i-w.count() >= inFlight+len(waiting) { // backpressure: the workers' pace
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-time.After(20 * time.Millisecond):
			}
		}
		item := targets[key].item
		item.ScoringVersion = version
		data, err := json.Marshal(item)
		if err != nil {
			return err
		}
		msg := nats.NewMsg(s.Session(item.CloseReason))
		msg.Data = data
		msg.Header.Set(wire.HeaderSessionKey, key)
		msg.Header.Set(wire.HeaderAgentName, item.AgentName)
		msg.Header.Set(wire.HeaderCloseReason, item.CloseReason)
		msg.Header.Set(wire.HeaderScoringVersion, version)
		if _, err := js.PublishMsg(ctx, msg, jetstream.WithMsgID("rescore:"+key+"@"+version),
			jetstream.WithExpectStream(s.SessionStream())); err != nil {
			return fmt.Errorf("enqueue %s: %w", key, err)
		}
		rep.Enqueued++
		if time.Since(last) > 2*time.Second {
			progress("enqueued %d/%d, published %d/%d", rep.Enqueued, len(todo), w.count(), want)
			last = time.Now()
		}
	}
	deadline := time.Now().Add(o.Wait)
	for w.count() < want && time.Now().Before(deadline) {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
		if time.Since(last) > 2*time.Second {
			progress("published %d/%d", w.count(), want)
			last = time.Now()
		}
	}
	stopWatch()
	wg.Wait()
	if watchErr != nil && !errors.Is(watchErr, context.Canceled) {
		return watchErr
	}
	rep.Published = w.count()
	for _, key := range append(todo, waiting...) {
		got, ok := w.got[key]
		switch {
		case !ok:
			rep.NotYetPublished = append(rep.NotYetPublished, key)
		case !bytes.Equal(got, fresh[key]):
			rep.Mismatched = append(rep.Mismatched, key)
		}
	}
	sort.Strings(rep.NotYetPublished)
	sort.Strings(rep.Mismatched)
	progress("published %d/%d under %s", rep.Published, want, version)
	return nil
}

// rescoreWatch follows the scorecards the workers publish under a version.
type rescoreWatch struct {
	version string
	targets map[string][]byte
	mu      sync.Mutex
	got     map[string][]byte
}

func (w *rescoreWatch) count() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.got)
}

func (w *rescoreWatch) follow(ctx context.Context, js jetstream.JetStream, stream string, start time.Time) error {
	cons, err := js.OrderedConsumer(ctx, stream, jetstream.OrderedConsumerConfig{DeliverPolicy: jetstream.DeliverByStartTimePolicy,
		OptStartTime: &start})
	if err != nil {
		return err
	}
	for ctx.Err() == nil {
		m, err := cons.Next(jetstream.FetchMaxWait(200 * time.Millisecond))
		if err != nil {
			continue
		}
		key := m.Headers().Get(wire.HeaderSessionKey)
		if m.Headers().Get(wire.HeaderScoringVersion) != w.version {
			continue
		}
		if _, ok := w.targets[key]; ok {
			w.mu.Lock()
			w.got[key] = m.Data()
			w.mu.Unlock()
		}
	}
	return ctx.Err()
}

// ReadScorecards hands every scorecard the results stream holds since
// since to fn, in order, with its stream sequence.
func ReadScorecards(ctx context.Context, js jetstream.JetStream, s wire.Subjects, since time.Time, wait time.Duration,
	fn func(card *scoring.Scorecard, seq uint64)) error {
	return readSince(ctx, js, s.ResultStream(), since, wait, func(m jetstream.Msg, seq uint64) {
		var card scoring.Scorecard
		if json.Unmarshal(m.Data(), &card) == nil {
			fn(&card, seq)
		}
	})
}

// readSince hands every message a stream stored at or after since to fn,
// in order.
func readSince(ctx context.Context, js jetstream.JetStream, stream string, since time.Time, wait time.Duration,
	fn func(jetstream.Msg, uint64)) error {
	st, err := js.Stream(ctx, stream)
	if errors.Is(err, jetstream.ErrStreamNotFound) {
		return nil
	}
	if err != nil {
		return err
	}
	info, err := st.Info(ctx)
	if err != nil {
		return err
	}
	if info.State.Msgs == 0 || info.State.LastTime.Before(since) {
		return nil
	}
	cons, err := js.OrderedConsumer(ctx, stream, jetstream.OrderedConsumerConfig{DeliverPolicy: jetstream.DeliverByStartTimePolicy,
		OptStartTime: &since})
	if err != nil {
		return err
	}
	// The first message says how many follow; then batches of what is
	// there, so no fetch waits for messages that will not come.
	first, err := cons.Next(jetstream.FetchMaxWait(wait))
	if errors.Is(err, nats.ErrTimeout) || errors.Is(err, jetstream.ErrNoMessages) {
		return nil
	}
	if err != nil {
		return err
	}
	handle := func(m jetstream.Msg) uint64 {
		meta, err := m.Metadata()
		if err != nil {
			return 0
		}
		fn(m, meta.Sequence.Stream)
		return meta.NumPending
	}
	pending := handle(first)
	for pending > 0 {
		batch, err := cons.Fetch(int(min(pending, 500)), jetstream.FetchMaxWait(wait))
		if err != nil {
			return err
		}
		n := 0
		for m := range batch.Messages() {
			n++
			pending = handle(m)
		}
		if err := batch.Error(); err != nil && !errors.Is(err, nats.ErrTimeout) {
			return err
		}
		if n == 0 {
			return fmt.Errorf("%s: %d messages pending, none delivered within %s", stream, pending, wait)
		}
	}
	return nil
}

// WriteReport prints a rescore's report for people.
func WriteReport(w io.Writer, rep Report) error {
	var b strings.Builder
	mode := "dry run: nothing published"
	if !rep.DryRun {
		mode = "published through the workers"
	}
	fmt.Fprintf(&b, "rescore under scoring %s (was %s), since %s: %d sessions, %d rescored (%s)\n", rep.ScoringVersion,
		orNone(strings.Join(rep.OldVersions, ", ")), rep.Since, rep.Sessions, rep.Rescored, mode)
	if rep.AudioReused > 0 {
		fmt.Fprintf(&b, "audio: %d measurements reused from scorecards of this model, %d measured (--audio measure measures all)\n",
			rep.AudioReused, rep.AudioMeasured)
	}
	b.WriteString("\nverdicts by agent\n")
	for _, a := range rep.Agents {
		var moves []string
		for k, n := range a.Transitions {
			moves = append(moves, fmt.Sprintf("%s %d", k, n))
		}
		sort.Strings(moves)
		if len(moves) == 0 {
			moves = []string{"no verdict changed"}
		}
		name := a.Agent
		if name == "" {
			name = "(no agent)"
		}
		fmt.Fprintf(&b, "  %-20s %5d sessions  mean score %+.2f  %s", name, a.Sessions, a.MeanDelta, strings.Join(moves, ", "))
		if a.New > 0 {
			fmt.Fprintf(&b, ", %d without an earlier scorecard", a.New)
		}
		if len(a.Violations) > 0 {
			var vs []string
			for r, n := range a.Violations {
				vs = append(vs, fmt.Sprintf("%s %d", r, n))
			}
			sort.Strings(vs)
			fmt.Fprintf(&b, "; rules violated: %s", strings.Join(vs, ", "))
		}
		b.WriteString("\n")
	}
	if len(rep.Movers) > 0 {
		b.WriteString("\nsessions that moved most\n")
		for _, m := range rep.Movers {
			fmt.Fprintf(&b, "  %s (%s): %s %.2f → %s %.2f\n", m.Session, orNone(m.Agent), m.Old.Verdict, m.Old.Score, m.New.Verdict, m.New.Score)
			fmt.Fprintf(&b, "      old findings: %s\n      new findings: %s\n", orNone(strings.Join(m.Old.Findings, " ")),
				orNone(strings.Join(m.New.Findings, " ")))
			if len(m.New.RulesViolated) > 0 {
				fmt.Fprintf(&b, "      rules violated: %s\n", strings.Join(m.New.RulesViolated, " "))
			}
		}
	}
	fmt.Fprintf(&b, "\n%d sessions changed (verdict, score, findings or rules); --json lists each\n", len(rep.Changed))
	if len(rep.Removed) > 0 {
		fmt.Fprintf(&b, "\n%d sessions could not be rescored, their data removed:\n", len(rep.Removed))
		for _, m := range rep.Removed {
			fmt.Fprintf(&b, "  %s (%s): %s\n", m.Session, orNone(m.Agent), m.Why)
		}
	}
	if len(rep.Failed) > 0 {
		fmt.Fprintf(&b, "\n%d sessions failed:\n", len(rep.Failed))
		for _, m := range rep.Failed {
			fmt.Fprintf(&b, "  %s (%s): %s\n", m.Session, orNone(m.Agent), m.Why)
		}
	}
	if !rep.DryRun {
		fmt.Fprintf(&b, "\npublished under %s: %d already before this run, %d enqueued now, %d published by the workers\n",
			rep.ScoringVersion, rep.AlreadyPublished, rep.Enqueued, rep.Published)
		if n := len(rep.NotYetPublished); n > 0 {
			fmt.Fprintf(&b, "%d not published yet (the workers are behind, or dead-lettered them: lkscore dlq list --stage score); "+
				"run the same command again: nothing is enqueued twice\n", n)
		}
		if n := len(rep.Mismatched); n > 0 {
			fmt.Fprintf(&b, "%d published scorecards differ from this run's (the workers' audio settings differ, or the audio was reused: "+
				"--audio measure): %s\n", n, strings.Join(rep.Mismatched[:min(n, 10)], " "))
		}
	}
	_, err := io.WriteString(w, b.String())
	return err
}

func orNone(s string) string {
	if s == "" {
		return "none"
	}
	return s
}
