package retention

import (
	"context"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/lkscore/lkscore/consumer/internal/facts"
	"github.com/lkscore/lkscore/consumer/internal/metrics"
	"github.com/lkscore/lkscore/consumer/internal/stagetest"
	"github.com/lkscore/lkscore/internal/retrylog"
	"github.com/lkscore/lkscore/internal/testenv"
	"github.com/lkscore/lkscore/recording"
	"github.com/lkscore/lkscore/store"
)

// TestRetentionDeletesOldKeepsFresh: under a fake clock, an upload older
// than retention.recordings is deleted (logged, counted), a fresh one and
// an old one whose session is not scored yet are kept.
func TestRetentionDeletesOldKeepsFresh(t *testing.T) {
	t.Parallel()
	set := stagetest.Start(t)
	cfg, fs := set.Cfg, set.Facts(t)
	root := t.TempDir()
	st, err := store.NewLocal(root)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	ctx := context.Background()
	for _, s := range []struct {
		dir       string
		age       time.Duration
		published bool
	}{{"RM_Old/AJ_Old/", 40 * 24 * time.Hour, true}, {"RM_New/AJ_New/", time.Hour, true}, {"RM_Wait/AJ_Wait/", 40 * 24 * time.Hour, false}} {
		testenv.PutSession(t, st.Begin, "1_clean_call", s.dir)
		for _, name := range []string{recording.ObjectHeader, recording.ObjectChatHistory} {
			at := now.Add(-s.age)
			if err := os.Chtimes(filepath.Join(root, s.dir, name), at, at); err != nil {
				t.Fatal(err)
			}
		}
		room, job := filepath.Dir(filepath.Dir(s.dir)), filepath.Base(s.dir)
		u := facts.Update{RoomID: room, JobID: job, Recording: &facts.RecordingRef{SessionKey: room + "/" + job, Dir: s.dir}}
		if err := fs.Add(ctx, u); err != nil {
			t.Fatal(err)
		}
		if s.published {
			_ = fs.Modify(ctx, facts.Key(room, job), func(f *facts.SessionFacts) bool { f.PublishedAt = &now; return true })
		}
	}
	m := metrics.NewPipeline(nil)
	layout, _ := recording.NewLayout("", cfg.Recordings.KeyTemplate)
	r := &Recordings{store: st, facts: fs, layout: layout, keep: 30 * 24 * time.Hour, interval: time.Hour,
		deleted: m.RecordingsDeleted, log: slog.New(slog.NewTextHandler(io.Discard, nil)), now: func() time.Time { return now }}
	n, err := r.sweep(ctx)
	if err != nil || n != 1 {
		t.Fatalf("sweep deleted %d sessions, %v; want 1", n, err)
	}
	for dir, want := range map[string]bool{"RM_Old": false, "RM_New/AJ_New/header.binpb": true, "RM_Wait/AJ_Wait/chat_history.json": true} {
		if _, err := os.Stat(filepath.Join(root, dir)); (err == nil) != want {
			t.Errorf("%s exists: %v, want %v", dir, err == nil, want)
		}
	}
}

// TestRetentionSweepsWhenDue: a restart does not list the store at once
// (a sweep walks every stored session): the first sweep waits until one
// interval after the last one stored, at least a minute; with no stored
// sweep it stores one and waits an interval; a sweep stores its time.
func TestRetentionSweepsWhenDue(t *testing.T) {
	t.Parallel()
	set := stagetest.Start(t)
	fs := set.Facts(t)
	st, err := store.NewLocal(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	ctx := context.Background()
	m := metrics.NewPipeline(nil)
	layout, _ := recording.NewLayout("", set.Cfg.Recordings.KeyTemplate)
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	r := &Recordings{store: st, facts: fs, layout: layout, keep: 30 * 24 * time.Hour, interval: time.Hour,
		deleted: m.RecordingsDeleted, log: log, now: func() time.Time { return now }, retries: retrylog.New(log, time.Now, 0)}
	stored := func() int64 {
		t.Helper()
		e, err := fs.Bucket().Get(ctx, SweptKey)
		if err != nil {
			t.Fatalf("last sweep's time: %v", err)
		}
		v, err := strconv.ParseInt(string(e.Value()), 10, 64)
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	if w := r.firstWait(ctx); w != time.Hour {
		t.Errorf("first start: waits %s, want the interval", w)
	}
	if got := stored(); got != now.Unix() {
		t.Errorf("first start stored %d, want now (%d)", got, now.Unix())
	}
	for last, want := range map[time.Duration]time.Duration{10 * time.Minute: 50 * time.Minute, 2 * time.Hour: time.Minute,
		59*time.Minute + 30*time.Second: time.Minute} {
		if _, err := fs.Bucket().Put(ctx, SweptKey, strconv.AppendInt(nil, now.Add(-last).Unix(), 10)); err != nil {
			t.Fatal(err)
		}
		if w := r.firstWait(ctx); w != want {
			t.Errorf("last sweep %s ago: waits %s, want %s", last, w, want)
		}
	}
	// A short interval: Run sweeps after it and stores the sweep's time.
	r.interval = 20 * time.Millisecond
	now = now.Add(time.Hour)
	rctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { r.Run(rctx); close(done) }()
	deadline := time.Now().Add(10 * time.Second)
	for stored() != now.Unix() && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	cancel()
	<-done
	if got := stored(); got != now.Unix() {
		t.Errorf("after a sweep the stored time is %d, want %d", got, now.Unix())
	}
	// A start while NATS is down: no sweep at once (nor a failing one),
	// the first one an interval later.
	r.interval = time.Hour
	set.NATS.Stop()
	dctx, dcancel := context.WithTimeout(ctx, 300*time.Millisecond)
	defer dcancel()
	if w := r.firstWait(dctx); w != time.Hour {
		t.Errorf("with NATS down the first sweep waits %s, want the interval", w)
	}
}
