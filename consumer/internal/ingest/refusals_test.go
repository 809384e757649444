package ingest

import (
	"bytes"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"
)

// TestRefusalLogBounded: 1,000 refusals of one reason within a minute
// leave three warn lines; the next one, a minute later, first says how many
// were left out, then logs itself. Another reason has its own budget.
func TestRefusalLogBounded(t *testing.T) {
	t.Parallel()
	var buf bytes.Buffer
	var mu sync.Mutex
	now := time.Date(2026, 12, 3, 10, 0, 0, 0, time.UTC)
	l := newRefusalLog(slog.New(slog.NewTextHandler(&lockedWriter{w: &buf, mu: &mu}, nil)), func() time.Time { return now })
	for range 1000 {
		l.refused("webhook", refusedBadSignature, "webhook refused: bad", "api_key", "APIkey1")
	}
	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	if len(lines) != 3 || !strings.Contains(lines[0], "level=WARN") || !strings.Contains(lines[0], "reason=bad_signature") ||
		!strings.Contains(lines[0], "api_key=APIkey1") {
		t.Fatalf("1,000 refusals logged %d lines: %q", len(lines), lines)
	}
	l.refused("webhook", refusedUnknownKey, "webhook refused: unknown", "api_key", "nope")
	now = now.Add(61 * time.Second)
	l.refused("webhook", refusedBadSignature, "webhook refused: bad", "api_key", "APIkey1")
	lines = strings.Split(strings.TrimSpace(buf.String()), "\n")
	if len(lines) != 6 || !strings.Contains(lines[3], "reason=unknown_key") || !strings.Contains(lines[4], "count=997") ||
		!strings.Contains(lines[5], "reason=bad_signature") {
		t.Fatalf("after a minute: %q", lines[3:])
	}
}

type lockedWriter struct {
	w  *bytes.Buffer
	mu *sync.Mutex
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

// TestUnknownKeyNamesRealSettings (issue 71): the refusal of an unknown
// API key names where keys come from by names a user can find: the
// environment variable and the config key that exist.
func TestUnknownKeyNamesRealSettings(t *testing.T) {
	msg := (&authError{reason: refusedUnknownKey, key: "otherkey"}).Error()
	for _, want := range []string{`"otherkey"`, "LIVEKIT_API_KEY", "livekit.keys_file", "LKSCORE_KEYS_FILE"} {
		if !strings.Contains(msg, want) {
			t.Errorf("the refusal %q does not name %s", msg, want)
		}
	}
	if strings.Contains(msg, "livekit.keys ") || strings.HasSuffix(msg, "livekit.keys") {
		t.Errorf("the refusal names livekit.keys, which is no config key: %q", msg)
	}
}
