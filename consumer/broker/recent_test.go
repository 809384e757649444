package broker

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/lkscore/lkscore/internal/testenv"
)

type tags struct {
	Tags []string `json:"tags"`
}

// addTag is a merge: it writes only when the tag is new.
func addTag(tag string) func(*tags) bool {
	return func(v *tags) bool {
		if slices.Contains(v.Tags, tag) {
			return false
		}
		v.Tags = append(v.Tags, tag)
		return true
	}
}

// TestRecentLosesNoWrite runs two "processes" (each a KV with its own
// Recent) on one bucket, and a plain client deleting under them: every
// remembered entry that went stale, every guess that an entry is absent
// when it is not, and a delete after a write must still end in the merge
// of every change, never in a lost one.
func TestRecentLosesNoWrite(t *testing.T) {
	t.Parallel()
	ns := testenv.StartNATS(t)
	js := testenv.JetStream(t, ns.URL())
	ctx := context.Background()
	bucket, err := js.CreateKeyValue(ctx, jetstream.KeyValueConfig{Bucket: "RECENT", History: 1})
	if err != nil {
		t.Fatal(err)
	}
	a := KV[tags]{Bucket: bucket, Timeout: 5 * time.Second, Recent: NewRecent(16, time.Minute)}
	b := KV[tags]{Bucket: bucket, Timeout: 5 * time.Second, Recent: NewRecent(16, time.Minute)}
	modify := func(kv KV[tags], key, tag string) {
		t.Helper()
		if _, _, err := kv.Modify(ctx, key, nil, addTag(tag)); err != nil {
			t.Fatalf("add %s to %s: %v", tag, key, err)
		}
	}
	want := func(key string, wantTags ...string) {
		t.Helper()
		v, _, err := KV[tags]{Bucket: bucket, Timeout: 5 * time.Second}.Get(ctx, key)
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(v.Tags, wantTags) {
			t.Fatalf("%s holds %v, want %v", key, v.Tags, wantTags)
		}
	}

	modify(a, "k", "a1") // a guesses absent: created
	modify(b, "k", "b1") // b guesses absent, is wrong: the conflict reads
	want("k", "a1", "b1")
	modify(a, "k", "a2") // a's remembered revision is stale: the conflict reads
	want("k", "a1", "b1", "a2")
	modify(a, "k", "a3") // a's own last write: no read needed
	want("k", "a1", "b1", "a2", "a3")

	// A change that writes nothing on an empty entry is decided on the real
	// one: b has nothing remembered of k2, which holds x.
	modify(a, "k2", "x")
	if _, wrote, err := b.Modify(ctx, "k2", nil, func(v *tags) bool { return len(v.Tags) > 0 && addTag("y")(v) }); err != nil || !wrote {
		t.Fatalf("b's change to an entry it had not seen: wrote %v, %v", wrote, err)
	}
	want("k2", "x", "y")

	// Deleted after a's write: a's remembered revision conflicts with the
	// delete marker, and the entry is created again.
	modify(a, "k3", "first")
	if err := bucket.Delete(ctx, "k3"); err != nil {
		t.Fatal(err)
	}
	modify(a, "k3", "second")
	want("k3", "second")

	// The caller's entry is older than the one remembered: Modify starts
	// from the newer one instead of losing the compare-and-set.
	e, _, err := a.Modify(ctx, "k4", nil, addTag("one"))
	if err != nil {
		t.Fatal(err)
	}
	modify(a, "k4", "two")
	if _, _, err := a.Modify(ctx, "k4", &e, addTag("three")); err != nil {
		t.Fatal(err)
	}
	want("k4", "one", "two", "three")
}

// TestRecentBounds checks the ring: the oldest key is evicted when a new one
// comes, a newer revision replaces an entry and an older one does not, and
// an entry older than its time is not returned.
func TestRecentBounds(t *testing.T) {
	r := NewRecent(2, time.Minute)
	now := time.Unix(1000, 0)
	r.now = func() time.Time { return now }
	r.Remember("a", 1, []byte("a1"))
	r.Remember("b", 1, []byte("b1"))
	r.Remember("a", 3, []byte("a3"))
	r.Remember("a", 2, []byte("a2")) // older: ignored
	if d, rev, ok := r.get("a"); !ok || rev != 3 || string(d) != "a3" {
		t.Fatalf("a = %q rev %d ok %v, want a3 rev 3", d, rev, ok)
	}
	r.Remember("c", 1, []byte("c1")) // evicts a, the oldest key
	if r.Has("a") || !r.Has("b") || !r.Has("c") {
		t.Fatalf("after a third key: a %v b %v c %v, want a evicted", r.Has("a"), r.Has("b"), r.Has("c"))
	}
	now = now.Add(2 * time.Minute)
	if r.Has("b") {
		t.Fatal("an entry older than its time was returned")
	}
	var none *Recent
	none.Remember("x", 1, nil)
	if none.Has("x") {
		t.Fatal("a nil Recent remembered")
	}
}
