// Package dashboard serves lkscore's web dashboard: server-rendered HTML
// with SVG charts (html/template, no JavaScript), read from an in-memory
// index of the most recent scorecards that follows the results stream. A
// request never reads the stream: it reads the bounded index (and, for one
// session's page, that session's scorecard and recording).
package dashboard

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/lkscore/lkscore/regress"
	"github.com/lkscore/lkscore/scoring"
	"github.com/lkscore/lkscore/session"
)

// Entry is what the index keeps of one scorecard.
type Entry struct {
	Seq       uint64    `json:"seq"`
	At        time.Time `json:"scored_at"`
	Key       string    `json:"session_key"`
	RoomID    string    `json:"room_id"`
	RoomName  string    `json:"room_name,omitempty"`
	JobID     string    `json:"job_id"`
	AgentName string    `json:"agent_name"`
	Version   string    `json:"version"` // as regression detection names it
	// ScoringVersion is the card's: scores compare only within one.
	ScoringVersion string     `json:"scoring_version"`
	Verdict        string     `json:"verdict"`
	Score          float64    `json:"score"`
	Components     [4]float64 `json:"-"` // turn handling, transcript integrity, tool reliability, response latency
	CloseReason    string     `json:"close_reason"`
	Source         string     `json:"close_reason_source"`
	// Latencies in ms, Missing when the session did not measure them: the
	// session's median and p95 e2e latency as the agent reported it, and
	// as the caller heard it (the stereo recording).
	E2EP50   float64 `json:"e2e_latency_p50_ms"`
	E2EP95   float64 `json:"e2e_latency_p95_ms"`
	HeardP50 float64 `json:"heard_latency_p50_ms"`
	HeardP95 float64 `json:"heard_latency_p95_ms"`
	// Codes are the finding codes that cost points, once each, and
	// rule.<name> for every rule the session violated (scoring.rules).
	Codes []string `json:"finding_codes,omitempty"`
	// Rules are the rules evaluated on the session (violated or passed).
	Rules []string `json:"rules,omitempty"`
	// SDK and SDKVersion name the agents SDK that ran the session ("" when
	// no signal said); Signals are what it sent (SignalRecording, …).
	SDK        string   `json:"sdk,omitempty"`
	SDKVersion string   `json:"sdk_version,omitempty"`
	Signals    []string `json:"signals,omitempty"`
	// Project is the LiveKit API key that signed the session's signals ("" when unknown).
	Project string `json:"project,omitempty"`
}

// Missing marks a latency a session did not measure.
const Missing = -1.0

// Index holds the last Window scorecards of the results stream.
type Index struct {
	window     int
	versionTag string
	caughtUp   chan struct{} // closed once the first catch-up finished
	closeOnce  sync.Once

	mu      sync.RWMutex
	entries []Entry // oldest first, at most window
	byKey   map[string]uint64
}

// NewIndex keeps at most window scorecards; versionTag is
// regression.version_tag, how a session names its agent's version.
func NewIndex(window int, versionTag string) *Index {
	return &Index{window: window, versionTag: versionTag, byKey: map[string]uint64{}, caughtUp: make(chan struct{})}
}

// Follow fills the index from the stream, starting window messages before
// its end, until ctx ends. It recreates its ordered consumer when the
// connection resets.
func (x *Index) Follow(ctx context.Context, js jetstream.JetStream, stream string, log *slog.Logger) {
	for ctx.Err() == nil {
		if err := x.follow(ctx, js, stream); err != nil && ctx.Err() == nil {
			log.Warn("dashboard: following the results stream", "err", err)
			select {
			case <-ctx.Done():
			case <-time.After(time.Second):
			}
		}
	}
}

func (x *Index) follow(ctx context.Context, js jetstream.JetStream, stream string) error {
	start := func(first, last uint64) uint64 {
		x.mu.RLock()
		defer x.mu.RUnlock()
		return startSeq(first, last, x.window, lastSeq(x.entries))
	}
	add := func(seq uint64, at time.Time, data []byte) {
		var sc session.Scorecard
		if err := json.Unmarshal(data, &sc); err == nil {
			x.add(entryOf(seq, at, &sc, x.versionTag))
		}
	}
	return tail(ctx, js, stream, start, add, func() { x.closeOnce.Do(func() { close(x.caughtUp) }) })
}

func lastSeq(entries []Entry) uint64 {
	if len(entries) == 0 {
		return 0
	}
	return entries[len(entries)-1].Seq
}

