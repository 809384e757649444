package ingest

import (
	"strings"
	"testing"

	"github.com/livekit/protocol/livekit"

	"github.com/lkscore/lkscore/consumer/internal/facts"
)

// TestStoredVersion: the version a stored agent_job_* event keeps is the
// configured key's value from the job's metadata, else its room's (the
// job's, then the event's), bounded and without control characters; events
// without a job, and configs without a key, keep none.
func TestStoredVersion(t *testing.T) {
	t.Parallel()
	job := func(jobMD, roomMD string) *livekit.WebhookEvent {
		return &livekit.WebhookEvent{Event: "agent_job_ended", Job: &livekit.Job{Metadata: jobMD, Room: &livekit.Room{Metadata: roomMD}}}
	}
	long := strings.Repeat("é", 100)
	for _, c := range []struct {
		name string
		ev   *livekit.WebhookEvent
		key  string
		want string
	}{
		{"job", job(`{"version":"v2","customer":"x"}`, `{"version":"v1"}`), "version", "v2"},
		{"room", job(`{"customer":"x"}`, `{"version":"v1"}`), "version", "v1"},
		{"event room", &livekit.WebhookEvent{Job: &livekit.Job{}, Room: &livekit.Room{Metadata: `{"version":"r"}`}}, "version", "r"},
		{"number", job(`{"version":12.5}`, ""), "version", "12.5"},
		{"object", job(`{"version":{"a":1}}`, `{"version":"v1"}`), "version", "v1"},
		{"not json", job(`v2`, ""), "version", ""},
		{"no key", job(`{"version":"v2"}`, ""), "", ""},
		{"no job", &livekit.WebhookEvent{Room: &livekit.Room{Metadata: `{"version":"v2"}`}}, "version", ""},
		{"line break", job(`{"version":"v2\r\nLk-Api-Key: forged"}`, ""), "version", "v2Lk-Api-Key: forged"},
		{"bounded", job(`{"version":"`+long+`"}`, ""), "version", strings.Repeat("é", facts.MaxMetadataValue/2)},
	} {
		if got := storedVersion(c.ev, c.key); got != c.want {
			t.Errorf("%s: %q, want %q", c.name, got, c.want)
		}
	}
}

// FuzzMetadataValue: any metadata gives a value within the bound, never a
// panic.
func FuzzMetadataValue(f *testing.F) {
	for _, s := range []string{`{"version":"v2"}`, `{"version":1e308}`, `{"version":"` + strings.Repeat("x", 300) + `"}`, `[`, `{"version":null}`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, md string) {
		v := storedVersion(&livekit.WebhookEvent{Job: &livekit.Job{Metadata: md}}, "version")
		if len(v) > facts.MaxMetadataValue || strings.ContainsAny(v, "\r\n\x00") {
			t.Fatalf("%q from %q", v, md)
		}
	})
}
