package recording

import (
	"bytes"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/livekit/protocol/livekit"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"
)

// sdkHeader marshals a header the way the SDKs do: the protocol's own type.
func sdkHeader(t testing.TB, roomID, jobID, summary string) []byte {
	t.Helper()
	b, err := proto.Marshal(&livekit.MetricsRecordingHeader{
		RoomId: roomID, JobId: jobID, StartTime: timestamppb.New(time.Unix(1764417600, 120_000_000)),
		SessionSummary: summary,
	})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestParseHeader(t *testing.T) {
	good := sdkHeader(t, "RM_a", "AJ_b", `{"close_reason":"CR_COMPLETED"}`)
	// A newer SDK's field 99 (varint) must be tolerated.
	withUnknown := protowire.AppendVarint(protowire.AppendTag(append([]byte{}, good...), 99, protowire.VarintType), 7)
	wrongWire := protowire.AppendVarint(protowire.AppendTag(nil, 1, protowire.VarintType), 5) // room_id as a varint

	h, err := ParseHeader(withUnknown, 0)
	if err != nil || h.RoomId != "RM_a" || h.JobId != "AJ_b" {
		t.Fatalf("unknown field not tolerated: %v", err)
	}
	for name, in := range map[string][]byte{
		"truncated":  good[:len(good)-3],
		"wrong wire": wrongWire,
		"garbage":    {0xff, 0xff, 0xff, 0xff},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := ParseHeader(in, 0)
			var pe *ParseError
			if !errors.As(err, &pe) || pe.Part != PartHeader {
				t.Fatalf("err = %v, want a header ParseError", err)
			}
		})
	}
	t.Run("over limit", func(t *testing.T) {
		_, err := ParseHeader(bytes.Repeat([]byte{0}, DefaultMaxHeaderBytes+1), 0)
		if !errors.Is(err, ErrLimit) || !strings.Contains(err.Error(), "max_bytes=65536") {
			t.Fatalf("err = %v", err)
		}
	})
}

func TestNewSession(t *testing.T) {
	s, err := NewSession(sdkHeader(t, "RM_a", "AJ_b", `{"close_reason":"task_completed","sdk":"python","started_at":1764417600.1,"ended_at":1764417781550}`), DefaultLimits())
	if err != nil {
		t.Fatal(err)
	}
	if s.Key != "RM_a/AJ_b" || s.CloseReason != "CR_COMPLETED" || s.CloseReasonSource != SourceSummary {
		t.Fatalf("session %+v", s)
	}
	if s.StartTime == nil || !s.StartTime.Equal(time.Unix(1764417600, 120_000_000)) {
		t.Errorf("start time %v", s.StartTime)
	}
	if s.Summary.EndedAt != 1764417781.55 || s.Summary.SDK != "python" {
		t.Errorf("summary %+v", s.Summary)
	}
	// No job_id (SDK < 1.6.6): the key falls back to a stable header hash.
	hb := sdkHeader(t, "RM_a", "", "")
	s1, _ := NewSession(hb, DefaultLimits())
	s2, _ := NewSession(hb, DefaultLimits())
	if !strings.HasPrefix(s1.Key, "RM_a/h-") || s1.Key != s2.Key {
		t.Errorf("fallback keys %q %q", s1.Key, s2.Key)
	}
	if s1.CloseReason != "CR_UNKNOWN" || s1.CloseReasonSource != SourceAbsent {
		t.Errorf("no summary: %s from %s", s1.CloseReason, s1.CloseReasonSource)
	}
}

func FuzzParseHeader(f *testing.F) {
	f.Add(sdkHeader(f, "RM_a", "AJ_b", `{"close_reason":"CR_ERROR"}`))
	f.Add(sdkHeader(f, "RM_a", "", ""))
	f.Add([]byte{0x0a, 0x80})
	f.Fuzz(func(t *testing.T, data []byte) {
		s, err := NewSession(data, Limits{HeaderBytes: 4096})
		if err != nil {
			var pe *ParseError
			if !errors.As(err, &pe) || pe.Part != PartHeader {
				t.Fatalf("untyped error: %v", err)
			}
			return
		}
		if s.CloseReason == "" || s.CloseReasonSource == "" {
			t.Fatalf("empty close reason: %+v", s)
		}
	})
}
