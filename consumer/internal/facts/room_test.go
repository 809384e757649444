package facts

import (
	"math/rand/v2"
	"reflect"
	"slices"
	"testing"

	"github.com/livekit/protocol/livekit"

	"github.com/lkscore/lkscore/internal/testenv"
)

// testKeys hashes the tests' identities as ingest would store them.
var testKeys = mustIdentityKeys("test identity key 0123456789")

func mustIdentityKeys(secrets ...string) *IdentityKeys {
	k, err := NewIdentityKeys(secrets...)
	if err != nil {
		panic(err)
	}
	return k
}

// departureObs is ev's departure as the worker reads it: stored by ingest,
// its identity hashed under testKeys.
func departureObs(t *testing.T, ev *livekit.WebhookEvent, storedNanos int64) Observation {
	t.Helper()
	return storedDeparture(t, testKeys, ev, storedNanos)
}

func storedDeparture(t *testing.T, keys *IdentityKeys, ev *livekit.WebhookEvent, storedNanos int64) Observation {
	t.Helper()
	if p := ev.GetParticipant(); p != nil {
		p.Identity = keys.Stored(p.Identity)
	}
	o := DepartureObservation(ev, storedNanos)
	if o == nil {
		t.Fatalf("no departure for %s", ev.GetParticipant().GetIdentity())
	}
	return *o
}

