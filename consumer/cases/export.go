package cases

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/lkscore/lkscore/config"
	"github.com/lkscore/lkscore/consumer/internal/score"
	"github.com/lkscore/lkscore/consumer/internal/work"
	"github.com/lkscore/lkscore/recording"
	"github.com/lkscore/lkscore/scoring"
	"github.com/lkscore/lkscore/session"
	"github.com/lkscore/lkscore/wire"
)

// ErrNoScorecard is a session with no scorecard on the results stream.
var ErrNoScorecard = errors.New("no scorecard for this session on the results stream")

// Exporter builds cases from what a deployment keeps: the results and
// sessions streams, the recording store, the config.
type Exporter struct {
	JS       jetstream.JetStream
	Subjects wire.Subjects
	Store    recording.ObjectReader
	Config   config.Config
	Scorer   *scoring.Scorer
	// Wait bounds each wait for the next message while a stream is read.
	Wait time.Duration
}

// Export builds the case of the session sessionKey: its last scorecard,
// the work item it was scored from, its recording's header and chat
// history as stored, and the scoring config that judged it.
func (e Exporter) Export(ctx context.Context, sessionKey string) (Files, error) {
	cardMsg, err := e.last(ctx, e.Subjects.ResultStream(), sessionKey, nil)
	if err != nil {
		return nil, fmt.Errorf("case %s: results: %w", sessionKey, err)
	}
	if cardMsg == nil {
		return nil, fmt.Errorf("case %s: %w", sessionKey, ErrNoScorecard)
	}
	var card session.Scorecard
	if err := json.Unmarshal(cardMsg, &card); err != nil {
		return nil, fmt.Errorf("case %s: the scorecard: %w", sessionKey, err)
	}
	// The work item it was scored from: the daemon's own (no scoring
	// version), or a rescore's of the card's version.
	itemMsg, err := e.last(ctx, e.Subjects.SessionStream(), sessionKey, func(data []byte) bool {
		var it work.Item
		return json.Unmarshal(data, &it) == nil && (it.ScoringVersion == "" || it.ScoringVersion == card.ScoringVersion)
	})
	if err != nil {
		return nil, fmt.Errorf("case %s: work items: %w", sessionKey, err)
	}
	if itemMsg == nil {
		return nil, fmt.Errorf("case %s: its work item is gone from %s (nats.max_age): nothing to score it from",
			sessionKey, e.Subjects.SessionStream())
	}
	var item work.Item
	if err := json.Unmarshal(itemMsg, &item); err != nil {
		return nil, fmt.Errorf("case %s: the work item: %w", sessionKey, err)
	}
	in := Inputs{Card: cardMsg, Item: item}
	if err := e.recording(ctx, &in); err != nil {
		return nil, fmt.Errorf("case %s: %w", sessionKey, err)
	}
	in.Policy, in.Notes, err = e.policy(ctx, card.ScoringVersion, card.Session.AgentName)
	if err != nil {
		return nil, fmt.Errorf("case %s: %w", sessionKey, err)
	}
	return Build(in)
}

// recording reads the stored header and chat history, and whether the
// session is redacted, as the worker decides it.
func (e Exporter) recording(ctx context.Context, in *Inputs) error {
	facts := in.Item.Facts != nil && in.Item.Facts.RedactionEnabled
	if in.Item.MetadataOnly || in.Item.Object != "" {
		in.Redacted = e.Config.Privacy.Redacted(facts)
		return nil
	}
	lim := e.Config.Limits.Parser()
	read := func(name string, limit int64) ([]byte, error) {
		rc, err := e.Store.Open(ctx, in.Item.Dir+name, limit)
		if err != nil {
			return nil, err
		}
		defer func() { _ = rc.Close() }()
		return io.ReadAll(rc)
	}
	var err error
	if in.Header, err = read(recording.ObjectHeader, int64(lim.HeaderBytes)); err != nil {
		return fmt.Errorf("the recording's header: %w", err)
	}
	hdr, err := recording.ParseHeader(in.Header, lim.HeaderBytes)
	if err != nil {
		return fmt.Errorf("the recording's header: %w", err)
	}
	in.Redacted = e.Config.Privacy.Redacted(facts || hdr.GetRedactionEnabled())
	if in.Redacted {
		return nil // its transcript is not read
	}
	in.Chat, err = read(recording.ObjectChatHistory, lim.Chat.MaxBytes)
	if errors.Is(err, recording.ErrNotFound) {
		in.Notes = append(in.Notes, "the recording has no chat history in the store (privacy.mode metadata_only or retention dropped it)")
		return nil
	}
	if err != nil {
		return fmt.Errorf("the recording's chat history: %w", err)
	}
	return nil
}

// policy is the scoring config of an agent's card scored under version:
// this config's when it gives the agent that version, else the scoring
// bucket's (lkscore rescore wrote it).
func (e Exporter) policy(ctx context.Context, version, agent string) (scoring.Config, []string, error) {
	if version == e.Scorer.VersionFor(agent) || version == e.Scorer.Version() {
		return e.Scorer.Config(), nil, nil
	}
	sc, err := score.LoadScorer(ctx, e.JS, e.Subjects, e.wait(), version, e.Config.Regression.VersionTag)
	if err == nil {
		return sc.Config(), nil, nil
	}
	return e.Scorer.Config(), []string{fmt.Sprintf("the card was scored under %s; its config is not at hand (%v): "+
		"policy.json is this config's (%s), and check scores with it", version, err, e.Scorer.VersionFor(agent))}, nil
}

func (e Exporter) wait() time.Duration {
	if e.Wait > 0 {
		return e.Wait
	}
	return 2 * time.Second
}

// last is the data of the last message on stream whose session key header
// is key (and that ok accepts), nil when none.
func (e Exporter) last(ctx context.Context, stream, key string, ok func([]byte) bool) ([]byte, error) {
	st, err := e.JS.Stream(ctx, stream)
	if errors.Is(err, jetstream.ErrStreamNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	info, err := st.Info(ctx)
	if err != nil || info.State.Msgs == 0 {
		return nil, err
	}
	cons, err := e.JS.OrderedConsumer(ctx, stream, jetstream.OrderedConsumerConfig{})
	if err != nil {
		return nil, err
	}
	var found []byte
	for {
		m, err := cons.Next(jetstream.FetchMaxWait(e.wait()))
		if err != nil {
			return found, nil // nothing more within the wait
		}
		if m.Headers().Get(wire.HeaderSessionKey) == key && (ok == nil || ok(m.Data())) {
			found = m.Data()
		}
		if meta, err := m.Metadata(); err == nil && meta.NumPending == 0 {
			return found, nil
		}
	}
}
