package ingest

import (
	"context"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/lkscore/lkscore/config"
	"github.com/lkscore/lkscore/consumer/broker"
	"github.com/lkscore/lkscore/internal/testenv"
	"github.com/lkscore/lkscore/wire"
)

// TestRedactedRoomsAcrossReplicas: two ingest replicas on one real NATS
// server. A room one marks redacted is answered redacted by the other
// (through its watch of the bucket), a room nobody marked is not, and a
// room id that is not a plain key cannot name another's.
func TestRedactedRoomsAcrossReplicas(t *testing.T) {
	ns := testenv.StartNATS(t)
	cfg := config.Default().NATS
	open := func() *RedactedRooms {
		env := broker.Env{JS: testenv.JetStream(t, ns.URL()), Subjects: wire.NewSubjects("lkscore.", "LKSCORE"),
			Timeouts: broker.TimeoutsFrom(cfg), Now: time.Now, Log: slog.New(slog.NewTextHandler(io.Discard, nil))}
		r, err := OpenRedactedRooms(context.Background(), env, cfg)
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		go func() { defer close(done); r.Run(ctx) }()
		t.Cleanup(func() { cancel(); <-done })
		return r
	}
	a, b := open(), open()
	ctx := context.Background()
	testenv.WaitFor(t, 5*time.Second, "b's watch to catch up", func() bool { _, exact := b.known("x"); return exact })
	for _, room := range []string{"RM_Marked", "room with spaces", "h.RM"} {
		if err := a.Mark(ctx, room); err != nil {
			t.Fatal(err)
		}
	}
	testenv.WaitFor(t, 5*time.Second, "b to learn a's marks", func() bool {
		for _, room := range []string{"RM_Marked", "room with spaces", "h.RM"} {
			if known, _ := b.known(kvKey(room)); !known {
				return false
			}
		}
		return true
	})
	for room, want := range map[string]bool{"RM_Marked": true, "room with spaces": true, "h.RM": true, "RM_Other": false, "": false,
		"h.726f6f6d": false} {
		if got, err := b.Redacted(ctx, room); err != nil || got != want {
			t.Errorf("b: %q redacted %v (%v), want %v", room, got, err, want)
		}
	}
	// A third replica started after the marks learns them from the bucket.
	c := open()
	testenv.WaitFor(t, 5*time.Second, "c's watch to catch up", func() bool { _, exact := c.known("x"); return exact })
	if known, _ := c.known(kvKey("room with spaces")); !known {
		t.Error("a replica started later does not know the marked rooms")
	}
}
