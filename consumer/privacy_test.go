package consumer

import (
	"context"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/livekit/protocol/livekit"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/lkscore/lkscore/config"
	"github.com/lkscore/lkscore/internal/testenv"
	"github.com/lkscore/lkscore/recording"
	"github.com/lkscore/lkscore/store"
)

// TestRetentionDeletesOldKeepsFresh: under a fake clock, an upload older
// than retention.recordings is deleted (logged, counted), a fresh one and
// an old one whose session is not scored yet are kept.
func TestRetentionDeletesOldKeepsFresh(t *testing.T) {
	ns := startNATS(t)
	nc, err := nats.Connect(ns.URL())
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, _ := jetstream.New(nc)
	cfg := config.Default()
	facts, err := openFacts(context.Background(), js, NewSubjects("lkscore.", "LKSCORE"), cfg.NATS)
	if err != nil {
		t.Fatal(err)
	}
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
		putSession(t, st, "1_clean_call", s.dir)
		for _, name := range []string{recording.ObjectHeader, recording.ObjectChatHistory} {
			at := now.Add(-s.age)
			if err := os.Chtimes(filepath.Join(root, s.dir, name), at, at); err != nil {
				t.Fatal(err)
			}
		}
		room, job := filepath.Dir(filepath.Dir(s.dir)), filepath.Base(s.dir)
		u := factUpdate{roomID: room, jobID: job, recording: &RecordingRef{SessionKey: room + "/" + job, Dir: s.dir}}
		if err := facts.add(ctx, u); err != nil {
			t.Fatal(err)
		}
		if s.published {
			_ = facts.modify(ctx, factsKey(room, job), func(f *SessionFacts) bool { f.PublishedAt = &now; return true })
		}
	}
	m := newPipelineMetrics(nil)
	layout, _ := recording.NewLayout("", cfg.Recordings.KeyTemplate)
	r := &retention{store: st, facts: facts, layout: layout, keep: 30 * 24 * time.Hour, interval: time.Hour,
		deleted: m.recordingsDeleted, log: slog.New(slog.NewTextHandler(io.Discard, nil)), now: func() time.Time { return now }}
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

// TestMetadataOnly: with privacy.mode metadata_only, a scored session's
// chat history and audio are gone from the store (local and S3), its header
// stays, and its facts say why.
func TestMetadataOnly(t *testing.T) {
	for _, kind := range []string{"local", "s3"} {
		t.Run(kind, func(t *testing.T) {
			ns := startNATS(t)
			cfg := pipelineConfig(t, ns.URL())
			cfg.Privacy.Mode = "metadata_only"
			var st interface {
				recording.ObjectReader
			}
			if kind == "s3" {
				srv := testenv.StartS3(t)
				s3Env(t, testenv.S3SecretKey)
				st = newTestS3Store(t, srv, "rec")
				cfg.S3 = s3Config(srv, "rec")
			}
			d, reg := startDaemon(t, cfg)
			if kind == "local" {
				st, _ = store.OpenLocalDir(filepath.Join(cfg.DataDir, "recordings"))
			}
			dir := t.TempDir()
			writeScenarioCopy(t, dir, "1_clean_call", "RM_Meta", "AJ_Meta", `{"close_reason":"CR_USER_INITIATED"}`)
			uploadDir(t, d, dir)
			sendWebhook(t, d, jobEnded("EV_meta", "RM_Meta", "AJ_Meta", "meta-agent", livekit.JobStatus_JS_SUCCESS))
			waitFor(t, "the scorecard", func() bool { return len(streamMsgs(t, ns.URL(), "LKSCORE_RESULTS")) == 1 })
			waitFor(t, "the content dropped", func() bool {
				f := readFacts(t, ns.URL(), "RM_Meta", "AJ_Meta")
				return f != nil && f.ContentDroppedAt != nil
			})
			ctx := context.Background()
			for name, want := range map[string]bool{recording.ObjectHeader: true, recording.ObjectChatHistory: false, recording.ObjectAudio: false} {
				rc, err := st.Open(ctx, "RM_Meta/AJ_Meta/"+name, 1<<30)
				if err == nil {
					_ = rc.Close()
				}
				if (err == nil) != want {
					t.Errorf("%s in the store: %v, want %v", name, err == nil, want)
				}
			}
			if v := counter(t, reg, "lkscore_recordings_deleted_total", map[string]string{"reason": "metadata_only"}); v != 1 {
				t.Errorf("deletions counted %v", v)
			}
		})
	}
}
