package broker

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/lkscore/lkscore/consumer/internal/failure"
	"github.com/lkscore/lkscore/internal/testenv"
)

// TestGuardKeepsTheConnection: a publish and key-value operations with a
// 4,200-byte subject or key, which made a real server close the client's
// connection for good (issue 65), fail with a permanent SubjectError
// through the guard, and the connection stays up for the next publish.
func TestGuardKeepsTheConnection(t *testing.T) {
	t.Parallel()
	ns := testenv.StartNATS(t)
	nc, err := nats.Connect(ns.URL())
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	raw, _ := jetstream.New(nc)
	js := Guard(raw)
	ctx := context.Background()
	if _, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: "G", Subjects: []string{"g.>"}}); err != nil {
		t.Fatal(err)
	}
	kv, err := js.CreateKeyValue(ctx, jetstream.KeyValueConfig{Bucket: "GK"})
	if err != nil {
		t.Fatal(err)
	}
	long := strings.Repeat("x", 4200)
	check := func(what string, err error) {
		t.Helper()
		var se *SubjectError
		if !errors.As(err, &se) || failure.Classify(err).Kind != failure.KindPermanent {
			t.Errorf("%s with a 4,200-byte name: %v, want a permanent SubjectError", what, err)
		}
		if !nc.IsConnected() {
			t.Fatalf("%s with a 4,200-byte name disconnected the client", what)
		}
	}
	_, err = js.Publish(ctx, "g."+long, []byte("x"))
	check("Publish", err)
	_, err = js.PublishMsg(ctx, &nats.Msg{Subject: "g." + long, Data: []byte("x")})
	check("PublishMsg", err)
	_, err = kv.Put(ctx, long, []byte("x"))
	check("KV Put", err)
	_, err = kv.Get(ctx, long)
	check("KV Get", err)
	_, err = kv.Create(ctx, long, []byte("x"))
	check("KV Create", err)
	check("KV Delete", kv.Delete(ctx, long))
	if _, err := js.Publish(ctx, "g.fine", []byte("x")); err != nil {
		t.Errorf("a publish after the refused ones: %v", err)
	}
	if _, err := kv.Put(ctx, "fine", []byte("x")); err != nil {
		t.Errorf("a key-value put after the refused ones: %v", err)
	}
}
