package failure

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/lkscore/lkscore/recording"
	"github.com/lkscore/lkscore/store"
)

func TestClassify(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name   string
		err    error
		kind   Kind
		label  string
		status int
	}{
		{"not yet", fmt.Errorf("locate: %w", ErrNotYet), KindNotYet, "recording_not_found", http.StatusNotFound},
		{"parse error", &recording.ParseError{Part: "chat_history", Err: errors.New("bad")}, KindPermanent, "malformed_recording", http.StatusBadRequest},
		{"limit", fmt.Errorf("open: %w", recording.ErrLimit), KindPermanent, "malformed_recording", http.StatusRequestEntityTooLarge},
		{"max bytes", &http.MaxBytesError{Limit: 1}, KindPermanent, "malformed_recording", http.StatusRequestEntityTooLarge},
		{"gone from the store", fmt.Errorf("get: %w", store.ErrNotFound), KindPermanent, "recording_not_found", http.StatusNotFound},
		{"store denied", fmt.Errorf("get: %w", store.ErrPermanent), KindPermanent, "store", http.StatusServiceUnavailable},
		{"bad message", Permanent(errors.New("not JSON")), KindPermanent, "bad_message", http.StatusBadRequest},
		{"refusal", Refuse(http.StatusUnauthorized, "no"), KindPermanent, "bad_message", http.StatusUnauthorized},
		{"client gone", &BodyError{Err: errors.New("unexpected EOF")}, KindPermanent, "bad_message", http.StatusBadRequest},
		{"timeout", context.DeadlineExceeded, KindTransient, "transient", http.StatusServiceUnavailable},
		{"anything else", errors.New("nats: no responders"), KindTransient, "transient", http.StatusServiceUnavailable},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := Classify(tc.err)
			if f.Kind != tc.kind || f.Label != tc.label || f.Status != tc.status {
				t.Errorf("Classify(%v) = %+v, want kind %d label %s status %d", tc.err, f, tc.kind, tc.label, tc.status)
			}
		})
	}
}

func TestBackoffIsJitteredAndBounded(t *testing.T) {
	t.Parallel()
	seen := map[time.Duration]bool{}
	for n := uint64(1); n <= 20; n++ {
		want := min(5*time.Second<<min(n-1, 10), maxBackoff)
		for range 50 {
			d := Backoff(5*time.Second, n)
			if d < want*8/10 || d > want*12/10 {
				t.Fatalf("Backoff(5s, %d) = %s, want within ±20%% of %s", n, d, want)
			}
			seen[d] = true
		}
	}
	if len(seen) < 100 {
		t.Errorf("only %d distinct delays in 1000 draws: not jittered", len(seen))
	}
}

func TestTruncateHeaderKeepsUTF8(t *testing.T) {
	t.Parallel()
	for _, s := range []string{strings.Repeat("é", 600), strings.Repeat("a", 1023) + "€€", strings.Repeat("🎙", 300)} {
		got := TruncateHeader(s)
		if !utf8.ValidString(got) || len(got) > 1024+len("…") {
			t.Errorf("TruncateHeader(%d bytes) = %d bytes, valid %v", len(s), len(got), utf8.ValidString(got))
		}
	}
	if short := "short ✓"; TruncateHeader(short) != short {
		t.Error("a short value changed")
	}
}

// TestPipelineStopWaitsForLoops: stop returns only after every background
// loop has returned, so none can publish while NATS drains.
