// Package rescore re-scores stored sessions under a config's scoring model
// (`lkscore rescore`): it reads each session's latest work item and
// scorecard from the streams, scores the recording again, diffs the
// verdicts by agent and, unless it is a dry run, has the daemon's workers
// publish one scorecard per session and version. Its steps: read (read.go),
// decide (decide.go, pure), score and diff (rescore.go, diff.go), publish
// and follow (publish.go), report (report.go). It owns the rescore items'
// format on the sessions stream and the scoring bucket's entries; it must
// not import the daemon's assembly (package consumer): the CLI calls it
// with a JetStream handle and a recording store.
package rescore

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/lkscore/lkscore/config"
	"github.com/lkscore/lkscore/consumer/internal/score"
	"github.com/lkscore/lkscore/consumer/internal/work"
	"github.com/lkscore/lkscore/recording"
	"github.com/lkscore/lkscore/scoring"
	"github.com/lkscore/lkscore/session"
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
	// ScoringVersion names the config (its agents' versions are in Agents).
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
	Agent string `json:"agent"`
	// ScoringVersion is the agent's new scoring version (a change to
	// another agent's policy leaves it as it was: its sessions' cards are
	// then already published).
	ScoringVersion string `json:"scoring_version"`
	Sessions       int    `json:"sessions"`
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

// Run re-scores the sessions the streams hold since o.Since under cfg's
// scoring model (its policies and rules): each session's latest work item
// in the sessions stream, its recording and audio in the store, its facts
// as the item carries them. It diffs the new scorecards with the latest
// earlier ones and, unless o.DryRun, has the workers publish them: one
// rescore item per session and scoring version on the session's subject
// (deduplicated by the stream on "rescore:<session>@<version>"), the
// scoring config in the scoring bucket, at most o.InFlight enqueued ahead
// of what the workers published. Run again after a kill, it skips what is
// published or enqueued: each session gets one scorecard per version.
//
// Memory: per session, its latest work item and a brief of its old and new
// scorecards (CardSummary, a digest), never whole scorecards.
func Run(ctx context.Context, js jetstream.JetStream, s wire.Subjects, cfg config.Config, st score.Reader, o Options) (Report, error) {
	scorer, err := cfg.Scorer()
	if err != nil {
		return Report{}, err
	}
	r := &run{js: js, s: s, o: o, version: scorer.Version(), versionFor: scorer.VersionFor, wait: cfg.NATS.RequestTimeout,
		// What the workers publish from here on is followed from here: an
		// item an earlier run enqueued may be scored while this one reads.
		began: time.Now().Add(-time.Second)}
	r.rep = Report{ScoringVersion: r.version, Since: o.Since.UTC().Format(time.RFC3339), Agent: o.Agent, DryRun: o.DryRun,
		Removed: []MissingSession{}, Failed: []MissingSession{}, Agents: []AgentDiff{}, Movers: []SessionDiff{}, Changed: []SessionDiff{},
		OldVersions: []string{}}
	cards, err := r.readCards(ctx)
	if err != nil {
		return r.rep, err
	}
	items, err := r.readWork(ctx)
	if err != nil {
		return r.rep, err
	}
	keys := sessionsOf(items.latest, cards.old)
	r.rep.Sessions, r.rep.OldVersions = len(keys), cards.versions()
	r.progress("%d sessions since %s; scoring version %s", len(keys), r.rep.Since, r.version)
	fresh, err := r.scoreAll(ctx, scorer, score.NewInputs(st, cfg.Privacy, cfg.Limits, cfg.Audio, cfg.Scoring.Audio), keys, items, cards)
	if err != nil || o.DryRun {
		return r.rep, err
	}
	return r.rep, r.publish(ctx, scorer, cfg.NATS, items.latest, fresh, cards.published, items.enqueued)
}

// run is one rescore: what it was asked and what it found so far.
type run struct {
	js jetstream.JetStream
	s  wire.Subjects
	o  Options
	// version names the config (the scoring bucket's key, the work
	// items'); versionFor is an agent's scoring version, its cards'.
	version    string
	versionFor func(agent string) string
	sessions   jetstream.Stream // the sessions stream, once an item is read back
	wait       time.Duration
	began      time.Time
	rep        Report
}

// current reports whether a scorecard's headers say it was scored under
// this run's config: its scoring version is its agent's.
func (r *run) current(h nats.Header) bool {
	return h.Get(wire.HeaderScoringVersion) == r.versionFor(h.Get(wire.HeaderAgentName))
}

