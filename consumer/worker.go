package consumer

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/lkscore/lkscore/recording"
	"github.com/lkscore/lkscore/scoring"
)

// Headers on result messages.
const (
	HeaderVerdict        = "Lk-Verdict"
	HeaderAgentName      = "Lk-Agent-Name"
	HeaderScoringVersion = "Lk-Scoring-Version"
	HeaderCloseReason    = "Lk-Close-Reason"
)

// Worker scores sessions: it fetches a work item's chat history, scores it
// and publishes the scorecard on lkscore.result.<CLOSE_REASON>.
type Worker struct {
	js       jetstream.JetStream
	store    storeReader
	scorer   *scoring.Scorer
	lim      recording.Limits
	subjects Subjects
	log      *slog.Logger
}

// handle scores one work item; the caller acks only when it returns nil.
func (w *Worker) handle(ctx context.Context, m jetstream.Msg) error {
	var item WorkItem
	if err := json.Unmarshal(m.Data(), &item); err != nil {
		return permanent(fmt.Errorf("work item is not valid JSON: %w", err))
	}
	if err := item.validate(); err != nil {
		return permanent(err)
	}
	s, err := w.load(ctx, item)
	if err != nil {
		return err
	}
	in := s.ScoringInput(item.Location, item.AgentName)
	// The locator may have inferred a close reason the summary lacks.
	in.CloseReason, in.CloseReasonSource = item.CloseReason, item.CloseReasonSource
	card := w.scorer.Score(in)
	data, err := json.Marshal(card)
	if err != nil {
		return permanent(fmt.Errorf("encode scorecard: %w", err))
	}
	msg := nats.NewMsg(w.subjects.Result(item.CloseReason))
	msg.Data = data
	msg.Header.Set(HeaderSessionKey, item.SessionKey)
	msg.Header.Set(HeaderVerdict, card.Overall.Verdict)
	msg.Header.Set(HeaderAgentName, item.AgentName)
	msg.Header.Set(HeaderScoringVersion, card.ScoringVersion)
	msg.Header.Set(HeaderCloseReason, item.CloseReason)
	pctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	// Session key + scoring version: one scorecard per session and version,
	// however often the work is delivered.
	ack, err := w.js.PublishMsg(pctx, msg, jetstream.WithMsgID(item.SessionKey+"@"+card.ScoringVersion),
		jetstream.WithExpectStream(w.subjects.ResultStream()))
	if err != nil {
		return fmt.Errorf("publish scorecard %s: %w", item.SessionKey, err)
	}
	w.log.Info("session scored", "session_key", item.SessionKey, "verdict", card.Overall.Verdict,
		"score", card.Overall.Score, "close_reason", item.CloseReason, "duplicate", ack.Duplicate)
	return nil
}

// load reads the session the item points at, directory layout or multipart object.
func (w *Worker) load(ctx context.Context, item WorkItem) (*recording.Session, error) {
	if item.Dir != "" {
		s, err := recording.Load(ctx, w.store, item.Dir, w.lim)
		if errors.Is(err, recording.ErrNotFound) {
			return nil, permanent(fmt.Errorf("recording gone from the store: %w", err))
		}
		return s, err
	}
	rc, err := openObject(ctx, w.store, item.Bucket, item.Object, w.lim)
	if errors.Is(err, recording.ErrNotFound) {
		return nil, permanent(fmt.Errorf("recording gone from the store: %w", err))
	}
	if err != nil {
		return nil, err
	}
	defer rc.Close()
	s, _, err := recording.ParseMultipart(rc, "", w.lim)
	return s, err
}
