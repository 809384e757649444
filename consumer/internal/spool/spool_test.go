package spool

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"testing"

	"github.com/lkscore/lkscore/consumer/internal/facts"
	"github.com/lkscore/lkscore/store"
)

type sink struct {
	got  []facts.Update
	fail error
}

func (s *sink) Add(_ context.Context, u facts.Update) error {
	if s.fail != nil {
		return s.fail
	}
	s.got = append(s.got, u)
	return nil
}

// TestPutThenDrain: facts spooled in a local store come back in order,
// each entry once, and leave the store; while the sink fails (NATS still
// away) the entry stays; an entry that does not decode is left for a person
// and does not block the others.
func TestPutThenDrain(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	root := t.TempDir()
	st, err := store.NewLocal(root)
	if err != nil {
		t.Fatal(err)
	}
	k := &sink{}
	sp, err := New(Options{Store: st, Sink: k, Connected: func() bool { return true }, Log: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	first := []facts.Update{{RoomID: "RM_a", JobID: "AJ_a", Observations: []facts.Observation{{Field: facts.FieldSDKVersion, Value: "1.9.0", Source: facts.SourceOTLP}}}}
	second := []facts.Update{{RoomID: "RM_b", JobID: "AJ_b", JobEnded: true}, {RoomID: "RM_c"}}
	if err := sp.Put(ctx, "logs", first); err != nil {
		t.Fatal(err)
	}
	if err := sp.Put(ctx, "traces", second); err != nil {
		t.Fatal(err)
	}
	// A damaged entry, as a crash mid-write cannot leave (commits are
	// atomic) but a disk can.
	bad := filepath.Join(root, "lkscore-spool", "logs", "0000000000000000000-bad")
	if err := os.MkdirAll(bad, 0o750); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(bad, object), []byte("{not json"), 0o640); err != nil {
		t.Fatal(err)
	}

	k.fail = errors.New("nats: timeout")
	if n, err := sp.Drain(ctx); err == nil || n != 0 {
		t.Fatalf("drain with the sink failing: %d, %v", n, err)
	}
	k.fail = nil
	n, err := sp.Drain(ctx)
	if err != nil || n != 2 {
		t.Fatalf("drain: %d entries, %v; want 2", n, err)
	}
	if len(k.got) != 3 || k.got[0].RoomID != "RM_a" || k.got[0].Observations[0].Value != "1.9.0" || !k.got[1].JobEnded || k.got[2].RoomID != "RM_c" {
		t.Fatalf("drained %+v", k.got)
	}
	if n, err := sp.Drain(ctx); err != nil || n != 0 {
		t.Fatalf("a second drain added %d (%v): entries must leave the store", n, err)
	}
	left, err := st.List(ctx, Prefix)
	if err != nil || len(left) != 1 {
		t.Fatalf("left in the store: %+v (%v); want only the damaged entry", left, err)
	}
}
