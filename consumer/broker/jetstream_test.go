package broker

import (
	"context"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/lkscore/lkscore/internal/testenv"
)

// TestNakWithDelayHoldsAckPending records what JetStream does with a
// message Nak'd with a delay: it stays in the consumer's ack-pending count
// until the delay passes, so it counts against MaxAckPending. That is why
// max_ack_pending is a pool-wide budget far above any one worker's
// concurrency (docs/architecture.md, "Flow control"), and why a store
// outage pauses fetching instead of cycling messages through delayed naks.
func TestNakWithDelayHoldsAckPending(t *testing.T) {
	t.Parallel()
	ns := testenv.StartNATS(t)
	js := testenv.JetStream(t, ns.URL())
	ctx := context.Background()
	if _, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: "NAKTEST", Subjects: []string{"naktest.>"}}); err != nil {
		t.Fatal(err)
	}
	cons, err := js.CreateOrUpdateConsumer(ctx, "NAKTEST", jetstream.ConsumerConfig{Durable: "c", AckPolicy: jetstream.AckExplicitPolicy,
		AckWait: 30 * time.Second, MaxAckPending: 2})
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 3; i++ {
		if _, err := js.Publish(ctx, "naktest.x", []byte{byte(i)}); err != nil {
			t.Fatal(err)
		}
	}
	batch, err := cons.Fetch(2, jetstream.FetchMaxWait(2*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for m := range batch.Messages() {
		if err := m.NakWithDelay(time.Minute); err != nil {
			t.Fatal(err)
		}
		n++
	}
	if n != 2 {
		t.Fatalf("fetched %d, want 2", n)
	}
	time.Sleep(100 * time.Millisecond)
	info, _ := cons.Info(ctx)
	if info.NumAckPending != 2 {
		t.Fatalf("ack pending after delayed naks = %d, want 2", info.NumAckPending)
	}
	third, err := cons.Fetch(1, jetstream.FetchMaxWait(time.Second))
	if err != nil {
		t.Fatal(err)
	}
	for range third.Messages() {
		t.Fatal("a third message was delivered although two delayed naks fill MaxAckPending=2")
	}
}
