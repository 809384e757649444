package score

import (
	"strings"
	"testing"

	"github.com/lkscore/lkscore/consumer/wire"
	"github.com/lkscore/lkscore/scoring"
)

// TestValidateItem: a work item names its session and exactly one place for
// its recording, or is metadata-only with its spans, and carries a proto
// close reason.
func TestValidateItem(t *testing.T) {
	t.Parallel()
	ok := wire.WorkItem{RecordingRef: wire.RecordingRef{SessionKey: "RM/AJ", Dir: "RM/AJ/"}, RoomID: "RM", CloseReason: "CR_COMPLETED"}
	spans := &wire.Resolved{Spans: []scoring.Span{{ID: "s1", Name: scoring.SpanAgentTurn}}}
	for _, tc := range []struct {
		name string
		edit func(*wire.WorkItem)
		want string // "" valid, else part of the error
	}{
		{"directory upload", func(*wire.WorkItem) {}, ""},
		{"multipart object", func(w *wire.WorkItem) { w.Dir, w.Object = "", "up.bin" }, ""},
		{"metadata only", func(w *wire.WorkItem) { w.Dir, w.MetadataOnly, w.Facts = "", true, spans }, ""},
		{"no session key", func(w *wire.WorkItem) { w.SessionKey = "" }, "session_key"},
		{"both places", func(w *wire.WorkItem) { w.Object = "up.bin" }, "exactly one"},
		{"no place", func(w *wire.WorkItem) { w.Dir = "" }, "exactly one"},
		{"metadata only with a dir", func(w *wire.WorkItem) { w.MetadataOnly, w.Facts = true, spans }, "no dir"},
		{"metadata only without spans", func(w *wire.WorkItem) { w.Dir, w.MetadataOnly = "", true }, "spans"},
		{"bad close reason", func(w *wire.WorkItem) { w.CloseReason = "completed" }, "not a proto name"},
	} {
		w := ok
		tc.edit(&w)
		err := validateItem(w)
		if (err == nil) != (tc.want == "") || (err != nil && !strings.Contains(err.Error(), tc.want)) {
			t.Errorf("%s: %v, want %q", tc.name, err, tc.want)
		}
	}
}
