package score

import (
	"strings"
	"testing"

	"github.com/lkscore/lkscore/consumer/internal/facts"
	"github.com/lkscore/lkscore/consumer/internal/work"
	"github.com/lkscore/lkscore/scoring"
	"github.com/lkscore/lkscore/session"
)

// TestValidateItem: a work item names its session and exactly one place for
// its recording, or is metadata-only with its spans, and carries a proto
// close reason.
func TestValidateItem(t *testing.T) {
	t.Parallel()
	ok := work.Item{Close: session.Close{CloseReason: "CR_COMPLETED"}, RecordingRef: facts.RecordingRef{SessionKey: "RM/AJ", Dir: "RM/AJ/"}, RoomID: "RM"}
	spans := &facts.Resolved{Spans: []scoring.Span{{ID: "s1", Name: scoring.SpanAgentTurn}}}
	for _, tc := range []struct {
		name string
		edit func(*work.Item)
		want string // "" valid, else part of the error
	}{
		{"directory upload", func(*work.Item) {}, ""},
		{"multipart object", func(w *work.Item) { w.Dir, w.Object = "", "up.bin" }, ""},
		{"metadata only", func(w *work.Item) { w.Dir, w.MetadataOnly, w.Facts = "", true, spans }, ""},
		{"no session key", func(w *work.Item) { w.SessionKey = "" }, "session_key"},
		{"both places", func(w *work.Item) { w.Object = "up.bin" }, "exactly one"},
		{"no place", func(w *work.Item) { w.Dir = "" }, "exactly one"},
		{"metadata only with a dir", func(w *work.Item) { w.MetadataOnly, w.Facts = true, spans }, "no dir"},
		{"metadata only without spans", func(w *work.Item) { w.Dir, w.MetadataOnly = "", true }, "spans"},
		{"bad close reason", func(w *work.Item) { w.CloseReason = "completed" }, "not a proto name"},
	} {
		w := ok
		tc.edit(&w)
		err := validateItem(w)
		if (err == nil) != (tc.want == "") || (err != nil && !strings.Contains(err.Error(), tc.want)) {
			t.Errorf("%s: %v, want %q", tc.name, err, tc.want)
		}
	}
}
