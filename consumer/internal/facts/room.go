package facts

import (
	"cmp"
	"fmt"
	"slices"
	"strings"

	"github.com/livekit/protocol/livekit"
	"github.com/livekit/protocol/livekit/agent"
	"github.com/lkscore/lkscore/session"
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
// (Store.joinRoom). Both go through the room entry's compare-and-swap, so
// whichever comes second sees the first.

// Room fact fields.
const (
	FieldDeparture     = "departure"      // "<order> <role> <reason> <identity hash>"
	FieldRoomEnd       = "room_end"       // room_finished's end reason: the room is gone
	FieldAgentIdentity = "agent_identity" // hash of the job's participant identity
	FieldJobError      = "job_error"      // agent_job_ended's state.error
)

// SourceRoom is the room's webhooks as a close-reason source: below the SDK's
// logs and the job status, above absent.
const SourceRoom = "webhook_room"

// Participant roles in a departure.
const (
	RoleCaller = "caller"
	RoleAgent  = "agent"
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

// IsDepartureError reports whether a job's error is a normal departure.
func IsDepartureError(e string) bool { return departureErrors[strings.ToLower(strings.TrimSpace(e))] }

// DepartureObservation is one participant leaving, or nil for a participant
// that is not part of the call (egress, ingress) or a departure that is not
// an end (a Cloud migration). orderNanos orders departures: the event's
// created_at (seconds) first, then when the stream stored it (LiveKit's
// notifier sends one room's events in order).
func DepartureObservation(ev *livekit.WebhookEvent, storedNanos int64) *Observation {
	p := ev.GetParticipant()
	if p == nil {
		return nil
	}
	role := RoleCaller
	switch p.GetKind() {
	case livekit.ParticipantInfo_AGENT:
		role = RoleAgent
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
	return &Observation{Field: FieldDeparture, Value: order + " " + role + " " + reason + " " + IdentityHash(p.GetIdentity()),
		Source: SourceRoom, Evidence: ev.GetEvent() + " kind=" + p.GetKind().String() + " disconnect_reason=" + reason}
}

// RoomEndObservation is a finished room's end reason (the event's
// room_end_reason; ROOM_END_UNKNOWN from servers that do not set it).
func RoomEndObservation(ev *livekit.WebhookEvent) Observation {
	return Observation{Field: FieldRoomEnd, Value: ev.GetRoomEndReason().String(), Source: SourceRoom, Evidence: "room_finished"}
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

func storyOf(obs []Observation) roomStory {
	var s roomStory
	agents := map[string]bool{}
	for _, o := range obs {
		switch o.Field {
		case FieldRoomEnd:
			s.finished = true
			if s.endReason == "" || o.Value < s.endReason {
				s.endReason = o.Value
			}
		case FieldAgentIdentity:
			for _, t := range identityTokens(o.Value) {
				agents[t] = true
			}
		case FieldDeparture:
			if d, ok := parseDeparture(o.Value); ok {
				s.departures = append(s.departures, d)
			}
		}
	}
	for i, d := range s.departures {
		if slices.ContainsFunc(identityTokens(d.identity), func(t string) bool { return agents[t] }) {
			s.departures[i].role = RoleAgent // the job's participant, whatever its kind says
		}
	}
	slices.SortFunc(s.departures, func(a, b departure) int {
		return cmp.Or(strings.Compare(a.order, b.order), strings.Compare(a.identity, b.identity), strings.Compare(a.reason, b.reason))
	})
	// A participant's first departure counts (a webhook LiveKit retried after
	// the dedup window is stored twice; the same participant across a key
	// rotation shares a token); without an identity, each counts.
	seen := map[string]bool{}
	s.departures = slices.DeleteFunc(s.departures, func(d departure) bool {
		tokens := identityTokens(d.identity)
		dup := slices.ContainsFunc(tokens, func(t string) bool { return seen[t] })
		for _, t := range tokens {
			seen[t] = true
		}
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

// deletedReasons are a room deleted through the API (RoomService.DeleteRoom,
// the way many apps hang up); serverShutdownReasons a server shutting down.
var (
	deletedReasons = map[string]bool{
		livekit.DisconnectReason_ROOM_DELETED.String(): true, livekit.RoomEndReason_ROOM_END_API_DELETE.String(): true,
	}
	serverShutdownReasons = map[string]bool{
		livekit.DisconnectReason_SERVER_SHUTDOWN.String(): true, livekit.RoomEndReason_ROOM_END_SERVER_SHUTDOWN.String(): true,
	}
)

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

// SDK languages, as the facts name them (telemetry.sdk.language).
const (
	SDKNode   = "nodejs"
	SDKPython = "python"
)

// ending is how the room's story says the call ended: the SDKs name the
// same endings by their own close reasons.
type ending int

const (
	endingNone           ending = iota // nothing said yet, or the app removed the caller
	endingCallerLeft                   // the caller left first
	endingCallerRemoved                // the caller was removed for an agent error
	endingAgentLeft                    // the agent left first, by itself
	endingRoomDeleted                  // DeleteRoom
	endingServerShutdown               // the server shut down
)

// ending reads the story's ending, with what shows it.
func (s roomStory) ending() (ending, string) {
	d, ok := s.first()
	switch {
	case ok && deletedReasons[d.reason], !ok && deletedReasons[s.endReason]:
		return endingRoomDeleted, s.shows(d, ok)
	case ok && serverShutdownReasons[d.reason], !ok && serverShutdownReasons[s.endReason]:
		return endingServerShutdown, s.shows(d, ok)
	case ok && d.role == RoleCaller && d.reason == livekit.DisconnectReason_AGENT_ERROR.String():
		return endingCallerRemoved, fmt.Sprintf("caller removed, disconnect_reason=%s", d.reason)
	case ok && d.role == RoleCaller && callerGoneReasons[d.reason]:
		return endingCallerLeft, fmt.Sprintf("caller left first, disconnect_reason=%s", d.reason)
	case ok && d.role == RoleAgent && d.reason == livekit.DisconnectReason_CLIENT_INITIATED.String():
		return endingAgentLeft, fmt.Sprintf("the agent left first (disconnect_reason=%s): it ended the session", d.reason)
	}
	return endingNone, ""
}

func (s roomStory) shows(d departure, ok bool) string {
	if ok {
		return fmt.Sprintf("%s left first, disconnect_reason=%s", d.role, d.reason)
	}
	return "room_finished end_reason=" + s.endReason
}

// closeReason is the close reason the room's story gives for the SDK that
// ran the session (sdk, "" when no signal named it): the reason that SDK
// itself reports for the same ending, as measured on a real livekit-server
// with a real agents-js worker or read in the SDKs' sources (docs/facts.md,
// "One ending, one close reason", has the table). "" when the webhooks
// cannot tell which reason the SDK gave (ambiguous says why).
func (s roomStory) closeReason(sdk string) (reason, evidence string) {
	e, shows := s.ending()
	say := func(r agent.CloseReason, why string) (string, string) {
		if why != "" {
			why = "; " + why
		}
		return r.String(), fmt.Sprintf("%s: %s%s", SourceRoom, shows, why)
	}
	switch {
	case e == endingCallerRemoved:
		return say(agent.CloseReason_CR_ERROR, "")
	case e == endingCallerLeft:
		return say(agent.CloseReason_CR_PARTICIPANT_DISCONNECTED, "")
	case e == endingRoomDeleted && sdk == SDKNode:
		return say(agent.CloseReason_CR_USER_INITIATED, "agents-js reports user_initiated for a deleted room")
	case e == endingServerShutdown && sdk == SDKNode:
		return say(agent.CloseReason_CR_USER_INITIATED, "agents-js closes the session of a disconnected room with user_initiated")
	case e == endingServerShutdown && sdk == SDKPython:
		return say(agent.CloseReason_CR_JOB_SHUTDOWN, "the Python SDK closes the session of a shut-down job with job_shutdown")
	case e == endingAgentLeft && sdk == SDKNode:
		return say(agent.CloseReason_CR_USER_INITIATED,
			"agents-js reports user_initiated for a session the agent closed (session.shutdown(), ctx.shutdown())")
	}
	return "", ""
}

// ambiguous says why the story names an ending but no close reason: the
// SDKs report it differently, and no signal named the SDK, or the SDK
// itself can report more than one.
func (s roomStory) ambiguous(sdk string) string {
	e, shows := s.ending()
	if sdk == "" {
		sdk = "no signal named the SDK"
	} else {
		sdk = "SDK " + sdk
	}
	switch e {
	case endingRoomDeleted:
		return fmt.Sprintf("%s: %s: the room was deleted; agents-js reports user_initiated, the Python SDK participant_disconnected "+
			"or job_shutdown, whichever closes first (%s)", SourceRoom, shows, sdk)
	case endingServerShutdown:
		return fmt.Sprintf("%s: %s: the server shut down; agents-js reports user_initiated, the Python SDK job_shutdown (%s)", SourceRoom, shows, sdk)
	case endingAgentLeft:
		return fmt.Sprintf("%s: %s; agents-js reports user_initiated, the Python SDK user_initiated (session.shutdown()) "+
			"or job_shutdown (ctx.shutdown()), for a reason no signal named (%s)", SourceRoom, shows, sdk)
	}
	return ""
}

// apply sets the room's facts on r.
func (s roomStory) apply(r *Resolved) {
	if d, ok := s.first(); ok {
		r.EndedBy = d.role
	}
	for _, d := range s.departures {
		r.Departures = append(r.Departures, session.Departure{Role: d.role, Reason: d.reason})
	}
	r.RoomEndReason = s.endReason
}
