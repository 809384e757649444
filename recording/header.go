// Package recording parses what the LiveKit agents SDKs upload at session
// end: the MetricsRecordingHeader protobuf, its session summary, and
// chat_history.json, within hard limits and with typed errors. It also knows
// where uploads live in a store (key templates, multipart objects, egress
// locations). It does no I/O of its own beyond the readers it is given.
package recording

import (
	"fmt"

	"github.com/livekit/protocol/livekit"
	"google.golang.org/protobuf/proto"
)

// DefaultMaxHeaderBytes bounds header.binpb: ~16.5 KiB with a full summary,
// so 64 KiB leaves room for newer fields (FORMATS.md §1.1).
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
	return &h, nil
}
