package broker

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/lkscore/lkscore/wire"
)

// DeadLetterAdmin lists and re-drives dead letters (`lkscore dlq`).
type DeadLetterAdmin struct {
	js       jetstream.JetStream
	subjects wire.Subjects
}

// NewDeadLetterAdmin works on the DLQ stream named by subjects.
func NewDeadLetterAdmin(js jetstream.JetStream, subjects wire.Subjects) *DeadLetterAdmin {
	return &DeadLetterAdmin{js: js, subjects: subjects}
}

// List returns up to limit dead letters of stage ("" = all), oldest first.
func (a *DeadLetterAdmin) List(ctx context.Context, stage string, limit int) ([]wire.DeadLetter, error) {
	s, err := a.js.Stream(ctx, a.subjects.DLQStream())
	if err != nil {
		return nil, Missing("dead-letter stream "+a.subjects.DLQStream(), err)
	}
	info, err := s.Info(ctx)
	if err != nil {
		return nil, fmt.Errorf("dead-letter stream: %w", err)
	}
	var out []wire.DeadLetter
	for seq := info.State.FirstSeq; info.State.Msgs > 0 && seq <= info.State.LastSeq && len(out) < limit; seq++ {
		raw, err := s.GetMsg(ctx, seq)
		if errors.Is(err, jetstream.ErrMsgNotFound) {
			continue // replayed and deleted
		}
		if err != nil {
			return nil, fmt.Errorf("get dead letter %d: %w", seq, err)
		}
		dl := wire.DeadLetterFrom(raw.Sequence, raw.Header.Get, len(raw.Data))
		if stage == "" || dl.Stage == stage {
			out = append(out, dl)
		}
	}
	return out, nil
}

// Search returns up to limit dead letters whose session key, subject,
// stage or error contains query (case-insensitive; "" matches all), newest
// first, looking at the newest scan of them at most. It reports how many
// it looked at and whether older ones were left unread.
func (a *DeadLetterAdmin) Search(ctx context.Context, query string, scan, limit int) (found []wire.DeadLetter, looked int, more bool, err error) {
	s, err := a.js.Stream(ctx, a.subjects.DLQStream())
	if err != nil {
		return nil, 0, false, Missing("dead-letter stream "+a.subjects.DLQStream(), err)
	}
	info, err := s.Info(ctx)
	if err != nil {
		return nil, 0, false, fmt.Errorf("dead-letter stream: %w", err)
	}
	q := strings.ToLower(query)
	for seq := info.State.LastSeq; info.State.Msgs > 0 && seq >= info.State.FirstSeq && seq > 0 && len(found) < limit; seq-- {
		if looked == scan {
			return found, looked, true, nil
		}
		raw, err := s.GetMsg(ctx, seq)
		if errors.Is(err, jetstream.ErrMsgNotFound) {
			continue // replayed and deleted
		}
		if err != nil {
			return nil, looked, false, fmt.Errorf("get dead letter %d: %w", seq, err)
		}
		looked++
		dl := wire.DeadLetterFrom(raw.Sequence, raw.Header.Get, len(raw.Data))
		if q == "" || strings.Contains(strings.ToLower(dl.SessionKey+"\x00"+dl.Subject+"\x00"+dl.Stage+"\x00"+dl.Error), q) {
			found = append(found, dl)
		}
	}
	return found, looked, false, nil
}

// Replay re-publishes dead letter seq to its original subject, then deletes
// it from the dead-letter stream. The copy gets a fresh msg id: the old one
// may still be inside the dedup window. Work that already produced a
// scorecard cannot produce a second one: results deduplicate on session key
// and scoring version.
func (a *DeadLetterAdmin) Replay(ctx context.Context, seq uint64) error {
	s, err := a.js.Stream(ctx, a.subjects.DLQStream())
	if err != nil {
		return Missing("dead-letter stream "+a.subjects.DLQStream(), err)
	}
	raw, err := s.GetMsg(ctx, seq)
	if errors.Is(err, jetstream.ErrMsgNotFound) {
		return fmt.Errorf("no dead letter %d (lkscore dlq list shows them)", seq)
	}
	if err != nil {
		return fmt.Errorf("get dead letter %d: %w", seq, err)
	}
	subject := raw.Header.Get(wire.HeaderDLQSubject)
	if subject == "" || strings.HasPrefix(subject, a.subjects.DLQ("")) {
		return fmt.Errorf("dead letter %d has no original subject to replay to", seq)
	}
	msg := nats.NewMsg(subject)
	msg.Data = raw.Data
	for k, v := range raw.Header {
		if !strings.HasPrefix(k, wire.HeaderDLQPrefix) && !strings.HasPrefix(k, "Nats-") {
			msg.Header[k] = v
		}
	}
	msg.Header.Set(wire.HeaderReplayedFrom, strconv.FormatUint(seq, 10))
	id := fmt.Sprintf("replay/%s/%d", a.subjects.DLQStream(), seq)
	if orig := raw.Header.Get(wire.HeaderDLQMsgID); orig != "" {
		id = orig + "/" + id
	}
	if _, err := a.js.PublishMsg(ctx, msg, jetstream.WithMsgID(id)); err != nil {
		return fmt.Errorf("replay dead letter %d to %s: %w", seq, subject, err)
	}
	if err := s.DeleteMsg(ctx, seq); err != nil {
		return fmt.Errorf("replayed dead letter %d but could not delete it: %w", seq, err)
	}
	return nil
}