// startSeq is where a follower starts: after what it holds (have), else
// window messages before the stream's end.
func startSeq(first, last uint64, window int, have uint64) uint64 {
	start := first
	if have > 0 {
		start = have + 1 // resume after what we have
	} else if last >= uint64(window) && last-uint64(window)+1 > start {
		start = last - uint64(window) + 1
	}
	return max(start, 1)
}

// tail reads stream from the sequence start chooses (given the stream's
// first and last sequence), handing each message to add, until ctx ends or
// an error; caughtUp is called once it has read what the stream held.
func tail(ctx context.Context, js jetstream.JetStream, stream string, start func(first, last uint64) uint64,
	add func(seq uint64, at time.Time, data []byte), caughtUp func()) error {
	s, err := js.Stream(ctx, stream)
	if err != nil {
		return err
	}
	info, err := s.Info(ctx)
	if err != nil {
		return err
	}
	// An ephemeral consumer of our own, fetched under ctx: shutdown ends a
	// fetch at once (an ordered consumer's reset can outlive its context).
	// The server removes the consumer once idle; Follow starts a new one
	// after any error.
	cons, err := js.CreateConsumer(ctx, stream, jetstream.ConsumerConfig{
		DeliverPolicy: jetstream.DeliverByStartSequencePolicy, OptStartSeq: start(info.State.FirstSeq, info.State.LastSeq),
		AckPolicy: jetstream.AckNonePolicy, InactiveThreshold: time.Minute, MemoryStorage: true})
	if err != nil {
		return err
	}
	for {
		fctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		batch, err := cons.Fetch(256, jetstream.FetchContext(fctx))
		if err != nil {
			cancel()
			return err
		}
		got := 0
		for m := range batch.Messages() {
			got++
			meta, err := m.Metadata()
			if err != nil {
				continue
			}
			if meta.NumPending == 0 {
				caughtUp()
			}
			add(meta.Sequence.Stream, meta.Timestamp, m.Data())
		}
		err = batch.Error()
		cancel()
		if got == 0 && err == nil || errors.Is(err, context.DeadlineExceeded) {
			caughtUp() // nothing (more) to read
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if err != nil && !errors.Is(err, context.DeadlineExceeded) && !errors.Is(err, nats.ErrTimeout) {
			return err
		}
	}
}

func entryOf(seq uint64, at time.Time, sc *session.Scorecard, versionTag string) Entry {
	e := Entry{Seq: seq, At: at, Key: sc.Session.Key, RoomID: sc.Session.RoomID, RoomName: sc.Session.RoomName, JobID: sc.Session.JobID,
		Project:   sc.Session.APIKey,
		AgentName: sc.Session.AgentName, Version: regress.KeyOf(sc, versionTag).Version, ScoringVersion: sc.ScoringVersion,
		Verdict: sc.Overall.Verdict,
		Score:   sc.Overall.Score, CloseReason: sc.Completion.CloseReason, Source: sc.Completion.CloseReasonSource,
		E2EP50: Missing, E2EP95: Missing, HeardP50: Missing, HeardP95: Missing}
	if !sc.Comparable() {
		e.Score = Missing // no evidence, or a silent caller: trends and medians leave it out
	}
	for i, c := range sc.Components {
		if i < len(e.Components) {
			e.Components[i] = c.Score
			if c.Verdict == session.NotMeasured {
				e.Components[i] = Missing
			}
		}
		for _, f := range c.Findings {
			if f.Deduction > 0 && !slices.Contains(e.Codes, f.Code) {
				e.Codes = append(e.Codes, f.Code)
			}
		}
	}
	for _, r := range sc.Rules {
		if r.Status == session.RuleNotEvaluated {
			continue
		}
		e.Rules = append(e.Rules, r.Name)
		if code := scoring.RuleCodePrefix + r.Name; r.Status == session.RuleViolated && !slices.Contains(e.Codes, code) {
			e.Codes = append(e.Codes, code)
		}
	}
	if m := sc.Metrics; m.E2ELatencyP50Ms.Set {
		e.E2EP50 = m.E2ELatencyP50Ms.V
		if m.E2ELatencyP95Ms.Set {
			e.E2EP95 = m.E2ELatencyP95Ms.V
		}
	}
	if a := sc.Audio; a != nil && a.Refused == "" && len(a.Turns) > 0 {
		e.HeardP50, e.HeardP95 = float64(a.Metrics.HeardLatencyP50Ms), float64(a.Metrics.HeardLatencyP95Ms)
	}
	if sdk := sc.Session.SDK; sdk != nil {
		e.SDK, e.SDKVersion = sdk.Language, sdk.Version
	}
	e.Signals = scoring.SignalsOf(sc)
	return e
}

func (x *Index) add(e Entry) {
	x.mu.Lock()
	defer x.mu.Unlock()
	if n := len(x.entries); n > 0 && e.Seq <= x.entries[n-1].Seq {
		return // replayed after a reconnect
	}
	x.entries = append(x.entries, e)
	x.byKey[e.Key] = e.Seq
	if len(x.entries) > 2*x.window { // compact now and then, not on every add
		drop := len(x.entries) - x.window
		for _, old := range x.entries[:drop] {
			if x.byKey[old.Key] == old.Seq {
				delete(x.byKey, old.Key)
			}
		}
		x.entries = append(x.entries[:0:0], x.entries[drop:]...)
	}
}

// live is the window: the last x.window entries.
func (x *Index) live() []Entry {
	if len(x.entries) > x.window {
		return x.entries[len(x.entries)-x.window:]
	}
	return x.entries
}

// CaughtUp is closed once the index has read what the stream held when it
// started following it.
func (x *Index) CaughtUp() <-chan struct{} { return x.caughtUp }

// Filter selects entries; empty fields match all.
type Filter struct {
	Agent   string
	Version string
	// ScoringVersion is the scoring version the cards were scored under.
	ScoringVersion string
	CloseReason    string
	Verdict        string
	Project        string // the API key that signed its signals
	Code           string // a finding code the session has
	// Query is a search: a session key, room id, job id, room name or agent
	// name, or a part of one (case-insensitive).
	Query string
	Since time.Time
}

func (f Filter) match(e Entry) bool {
	return (f.Agent == "" || e.AgentName == f.Agent) && (f.Version == "" || e.Version == f.Version) &&
		(f.ScoringVersion == "" || e.ScoringVersion == f.ScoringVersion) &&
		(f.CloseReason == "" || e.CloseReason == f.CloseReason) && (f.Verdict == "" || e.Verdict == f.Verdict) &&
		(f.Project == "" || e.Project == f.Project) &&
		(f.Code == "" || slices.Contains(e.Codes, f.Code)) && (f.Since.IsZero() || !e.At.Before(f.Since)) &&
		(f.Query == "" || searchMatch(e, f.Query))
}

func searchMatch(e Entry, q string) bool {
	q = strings.ToLower(strings.TrimSpace(q))
	for _, v := range []string{e.Key, e.RoomID, e.JobID, e.RoomName, e.AgentName} {
		if strings.Contains(strings.ToLower(v), q) {
			return true
		}
	}
	return false
}

// Select returns the matching entries, oldest first, and how many the index holds.
func (x *Index) Select(f Filter) ([]Entry, int) {
	x.mu.RLock()
	defer x.mu.RUnlock()
	live := x.live()
	var out []Entry
	for _, e := range live {
		if f.match(e) {
			out = append(out, e)
		}
	}
	return out, len(live)
}

// Lookup finds a session's entry.
func (x *Index) Lookup(key string) (Entry, bool) {
	x.mu.RLock()
	defer x.mu.RUnlock()
	seq, ok := x.byKey[key]
	if !ok {
		return Entry{}, false
	}
	live := x.live()
	i := sort.Search(len(live), func(i int) bool { return live[i].Seq >= seq })
	if i == len(live) || live[i].Seq != seq {
		return Entry{}, false
	}
	return live[i], true
}

// Agents lists the agent names in the index.
func (x *Index) Agents() []string { return x.distinct(func(e *Entry) string { return e.AgentName }) }

// Versions lists the agent versions in the index.
func (x *Index) Versions() []string { return x.distinct(func(e *Entry) string { return e.Version }) }

// ScoringVersions are the scoring versions of the scorecards held.
func (x *Index) ScoringVersions() []string {
	return x.distinct(func(e *Entry) string { return e.ScoringVersion })
}

// Projects are the API keys (LiveKit projects) that signed the sessions held.
func (x *Index) Projects() []string { return x.distinct(func(e *Entry) string { return e.Project }) }

func (x *Index) distinct(of func(*Entry) string) []string {
	x.mu.RLock()
	defer x.mu.RUnlock()
	set := map[string]bool{}
	live := x.live()
	for i := range live {
		if v := of(&live[i]); v != "" {
			set[v] = true
		}
	}
	out := make([]string, 0, len(set))
	for a := range set {
		out = append(out, a)
	}
	sort.Strings(out)
	return out
}

// Forget drops a session from the index (lkscore forget) and says how many
// entries it held for it.
func (x *Index) Forget(key string) int {
	x.mu.Lock()
	defer x.mu.Unlock()
	n := len(x.entries)
	x.entries = slices.DeleteFunc(x.entries, func(e Entry) bool { return e.Key == key })
	delete(x.byKey, key)
	return n - len(x.entries)
}
