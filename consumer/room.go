package consumer

import (
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/livekit/protocol/livekit"
	"github.com/livekit/protocol/livekit/agent"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/lkscore/lkscore/consumer/internal/failure"
	"github.com/lkscore/lkscore/scoring"
	"github.com/lkscore/lkscore/wire"
)

// The room's own story: LiveKit's participant_left, participant_connection_aborted
// and room_finished webhooks say who left the room first, why, and how the room
// ended. A self-hosted livekit-server sends no agent_job_* webhooks at all, and
// the Python SDK at INFO logs no close reason, so for many sessions this is the
// only close signal there is. docs/facts.md has the rules.
//
// Room webhooks name the room, not the job. Their observations go to the room's
// own entry in the facts bucket (key "<room_id>._room"), which also lists the
// room's sessions, and from there to every session entry it lists; a session
// new to the room lists itself and copies what the room's entry holds
// (factStore.joinRoom). Both go through the room entry's compare-and-swap, so
// whichever comes second sees the first.

// Room fact fields.
const (
	fieldDeparture     = "departure"      // "<order> <role> <reason> <identity hash>"
	fieldRoomEnd       = "room_end"       // room_finished's end reason: the room is gone
	fieldAgentIdentity = "agent_identity" // hash of the job's participant identity
	fieldJobError      = "job_error"      // agent_job_ended's state.error
)

// sourceRoom is the room's webhooks as a close-reason source: below the SDK's
// logs and the job status, above absent.
const sourceRoom = "webhook_room"

// Participant roles in a departure.
const (
	roleCaller = "caller"
	roleAgent  = "agent"
)

// reasonConnectionAborted is the departure reason of a
// participant_connection_aborted webhook (no DisconnectReason value names it).
const reasonConnectionAborted = "CONNECTION_ABORTED"

// departureErrors are the job errors livekit-server sets on a job whose agent
// simply left: pkg/agent/worker.go TerminateJob with AGENT_LEFT_ROOM gives
// JS_FAILED "agent worker left the room" (the only one it sets). A clean
// agents-js 1.9.0 job always ends this way, because the SDK never reports
// JS_SUCCESS itself. A crash leaves the room too, so the error says nothing
// either way: not evidence of an error, not of a clean end.
var departureErrors = map[string]bool{"agent worker left the room": true}

// isDepartureError reports whether a job's error is a normal departure.
func isDepartureError(e string) bool { return departureErrors[strings.ToLower(strings.TrimSpace(e))] }

// identityHash keeps a participant identity comparable without storing it.
func identityHash(identity string) string {
	if identity == "" {
		return "-"
	}
	h := sha256.Sum256([]byte(identity))
	return hex.EncodeToString(h[:6])
}

// departureObservation is one participant leaving, or nil for a participant
// that is not part of the call (egress, ingress) or a departure that is not
// an end (a Cloud migration). orderNanos orders departures: the event's
// created_at (seconds) first, then when the stream stored it (LiveKit's
// notifier sends one room's events in order).
func departureObservation(ev *livekit.WebhookEvent, storedNanos int64) *wire.Observation {
	p := ev.GetParticipant()
	if p == nil {
		return nil
	}
	role := roleCaller
	switch p.GetKind() {
	case livekit.ParticipantInfo_AGENT:
		role = roleAgent
	case livekit.ParticipantInfo_EGRESS, livekit.ParticipantInfo_INGRESS:
		return nil
	}
	reason := p.GetDisconnectReason().String()
	if ev.GetEvent() == "participant_connection_aborted" {
		reason = reasonConnectionAborted
	} else if p.GetDisconnectReason() == livekit.DisconnectReason_MIGRATION {
		return nil
	}
	order := fmt.Sprintf("%012d.%019d", max(ev.GetCreatedAt(), 0), max(storedNanos, 0))
	return &wire.Observation{Field: fieldDeparture, Value: order + " " + role + " " + reason + " " + identityHash(p.GetIdentity()),
		Source: sourceRoom, Evidence: ev.GetEvent() + " kind=" + p.GetKind().String() + " disconnect_reason=" + reason}
}

// roomEndObservation is a finished room's end reason (the event's
// room_end_reason; ROOM_END_UNKNOWN from servers that do not set it).
func roomEndObservation(ev *livekit.WebhookEvent) wire.Observation {
	return wire.Observation{Field: fieldRoomEnd, Value: ev.GetRoomEndReason().String(), Source: sourceRoom, Evidence: "room_finished"}
}

// departure is one parsed departure observation.
type departure struct {
	order, role, reason, identity string
}

func parseDeparture(v string) (departure, bool) {
	f := strings.Fields(v)
	if len(f) != 4 {
		return departure{}, false
	}
	return departure{order: f[0], role: f[1], reason: f[2], identity: f[3]}, true
}

// roomStory is what a room's webhooks say, derived from the observation set
// alone: it is a pure function of the set.
type roomStory struct {
	departures []departure // in order, one per participant (its first)
	endReason  string      // "" while the room is open
	finished   bool
}

