package store

import (
	"context"
	"errors"
	"io"
	"strings"
	"testing"

	"github.com/lkscore/lkscore/recording"
)

func TestLocalStore(t *testing.T) {
	ctx := context.Background()
	st, err := NewLocal(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	up, err := st.Begin(ctx, "RM_l/AJ_l/")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := up.Write(ctx, recording.ObjectChatHistory, strings.NewReader(`{"items":[]}`), 1024); err != nil {
		t.Fatal(err)
	}
	if _, err := up.Write(ctx, recording.ObjectHeader, strings.NewReader("\n\x04RM_l"), 1024); err != nil {
		t.Fatal(err)
	}
	if objs, _ := st.List(ctx, "RM_l/"); len(objs) != 0 {
		t.Fatalf("visible before Commit: %v", keys(objs))
	}
	if err := up.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	objs, err := st.List(ctx, "RM_l/")
	if err != nil || strings.Join(keys(objs), ",") != "RM_l/AJ_l/chat_history.json,RM_l/AJ_l/header.binpb" {
		t.Fatalf("list: %v %v", keys(objs), err)
	}
	rc, err := st.OpenBucket(ctx, "", "RM_l/AJ_l/"+recording.ObjectChatHistory, 1024)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(rc)
	_ = rc.Close()
	if string(b) != `{"items":[]}` {
		t.Fatalf("read %q", b)
	}
	for name, tc := range map[string]struct {
		bucket, key string
		max         int64
		want        error
	}{
		"missing":        {"", "RM_l/nope/header.binpb", 1024, ErrNotFound},
		"over the limit": {"", "RM_l/AJ_l/" + recording.ObjectChatHistory, 4, recording.ErrLimit},
		"another bucket": {"egress", "RM_l/AJ_l/" + recording.ObjectChatHistory, 1024, ErrPermanent},
		"escaping key":   {"", "../etc/passwd", 1024, nil},
	} {
		_, err := st.OpenBucket(ctx, tc.bucket, tc.key, tc.max)
		if err == nil || (tc.want != nil && !errors.Is(err, tc.want)) {
			t.Errorf("%s: err = %v, want %v", name, err, tc.want)
		}
	}
}

// TestLocalHostileKeys: keys no file system path can hold (a NUL byte, a
// segment over NAME_MAX) fail Open and List as ErrPermanent, so the work
// that asked is dead-lettered, not retried for minutes (issue 65).
func TestLocalHostileKeys(t *testing.T) {
	st, err := NewLocal(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	for _, key := range []string{"RM_nul\x00x/AJ_a/chat_history.json", strings.Repeat("r", 300) + "/AJ_a/chat_history.json"} {
		if _, err := st.Open(ctx, key, 1<<20); !errors.Is(err, ErrPermanent) {
			t.Errorf("Open(%.30q): %v, want ErrPermanent", key, err)
		}
		if _, err := st.List(ctx, key); !errors.Is(err, ErrPermanent) {
			t.Errorf("List(%.30q): %v, want ErrPermanent", key, err)
		}
	}
}