// TestRoomStory: what the room's webhooks imply, whatever order they come in.
func TestRoomStory(t *testing.T) {
	t.Parallel()
	const caller, agentKind = livekit.ParticipantInfo_STANDARD, livekit.ParticipantInfo_AGENT
	sip := livekit.ParticipantInfo_SIP
	end := func(r livekit.RoomEndReason) Observation {
		return RoomEndObservation(testenv.RoomFinished("EV_f", "RM", r))
	}
	sdk := func(lang string) Observation {
		return Observation{Field: FieldSDKLanguage, Value: lang, Source: SourceOTLP, Evidence: "resource telemetry.sdk.language"}
	}
	dep := func(identity string, kind livekit.ParticipantInfo_Kind, reason livekit.DisconnectReason, at, stored int64) Observation {
		return departureObs(t, testenv.ParticipantLeft("EV_"+identity, "RM", identity, kind, reason, at), stored)
	}
	for _, tc := range []struct {
		name              string
		obs               []Observation
		want, from, ended string
	}{
		{"caller hangs up first", []Observation{
			dep("caller", caller, livekit.DisconnectReason_CLIENT_INITIATED, 100, 5),
			dep("agent-AJ", agentKind, livekit.DisconnectReason_CLIENT_INITIATED, 101, 1),
			end(livekit.RoomEndReason_ROOM_END_IDLE_TIMEOUT)}, "CR_PARTICIPANT_DISCONNECTED", SourceRoom, RoleCaller},
		{"same second: the stream's order decides", []Observation{
			dep("agent-AJ", agentKind, livekit.DisconnectReason_ROOM_CLOSED, 100, 9),
			dep("caller", caller, livekit.DisconnectReason_CLIENT_INITIATED, 100, 8)}, "CR_PARTICIPANT_DISCONNECTED", SourceRoom, RoleCaller},
		{"agent leaves first: no SDK named, nothing more", []Observation{
			dep("agent-AJ", agentKind, livekit.DisconnectReason_CLIENT_INITIATED, 100, 1),
			dep("caller", caller, livekit.DisconnectReason_CLIENT_INITIATED, 104, 2),
			end(livekit.RoomEndReason_ROOM_END_IDLE_TIMEOUT)}, "CR_UNKNOWN", SourceAbsent, RoleAgent},
		{"agent leaves first, agents-js: user_initiated (measured, session e)", []Observation{sdk(SDKNode),
			dep("agent-AJ", agentKind, livekit.DisconnectReason_CLIENT_INITIATED, 100, 1),
			dep("caller", caller, livekit.DisconnectReason_CLIENT_INITIATED, 104, 2),
			end(livekit.RoomEndReason_ROOM_END_IDLE_TIMEOUT)}, "CR_USER_INITIATED", SourceRoom, RoleAgent},
		{"agent leaves first, Python: user_initiated or job_shutdown", []Observation{sdk(SDKPython),
			dep("agent-AJ", agentKind, livekit.DisconnectReason_CLIENT_INITIATED, 100, 1)}, "CR_UNKNOWN", SourceAbsent, RoleAgent},
		{"room deleted via the API, no SDK named", []Observation{
			dep("caller", caller, livekit.DisconnectReason_ROOM_DELETED, 100, 1),
			dep("agent-AJ", agentKind, livekit.DisconnectReason_ROOM_DELETED, 100, 2),
			end(livekit.RoomEndReason_ROOM_END_API_DELETE)}, "CR_UNKNOWN", SourceAbsent, RoleCaller},
		{"room deleted via the API, agents-js: user_initiated (measured, session f)", []Observation{sdk(SDKNode),
			dep("caller", caller, livekit.DisconnectReason_ROOM_DELETED, 100, 1),
			dep("agent-AJ", agentKind, livekit.DisconnectReason_ROOM_DELETED, 100, 2),
			end(livekit.RoomEndReason_ROOM_END_API_DELETE)}, "CR_USER_INITIATED", SourceRoom, RoleCaller},
		{"room deleted via the API, Python: either of two", []Observation{sdk(SDKPython),
			dep("caller", caller, livekit.DisconnectReason_ROOM_DELETED, 100, 1)}, "CR_UNKNOWN", SourceAbsent, RoleCaller},
		{"room deleted, no departures seen", []Observation{end(livekit.RoomEndReason_ROOM_END_API_DELETE)}, "CR_UNKNOWN", SourceAbsent, ""},
		{"room deleted, no departures seen, agents-js", []Observation{sdk(SDKNode), end(livekit.RoomEndReason_ROOM_END_API_DELETE)},
			"CR_USER_INITIATED", SourceRoom, ""},
		{"server shutdown, no SDK named", []Observation{dep("caller", caller, livekit.DisconnectReason_SERVER_SHUTDOWN, 100, 1)}, "CR_UNKNOWN", SourceAbsent, RoleCaller},
		{"server shutdown, agents-js", []Observation{sdk(SDKNode), dep("caller", caller, livekit.DisconnectReason_SERVER_SHUTDOWN, 100, 1)},
			"CR_USER_INITIATED", SourceRoom, RoleCaller},
		{"server shutdown, Python", []Observation{sdk(SDKPython), dep("caller", caller, livekit.DisconnectReason_SERVER_SHUTDOWN, 100, 1)},
			"CR_JOB_SHUTDOWN", SourceRoom, RoleCaller},
		{"SIP callee unavailable", []Observation{dep("+15550100", sip, livekit.DisconnectReason_USER_UNAVAILABLE, 100, 1)}, "CR_PARTICIPANT_DISCONNECTED", SourceRoom, RoleCaller},
		{"caller's connection aborted", []Observation{departureObs(t, &livekit.WebhookEvent{Event: "participant_connection_aborted", Id: "EV_ab", CreatedAt: 100,
			Room: &livekit.Room{Sid: "RM"}, Participant: &livekit.ParticipantInfo{Identity: "caller"}}, 1)}, "CR_PARTICIPANT_DISCONNECTED", SourceRoom, RoleCaller},
		{"caller removed by the app", []Observation{dep("caller", caller, livekit.DisconnectReason_PARTICIPANT_REMOVED, 100, 1)}, "CR_UNKNOWN", SourceAbsent, RoleCaller},
		{"caller removed for an agent error", []Observation{dep("caller", caller, livekit.DisconnectReason_AGENT_ERROR, 100, 1)}, "CR_ERROR", SourceRoom, RoleCaller},
		{"the job's identity marks the agent, whatever its kind", []Observation{
			{Field: FieldAgentIdentity, Value: IdentityHash(testKeys.Stored("bot")), Source: SourceWebhook},
			dep("bot", caller, livekit.DisconnectReason_CLIENT_INITIATED, 100, 1),
			dep("caller", caller, livekit.DisconnectReason_CLIENT_INITIATED, 101, 1)}, "CR_UNKNOWN", SourceAbsent, RoleAgent},
		{"the SDK's log outranks the room", []Observation{
			{Field: FieldCloseReason, Value: "CR_USER_INITIATED", Source: SourceOTLPLog, Evidence: "otlp_log: x"},
			dep("caller", caller, livekit.DisconnectReason_ROOM_DELETED, 100, 1)}, "CR_USER_INITIATED", SourceOTLPLog, RoleCaller},
		{"a crashed job outranks the room", []Observation{
			{Field: FieldCloseReason, Value: "CR_ERROR", Source: SourceJobStatus, Evidence: "job_status: x"},
			dep("caller", caller, livekit.DisconnectReason_CLIENT_INITIATED, 100, 1)}, "CR_ERROR", SourceJobStatus, RoleCaller},
	} {
		t.Run(tc.name, func(t *testing.T) {
			want := Resolve(tc.obs)
			if want.CloseReason != tc.want || want.CloseReasonSource != tc.from || want.EndedBy != tc.ended {
				t.Fatalf("resolved %s from %s (%q), ended by %q; want %s from %s, ended by %q",
					want.CloseReason, want.CloseReasonSource, want.CloseReasonEvidence, want.EndedBy, tc.want, tc.from, tc.ended)
			}
			for range 50 { // any arrival order, any duplicate
				obs := append(slices.Clone(tc.obs), tc.obs[rand.IntN(len(tc.obs))])
				rand.Shuffle(len(obs), func(a, b int) { obs[a], obs[b] = obs[b], obs[a] })
				f := &SessionFacts{}
				Merge(f, Update{Observations: obs})
				if got := Resolve(f.Observations); !reflect.DeepEqual(got, Resolve(sortedObs(tc.obs))) {
					t.Fatalf("order changed the facts:\n%+v\n%+v", got, want)
				}
			}
		})
	}
	// Egress and ingress participants are not part of the call; a Cloud
	// migration is not an end.
	for _, p := range []*livekit.ParticipantInfo{{Identity: "EG_1", Kind: livekit.ParticipantInfo_EGRESS},
		{Identity: "IN_1", Kind: livekit.ParticipantInfo_INGRESS}, {Identity: "c", DisconnectReason: livekit.DisconnectReason_MIGRATION}} {
		if o := DepartureObservation(&livekit.WebhookEvent{Event: "participant_left", Participant: p}, 1); o != nil {
			t.Errorf("%s: departure %+v", p.Identity, o)
		}
	}
}

func sortedObs(obs []Observation) []Observation {
	f := &SessionFacts{}
	Merge(f, Update{Observations: obs})
	return f.Observations
}