func storyOf(obs []wire.Observation) roomStory {
	var s roomStory
	agents := map[string]bool{}
	for _, o := range obs {
		switch o.Field {
		case fieldRoomEnd:
			s.finished = true
			if s.endReason == "" || o.Value < s.endReason {
				s.endReason = o.Value
			}
		case fieldAgentIdentity:
			agents[o.Value] = true
		case fieldDeparture:
			if d, ok := parseDeparture(o.Value); ok {
				s.departures = append(s.departures, d)
			}
		}
	}
	for i, d := range s.departures {
		if d.identity != "-" && agents[d.identity] {
			s.departures[i].role = roleAgent // the job's participant, whatever its kind says
		}
	}
	slices.SortFunc(s.departures, func(a, b departure) int {
		return cmp.Or(strings.Compare(a.order, b.order), strings.Compare(a.identity, b.identity), strings.Compare(a.reason, b.reason))
	})
	// A participant's first departure counts (a webhook LiveKit retried after
	// the dedup window is stored twice); without an identity, each counts.
	seen := map[string]bool{}
	s.departures = slices.DeleteFunc(s.departures, func(d departure) bool {
		if d.identity == "-" {
			return false
		}
		dup := seen[d.identity]
		seen[d.identity] = true
		return dup
	})
	return s
}

// first is the first departure, if any.
func (s roomStory) first() (departure, bool) {
	if len(s.departures) == 0 {
		return departure{}, false
	}
	return s.departures[0], true
}

// shutdownReasons are departures and room ends that mean the room was shut
// down from outside the call: DeleteRoom, a server shutting down.
var shutdownReasons = map[string]bool{
	livekit.DisconnectReason_ROOM_DELETED.String(): true, livekit.DisconnectReason_SERVER_SHUTDOWN.String(): true,
	livekit.RoomEndReason_ROOM_END_API_DELETE.String(): true, livekit.RoomEndReason_ROOM_END_SERVER_SHUTDOWN.String(): true,
}

// callerGoneReasons are the caller's departures that end the call from the
// caller's side: hanging up, a connection that failed or timed out, a SIP
// call that never connected.
var callerGoneReasons = map[string]bool{
	livekit.DisconnectReason_CLIENT_INITIATED.String(): true, livekit.DisconnectReason_UNKNOWN_REASON.String(): true,
	livekit.DisconnectReason_JOIN_FAILURE.String(): true, livekit.DisconnectReason_SIGNAL_CLOSE.String(): true,
	livekit.DisconnectReason_STATE_MISMATCH.String(): true, livekit.DisconnectReason_CONNECTION_TIMEOUT.String(): true,
	livekit.DisconnectReason_MEDIA_FAILURE.String(): true, livekit.DisconnectReason_DUPLICATE_IDENTITY.String(): true,
	livekit.DisconnectReason_USER_UNAVAILABLE.String(): true, livekit.DisconnectReason_USER_REJECTED.String(): true,
	livekit.DisconnectReason_SIP_TRUNK_FAILURE.String(): true, reasonConnectionAborted: true,
}

// closeReason is the close reason the room's story implies, with its
// evidence, or "" when it implies none (the agent left first, or the app
// removed the caller).
func (s roomStory) closeReason() (reason, evidence string) {
	d, ok := s.first()
	switch {
	case ok && shutdownReasons[d.reason]:
		return agent.CloseReason_CR_JOB_SHUTDOWN.String(), fmt.Sprintf("%s: %s left first, disconnect_reason=%s", sourceRoom, d.role, d.reason)
	case ok && d.role == roleCaller && d.reason == livekit.DisconnectReason_AGENT_ERROR.String():
		return agent.CloseReason_CR_ERROR.String(), fmt.Sprintf("%s: caller removed, disconnect_reason=%s", sourceRoom, d.reason)
	case ok && d.role == roleCaller && callerGoneReasons[d.reason]:
		return agent.CloseReason_CR_PARTICIPANT_DISCONNECTED.String(), fmt.Sprintf("%s: caller left first, disconnect_reason=%s", sourceRoom, d.reason)
	case !ok && shutdownReasons[s.endReason]:
		return agent.CloseReason_CR_JOB_SHUTDOWN.String(), fmt.Sprintf("%s: room_finished end_reason=%s", sourceRoom, s.endReason)
	}
	return "", ""
}

// apply sets the room's facts on r.
func (s roomStory) apply(r *wire.Resolved) {
	if d, ok := s.first(); ok {
		r.EndedBy = d.role
	}
	for _, d := range s.departures {
		r.Departures = append(r.Departures, scoring.Departure{Role: d.role, Reason: d.reason})
	}
	r.RoomEndReason = s.endReason
}

// roomEvent records a room webhook's facts: in the room's own entry, then in
// every session entry the room's entry lists. A duplicate event still copies
// (a crash may have stopped the first copy half-way); copies add nothing twice.
func (l *locator) roomEvent(ctx context.Context, roomID string, obs ...wire.Observation) error {
	if roomID == "" {
		return failure.Permanent(errors.New("room webhook without room.sid"))
	}
	var sessions []string
	err := l.facts.modify(ctx, wire.RoomFactsKey(roomID), func(f *wire.SessionFacts) bool {
		if f.RoomID == "" {
			f.RoomID, f.JobID = roomID, wire.RoomKeyJob
		}
		sessions = slices.Clone(f.Sessions)
		if !mergeFacts(f, factUpdate{Observations: obs}) {
			return false
		}
		f.LastInputAt = l.now().UTC()
		return true
	})
	if err != nil {
		return err
	}
	for _, k := range sessions {
		if err := l.facts.addTo(ctx, k, obs); err != nil {
			return err
		}
	}
	return nil
}

// participantLeft records one participant leaving a room.
func (l *locator) participantLeft(ctx context.Context, ev *livekit.WebhookEvent, m jetstream.Msg) error {
	var stored int64
	if md, err := m.Metadata(); err == nil {
		stored = md.Timestamp.UnixNano()
	}
	o := departureObservation(ev, stored)
	if o == nil {
		return nil
	}
	return l.roomEvent(ctx, ev.GetRoom().GetSid(), *o)
}
