package locate

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"path"
	"strings"

	"github.com/livekit/protocol/livekit"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/lkscore/lkscore/config"
	"github.com/lkscore/lkscore/consumer/broker"
	"github.com/lkscore/lkscore/consumer/internal/facts"
	"github.com/lkscore/lkscore/consumer/internal/failure"
	"github.com/lkscore/lkscore/recording"
	"github.com/lkscore/lkscore/wire"
)

// EgressLinkKey is an egress file's entry in the egress links bucket
// (wire.Subjects.EgressLinks): "<room_id>.<egress_id>".
func EgressLinkKey(roomID, egressID string) string {
	return wire.Token(roomID) + "." + wire.Token(egressID)
}

// EgressLink records an egress's output files for a room, in the
// <stream prefix>_EGRESS_LINKS key-value bucket under "<room_id>.<egress_id>".
type EgressLink struct {
	RoomID    string   `json:"room_id"`
	RoomName  string   `json:"room_name,omitempty"`
	EgressID  string   `json:"egress_id"`
	Status    string   `json:"status"`
	Locations []string `json:"locations"`
	EndedAt   int64    `json:"ended_at,omitempty"` // Unix ns, as EgressInfo has it
}

// mediaExt are extensions of egress media files: linked, never parsed.
var mediaExt = map[string]bool{".ogg": true, ".oga": true, ".opus": true, ".mp4": true, ".m4a": true, ".webm": true, ".mp3": true,
	".wav": true, ".flac": true, ".aac": true, ".ts": true, ".m3u8": true, ".mkv": true, ".jpg": true, ".jpeg": true, ".png": true}

// egressEnded links an egress's files to its room and locates any recording
// upload among them (a session directory's header, or a raw multipart body).
func (l *Locator) egressEnded(ctx context.Context, ev *livekit.WebhookEvent) error {
	info := ev.GetEgressInfo()
	if info.GetEgressId() == "" || info.GetRoomId() == "" {
		return failure.Permanent(errors.New("egress_ended without egress_id or room_id"))
	}
	var locs []string
	for _, f := range info.GetFileResults() {
		locs = append(locs, f.GetLocation())
	}
	if len(locs) == 0 && info.GetFile().GetLocation() != "" { // deprecated field of older servers
		locs = append(locs, info.GetFile().GetLocation())
	}
	var media []string
	for _, raw := range locs {
		loc, err := l.lp.Parse(raw)
		if err != nil || loc.Scheme != "s3" {
			media = append(media, raw) // unparsable or local: still worth linking
			continue
		}
		switch {
		case path.Base(loc.Key) == recording.ObjectHeader:
			if err := l.record(ctx, located{dir: recording.SessionDir(loc.Key), origin: "egress_ended"}); err != nil {
				return err
			}
		case mediaExt[strings.ToLower(path.Ext(loc.Key))]:
			media = append(media, raw)
		default:
			if err := l.multipartObject(ctx, loc); err != nil {
				return err
			}
		}
	}
	if len(media) == 0 || l.kv == nil {
		return nil
	}
	link := EgressLink{RoomID: info.GetRoomId(), RoomName: info.GetRoomName(), EgressID: info.GetEgressId(),
		Status: info.GetStatus().String(), Locations: media, EndedAt: info.GetEndedAt()}
	data, _ := json.Marshal(link)
	if _, err := l.kv.Put(ctx, EgressLinkKey(link.RoomID, link.EgressID), data); err != nil {
		return fmt.Errorf("store egress link: %w", err)
	}
	return nil
}

// multipartObject locates a session stored as one raw multipart body.
func (l *Locator) multipartObject(ctx context.Context, loc recording.Location) error {
	rc, err := l.store.OpenBucket(ctx, loc.Bucket, loc.Key, l.maxUpload)
	if errors.Is(err, recording.ErrNotFound) {
		return failure.ErrNotYet
	}
	if err != nil {
		return err
	}
	defer rc.Close()
	r := bufio.NewReader(rc)
	if b, _ := r.Peek(2); string(b) != "--" {
		return nil // not a multipart upload: an egress file of a kind we do not read
	}
	s, _, err := recording.ParseMultipart(r, "", l.lim)
	if err != nil {
		return err
	}
	ref := &facts.RecordingRef{SessionKey: s.Key, RoomName: s.RoomName, Object: loc.Key, Bucket: loc.Bucket,
		Location: "s3://" + loc.Bucket + "/" + loc.Key, Origin: "egress_ended", Problems: s.Problems}
	return l.facts.Add(ctx, l.recordingUpdate(s, ref, nil, ""))
}

// OpenEgressLinks creates or updates the egress links bucket: egress files
// by room, kept as long as the streams keep messages (nats.max_age).
func OpenEgressLinks(ctx context.Context, env broker.Env, n config.NATS) (jetstream.KeyValue, error) {
	var kv jetstream.KeyValue
	err := broker.RetrySetup(ctx, env.Log, "egress links bucket", env.Timeouts.Request, func(ctx context.Context) (err error) {
		kv, err = env.JS.CreateOrUpdateKeyValue(ctx, jetstream.KeyValueConfig{
			Bucket: env.Subjects.EgressLinks(), Description: "egress files by room (room_id.egress_id)",
			TTL: n.MaxAge, Storage: broker.StorageType(n.Storage), Replicas: n.Replicas,
		})
		return err
	})
	return kv, err
}
