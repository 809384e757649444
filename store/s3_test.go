package store

import (
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"io"
	"os"
	"runtime"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/livekit/protocol/livekit"
	"google.golang.org/protobuf/proto"

	"github.com/lkscore/lkscore/internal/testenv"
	"github.com/lkscore/lkscore/recording"
)

func randomBytes(t testing.TB, n int) []byte {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return b
}

func mustReadFile(t testing.TB, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func testHeader(t testing.TB, roomID, jobID string) []byte {
	t.Helper()
	b, err := proto.Marshal(&livekit.MetricsRecordingHeader{RoomId: roomID, JobId: jobID,
		SessionSummary: `{"close_reason":"CR_PARTICIPANT_DISCONNECTED"}`})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// keys returns the sorted keys of objs.
func keys(objs []ObjectInfo) []string {
	out := make([]string, len(objs))
	for i, o := range objs {
		out[i] = o.Key
	}
	sort.Strings(out)
	return out
}

func TestS3StoreRoundTrip(t *testing.T) {
	srv := testenv.StartS3(t)
	testenv.SetAWSEnv(t, testenv.S3SecretKey)
	st := testenv.OpenBucket(t, srv, "recordings", NewS3)
	ctx := context.Background()

	chat := mustReadFile(t, "../recording/testdata/chat_python.json")
	audio := randomBytes(t, 20<<20) // > one 8 MiB part: a real multipart upload
	header := testHeader(t, "RM_s3", "AJ_s3")
	up, err := st.Begin(ctx, "RM_s3/AJ_s3/")
	if err != nil {
		t.Fatal(err)
	}
	for name, b := range map[string][]byte{recording.ObjectChatHistory: chat, recording.ObjectAudio: audio, recording.ObjectHeader: header} {
		if n, err := up.Write(ctx, name, bytes.NewReader(b), 64<<20); err != nil || n != int64(len(b)) {
			t.Fatalf("write %s: %d %v", name, n, err)
		}
	}
	if objs, _ := st.List(ctx, "RM_s3/"); strings.Contains(strings.Join(keys(objs), ","), recording.ObjectHeader) {
		t.Fatal("header visible before Commit")
	}
	if err := up.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	objs, err := st.List(ctx, "RM_s3/")
	keys := keys(objs)
	if err != nil || strings.Join(keys, ",") != "RM_s3/AJ_s3/chat_history.json,RM_s3/AJ_s3/header.binpb,RM_s3/AJ_s3/recording.ogg" {
		t.Fatalf("list: %v %v", keys, err)
	}
	rc, err := st.Open(ctx, "RM_s3/AJ_s3/"+recording.ObjectAudio, 64<<20)
	if err != nil {
		t.Fatal(err)
	}
	got, err := io.ReadAll(rc)
	_ = rc.Close()
	if err != nil || !bytes.Equal(got, audio) {
		t.Fatalf("audio round trip: %d bytes, %v", len(got), err)
	}
	s, err := recording.Load(ctx, st, "RM_s3/AJ_s3/", recording.DefaultLimits())
	if err != nil || s.Key != "RM_s3/AJ_s3" || s.Chat == nil || len(s.Chat.Items) != 7 || s.CloseReason != "CR_PARTICIPANT_DISCONNECTED" {
		t.Fatalf("load: %v %+v", err, s)
	}
	// A new bucket keeps no versions of what is deleted (lkscore forget says when one does).
	if status, err := st.Versioning(ctx); err != nil || status != "" {
		t.Errorf("a new bucket's versioning: %q %v", status, err)
	}
}

func TestS3StoreErrors(t *testing.T) {
	srv := testenv.StartS3(t)
	testenv.SetAWSEnv(t, testenv.S3SecretKey)
	st := testenv.OpenBucket(t, srv, "recordings", NewS3)
	ctx := context.Background()
	up, _ := st.Begin(ctx, "RM_e/AJ_e/")
	_, _ = up.Write(ctx, recording.ObjectChatHistory, strings.NewReader(strings.Repeat("x", 4096)), 1<<20)
	_ = up.Commit(ctx)

	t.Run("missing object is not found", func(t *testing.T) {
		_, err := st.Open(ctx, "RM_e/nope/header.binpb", 1<<20)
		if !errors.Is(err, recording.ErrNotFound) || errors.Is(err, ErrPermanent) {
			t.Fatalf("err = %v", err)
		}
	})
	t.Run("over the limit before reading", func(t *testing.T) {
		_, err := st.Open(ctx, "RM_e/AJ_e/"+recording.ObjectChatHistory, 1024)
		if !errors.Is(err, recording.ErrLimit) {
			t.Fatalf("err = %v", err)
		}
	})
	t.Run("write over the limit", func(t *testing.T) {
		up, _ := st.Begin(ctx, "RM_e/AJ_big/")
		_, err := up.Write(ctx, recording.ObjectAudio, bytes.NewReader(randomBytes(t, 9<<20)), 1<<20)
		if !errors.Is(err, recording.ErrLimit) {
			t.Fatalf("err = %v", err)
		}
		_ = up.Abort(ctx)
		if keys, _ := st.List(ctx, "RM_e/AJ_big/"); len(keys) != 0 {
			t.Fatalf("left behind %v", keys)
		}
	})
	t.Run("abort deletes what was written", func(t *testing.T) {
		up, _ := st.Begin(ctx, "RM_e/AJ_abort/")
		if _, err := up.Write(ctx, recording.ObjectChatHistory, strings.NewReader("{}"), 1024); err != nil {
			t.Fatal(err)
		}
		if err := up.Abort(ctx); err != nil {
			t.Fatal(err)
		}
		if keys, _ := st.List(ctx, "RM_e/AJ_abort/"); len(keys) != 0 {
			t.Fatalf("left behind %v", keys)
		}
	})
	t.Run("wrong credentials are permanent", func(t *testing.T) {
		testenv.SetAWSEnv(t, "wrong-secret")
		bad, err := NewS3(ctx, srv.Config("recordings"))
		if err != nil {
			t.Fatal(err)
		}
		_, err = bad.Open(ctx, "RM_e/AJ_e/"+recording.ObjectChatHistory, 1<<20)
		if !errors.Is(err, ErrPermanent) || errors.Is(err, recording.ErrNotFound) {
			t.Fatalf("err = %v", err)
		}
	})
	t.Run("server down is transient", func(t *testing.T) {
		srv.Stop()
		_, err := st.Open(ctx, "RM_e/AJ_e/"+recording.ObjectChatHistory, 1<<20)
		if err == nil || errors.Is(err, ErrPermanent) || errors.Is(err, recording.ErrNotFound) || !errors.Is(err, ErrUnavailable) {
			t.Fatalf("err = %v, want ErrUnavailable", err)
		}
	})
}

// BenchmarkS3ReadAudio1GiB streams a 1 GiB object from the real S3 gateway
// through S3.Open and reports the largest heap growth seen while it
// streams (sampled every 5 ms): the audio must never be held in memory.
func BenchmarkS3ReadAudio1GiB(b *testing.B) {
	srv := testenv.StartS3(b)
	b.Setenv("AWS_ACCESS_KEY_ID", testenv.S3AccessKey)
	b.Setenv("AWS_SECRET_ACCESS_KEY", testenv.S3SecretKey)
	b.Setenv("AWS_EC2_METADATA_DISABLED", "true")
	srv.CreateBucket(b, "audio")
	st, err := NewS3(context.Background(), srv.Config("audio"))
	if err != nil {
		b.Fatal(err)
	}
	const size = 1 << 30
	ctx := context.Background()
	up, _ := st.Begin(ctx, "RM_big/AJ_big/")
	if _, err := up.Write(ctx, recording.ObjectAudio, io.LimitReader(zeroReader{}, size), size); err != nil {
		b.Fatal(err)
	}
	_ = up.Commit(ctx)
	b.SetBytes(size)
	b.ResetTimer()
	var worst float64
	for i := 0; i < b.N; i++ {
		runtime.GC()
		var before runtime.MemStats
		runtime.ReadMemStats(&before)
		done := make(chan struct{})
		peak := make(chan uint64)
		go func() {
			var m runtime.MemStats
			var max uint64
			for {
				runtime.ReadMemStats(&m)
				if m.HeapInuse > max {
					max = m.HeapInuse
				}
				select {
				case <-done:
					peak <- max
					return
				case <-time.After(5 * time.Millisecond):
				}
			}
		}()
		rc, err := st.Open(ctx, "RM_big/AJ_big/"+recording.ObjectAudio, size)
		if err != nil {
			b.Fatal(err)
		}
		n, err := io.Copy(io.Discard, rc)
		_ = rc.Close()
		close(done)
		p := <-peak
		if err != nil || n != size {
			b.Fatalf("read %d bytes: %v", n, err)
		}
		if g := float64(p) - float64(before.HeapInuse); g > worst {
			worst = g
		}
	}
	b.ReportMetric(worst/(1<<20), "heap-growth-MiB")
}

type zeroReader struct{}

func (zeroReader) Read(p []byte) (int, error) {
	clear(p)
	return len(p), nil
}
