package factstore_test

import (
	"context"
	"fmt"
	"sync"
	"testing"

	"github.com/lkscore/lkscore/consumer/internal/facts"
	"github.com/lkscore/lkscore/consumer/internal/stagetest"
)

// TestConcurrentAddsKeepEverything: four writers (as a session's webhook,
// logs, spans and upload are handled at once) add 32 observations each to
// one session while its room's webhook adds to the room,
// against a real JetStream KV. Every observation is kept, the session is
// listed in its room's entry once and holds the room's facts, and an update
// that adds nothing writes nothing (the revision stays).
func TestConcurrentAddsKeepEverything(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := stagetest.Start(t).Facts(t)
	const writers, each = 4, 32
	var wg sync.WaitGroup
	errs := make(chan error, writers*each+1)
	for w := range writers {
		wg.Go(func() {
			for i := range each {
				u := facts.Update{RoomID: "RM_a", JobID: "AJ_b", Observations: []facts.Observation{
					{Field: "tag", Value: fmt.Sprintf("w%02d-%d", w, i), Source: "otlp_log"}}}
				if err := s.Add(ctx, u); err != nil {
					errs <- err
				}
			}
		})
	}
	wg.Go(func() {
		if err := s.Add(ctx, facts.Update{RoomID: "RM_a", JobID: facts.RoomKeyJob, Observations: []facts.Observation{
			{Field: facts.FieldRoomName, Value: "support-room", Source: "webhook"}}}); err != nil {
			errs <- err
		}
	})
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}

	f, rev, err := s.Get(ctx, facts.Key("RM_a", "AJ_b"))
	if err != nil {
		t.Fatal(err)
	}
	tags := 0
	for _, o := range f.Observations {
		if o.Field == "tag" {
			tags++
		}
	}
	if tags != writers*each {
		t.Errorf("%d of %d observations kept", tags, writers*each)
	}
	room, _, err := s.Get(ctx, facts.RoomKey("RM_a"))
	if err != nil {
		t.Fatal(err)
	}
	if len(room.Sessions) != 1 || room.Sessions[0] != facts.Key("RM_a", "AJ_b") {
		t.Errorf("room lists %v", room.Sessions)
	}
	if !f.RoomJoined {
		t.Error("the session did not join its room")
	}

	again := facts.Update{RoomID: "RM_a", JobID: "AJ_b", Observations: []facts.Observation{{Field: "tag", Value: "w00-0", Source: "otlp_log"}}}
	if err := s.Add(ctx, again); err != nil {
		t.Fatal(err)
	}
	if _, rev2, err := s.Get(ctx, facts.Key("RM_a", "AJ_b")); err != nil || rev2 != rev {
		t.Errorf("an update adding nothing wrote: revision %d → %d (%v)", rev, rev2, err)
	}
}
