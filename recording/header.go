// Package recording parses what the LiveKit agents SDKs upload at session
// end: the MetricsRecordingHeader protobuf, its session summary, and
// chat_history.json, within hard limits and with typed errors. It also knows
// where uploads live in a store (key templates, multipart objects, egress
// locations). It does no I/O of its own beyond the readers it is given.
package recording

import (
	"fmt"

	"github.com/livekit/protocol/livekit"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
)

// DefaultMaxHeaderBytes bounds header.binpb: ~16.5 KiB with a full summary,
// so 64 KiB leaves room for newer fields (docs/formats.md, "Recording header").
const DefaultMaxHeaderBytes = 64 << 10

// ParseHeader decodes header.binpb with the protocol's own generated type.
// Unknown fields from newer SDKs are kept, not rejected.
func ParseHeader(b []byte, maxBytes int) (*livekit.MetricsRecordingHeader, error) {
	if maxBytes <= 0 {
		maxBytes = DefaultMaxHeaderBytes
	}
	if len(b) > maxBytes {
		return nil, limitErr(PartHeader, -1, int64(maxBytes), fmt.Sprintf("max_bytes=%d", maxBytes))
	}
	var h livekit.MetricsRecordingHeader
	if err := (proto.UnmarshalOptions{DiscardUnknown: false}).Unmarshal(b, &h); err != nil {
		return nil, parseErr(PartHeader, -1, -1, fmt.Errorf("not a livekit.MetricsRecordingHeader: %w", err))
	}
	if err := checkWireTypes(&h); err != nil {
		return nil, parseErr(PartHeader, -1, -1, err)
	}
	return &h, nil
}

// checkWireTypes rejects known fields sent with the wrong wire type, which
// protobuf would otherwise keep silently as unknown fields (and leave e.g.
// room_id empty). Fields unknown to this protocol version stay tolerated.
func checkWireTypes(h *livekit.MetricsRecordingHeader) error {
	fields := h.ProtoReflect().Descriptor().Fields()
	b := h.ProtoReflect().GetUnknown()
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return fmt.Errorf("unknown fields: %w", protowire.ParseError(n))
		}
		if fd := fields.ByNumber(num); fd != nil {
			return fmt.Errorf("field %d (%s) has wire type %d, which does not fit its type %s", num, fd.Name(), typ, fd.Kind())
		}
		m := protowire.ConsumeFieldValue(num, typ, b[n:])
		if m < 0 {
			return fmt.Errorf("unknown field %d: %w", num, protowire.ParseError(m))
		}
		b = b[n+m:]
	}
	return nil
}