func (r *run) progress(format string, a ...any) {
	if r.o.Progress != nil {
		fmt.Fprintf(r.o.Progress, "rescore: "+format+"\n", a...)
	}
}

// scoreAll scores the sessions in keys, in order, and diffs each with its
// old scorecard into the report; it returns the digest of each new
// scorecard's bytes.
func (r *run) scoreAll(ctx context.Context, scorer *scoring.Scorer, inputs score.Inputs, keys []string, items workRead,
	cards cardsRead) (map[string]digest, error) {
	noAudio := inputs
	noAudio.DisableAudio()
	fresh := make(map[string]digest, len(keys))
	diff := newDiffer()
	var buf []byte
	for i, key := range keys {
		item, hasItem, err := r.latestItem(ctx, items, key)
		if err != nil {
			return nil, err
		}
		old := cards.old[key]
		c := decide(hasItem, old, item.MetadataOnly, r.o.MeasureAudio)
		agent := item.AgentName
		if !hasItem && old != nil {
			agent = old.agent
		}
		if c.removed {
			r.rep.Removed = append(r.rep.Removed, MissingSession{Session: key, Agent: agent,
				Why: "its work item is gone from " + r.s.SessionStream() + " (nats.max_age): only its scorecard is left"})
			continue
		}
		in := inputs
		if c.reuseAudio {
			in = noAudio
		}
		card, ok, err := r.scoreOne(ctx, scorer, in, key, agent, item, old, c.reuseAudio)
		if err != nil {
			return nil, err
		}
		if !ok {
			continue
		}
		data, err := card.AppendJSON(buf[:0]) // the bytes the worker publishes
		if err != nil {
			return nil, err
		}
		buf = data
		fresh[key] = sha256.Sum256(data)
		r.rep.Rescored++
		diff.add(key, agent, old, &card)
		if (i+1)%500 == 0 {
			r.progress("scored %d/%d", i+1, len(keys))
		}
	}
	diff.report(&r.rep)
	return fresh, nil
}

// latestItem reads back the session's latest work item; has is false
// when it has none (or the stream dropped it since it was read).
func (r *run) latestItem(ctx context.Context, items workRead, key string) (item work.Item, has bool, err error) {
	seq, ok := items.latest[key]
	if !ok {
		return item, false, nil
	}
	item, err = r.item(ctx, seq)
	if errors.Is(err, jetstream.ErrMsgNotFound) {
		return item, false, nil
	}
	return item, err == nil, err
}

// scoreOne scores one session; ok is false when it could not be (the
// reason is in the report), err only when the run must stop.
func (r *run) scoreOne(ctx context.Context, scorer *scoring.Scorer, in score.Inputs, key, agent string, item work.Item, old *oldCard,
	reuseAudio bool) (card session.Scorecard, ok bool, err error) {
	sess, err := in.Input(ctx, item)
	if errors.Is(err, recording.ErrNotFound) {
		r.rep.Removed = append(r.rep.Removed, MissingSession{Session: key, Agent: agent,
			Why: "its recording is gone from the store (retention, privacy.mode metadata_only or forget): " + err.Error()})
		return card, false, nil
	}
	if err != nil {
		if ctx.Err() != nil {
			return card, false, ctx.Err()
		}
		r.rep.Failed = append(r.rep.Failed, MissingSession{Session: key, Agent: agent, Why: err.Error()})
		return card, false, nil
	}
	switch {
	case reuseAudio && old.hasAudio:
		a, err := r.oldAudio(ctx, old.seq)
		if err != nil {
			return card, false, fmt.Errorf("read %s's old scorecard for its audio: %w", key, err)
		}
		sess.Audio = a
		r.rep.AudioReused++
	case sess.Audio != nil:
		r.rep.AudioMeasured++
	}
	return scorer.Score(sess), true, nil
}

// oldAudio reads back the audio measurement of the scorecard at seq.
func (r *run) oldAudio(ctx context.Context, seq uint64) (*session.Audio, error) {
	st, err := r.js.Stream(ctx, r.s.ResultStream())
	if err != nil {
		return nil, err
	}
	m, err := st.GetMsg(ctx, seq)
	if err != nil {
		return nil, err
	}
	var c struct {
		Audio *session.Audio `json:"audio"`
	}
	if err := json.Unmarshal(m.Data, &c); err != nil {
		return nil, err
	}
	return c.Audio, nil
}
