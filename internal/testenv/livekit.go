package testenv

import (
	"time"

	"github.com/livekit/protocol/livekit"
)

// ParticipantLeft is a participant_left webhook as livekit-server sends it.
func ParticipantLeft(id, roomSid, identity string, kind livekit.ParticipantInfo_Kind, reason livekit.DisconnectReason,
	at int64) *livekit.WebhookEvent {
	return &livekit.WebhookEvent{Event: "participant_left", Id: id, CreatedAt: at, Room: &livekit.Room{Sid: roomSid, Name: "room-" + roomSid},
		Participant: &livekit.ParticipantInfo{Identity: identity, Kind: kind, DisconnectReason: reason, State: livekit.ParticipantInfo_DISCONNECTED}}
}

// RoomFinished is a room_finished webhook.
func RoomFinished(id, roomSid string, end livekit.RoomEndReason) *livekit.WebhookEvent {
	return &livekit.WebhookEvent{Event: "room_finished", Id: id, CreatedAt: time.Now().Unix(),
		Room: &livekit.Room{Sid: roomSid, Name: "room-" + roomSid}, RoomEndReason: end}
}
