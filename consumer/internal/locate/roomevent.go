package locate

import (
	"context"
	"errors"
	"slices"

	"github.com/livekit/protocol/livekit"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/lkscore/lkscore/consumer/internal/facts"
	"github.com/lkscore/lkscore/consumer/internal/failure"
)

// roomEvent records a room webhook's facts: in the room's own entry, then in
// every session entry the room's entry lists. A duplicate event still copies
// (a crash may have stopped the first copy half-way); copies add nothing twice.
func (l *Locator) roomEvent(ctx context.Context, roomID string, obs ...facts.Observation) error {
	if roomID == "" {
		return failure.Permanent(errors.New("room webhook without room.sid"))
	}
	var sessions []string
	err := l.facts.Modify(ctx, facts.RoomKey(roomID), func(f *facts.SessionFacts) bool {
		if f.RoomID == "" {
			f.RoomID, f.JobID = roomID, facts.RoomKeyJob
		}
		sessions = slices.Clone(f.Sessions)
		if !facts.Merge(f, facts.Update{Observations: obs}) {
			return false
		}
		f.LastInputAt = l.Now().UTC()
		return true
	})
	if err != nil {
		return err
	}
	for _, k := range sessions {
		if err := l.facts.AddTo(ctx, k, obs); err != nil {
			return err
		}
	}
	return nil
}

// participantLeft records one participant leaving a room.
func (l *Locator) participantLeft(ctx context.Context, ev *livekit.WebhookEvent, m jetstream.Msg) error {
	var stored int64
	if md, err := m.Metadata(); err == nil {
		stored = md.Timestamp.UnixNano()
	}
	o := facts.DepartureObservation(ev, stored)
	if o == nil {
		return nil
	}
	return l.roomEvent(ctx, ev.GetRoom().GetSid(), withRoomName(ev.GetRoom(), *o)...)
}

// withRoomName adds the room's name, which every room webhook carries, to a
// room event's observations.
func withRoomName(room *livekit.Room, obs ...facts.Observation) []facts.Observation {
	if name := room.GetName(); name != "" {
		obs = append(obs, facts.Observation{Field: facts.FieldRoomName, Value: facts.Bounded(name, facts.MaxEvidence), Source: facts.SourceWebhook})
	}
	return obs
}
