package consumer

import (
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/lkscore/lkscore/config"
	"github.com/lkscore/lkscore/recording"
)

const (
	s3AccessKey = "AKLKSCORETEST"
	s3SecretKey = "lkscore-test-secret-key-0123456789"
)

// s3Server is a real versitygw S3 gateway on loopback (TESTING.md).
type s3Server struct {
	endpoint string
	cmd      *exec.Cmd
	port     int
}

// versitygwPath finds the binary; CI installs it (LKSCORE_REQUIRE_S3=1
// turns its absence into a failure instead of a skip).
func versitygwPath(t testing.TB) string {
	t.Helper()
	if p, err := exec.LookPath("versitygw"); err == nil {
		return p
	}
	gopath, _ := exec.Command("go", "env", "GOPATH").Output()
	p := filepath.Join(strings.TrimSpace(string(gopath)), "bin", "versitygw")
	if _, err := os.Stat(p); err == nil {
		return p
	}
	msg := "versitygw not found: install it with `go install github.com/versity/versitygw/cmd/versitygw@v1.8.0`"
	if os.Getenv("LKSCORE_REQUIRE_S3") != "" || os.Getenv("CI") != "" {
		t.Fatal(msg)
	}
	t.Skip("SKIPPING S3 TESTS: " + msg)
	return ""
}

func startS3(t testing.TB) *s3Server {
	t.Helper()
	bin := versitygwPath(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	_ = ln.Close()
	s := &s3Server{endpoint: fmt.Sprintf("http://127.0.0.1:%d", port), port: port}
	dir := t.TempDir()
	s.cmd = exec.Command(bin, "--access", s3AccessKey, "--secret", s3SecretKey, "--port", fmt.Sprintf("127.0.0.1:%d", port), "posix", dir)
	s.cmd.Stdout, s.cmd.Stderr = io.Discard, io.Discard
	if err := s.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.stop)
	waitFor(t, "versitygw to listen", func() bool {
		c, err := net.Dial("tcp", fmt.Sprintf("127.0.0.1:%d", port))
		if err == nil {
			_ = c.Close()
		}
		return err == nil
	})
	return s
}

func (s *s3Server) stop() {
	if s.cmd != nil && s.cmd.Process != nil {
		_ = s.cmd.Process.Kill()
		_ = s.cmd.Wait()
		s.cmd = nil
	}
}

// s3Env sets the standard AWS variables the default credential chain reads.
func s3Env(t *testing.T, secret string) {
	t.Setenv("AWS_ACCESS_KEY_ID", s3AccessKey)
	t.Setenv("AWS_SECRET_ACCESS_KEY", secret)
	t.Setenv("AWS_EC2_METADATA_DISABLED", "true")
	t.Setenv("AWS_CONFIG_FILE", filepath.Join(t.TempDir(), "none"))
	t.Setenv("AWS_SHARED_CREDENTIALS_FILE", filepath.Join(t.TempDir(), "none"))
}

func (s *s3Server) config(bucket string) config.S3 {
	c := config.Default().S3
	c.Bucket, c.Endpoint, c.ForcePathStyle, c.Region = bucket, s.endpoint, true, "us-east-1"
	c.RequestTimeout, c.MaxAttempts = 5*time.Second, 2
	return c
}

func newTestS3Store(t *testing.T, srv *s3Server, bucket string) *S3Store {
	t.Helper()
	st, err := NewS3Store(context.Background(), srv.config(bucket))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.client.CreateBucket(context.Background(), &s3.CreateBucketInput{Bucket: aws.String(bucket)}); err != nil {
		t.Fatalf("create bucket: %v", err)
	}
	return st
}

func randomBytes(t testing.TB, n int) []byte {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return b
}

func TestS3StoreRoundTrip(t *testing.T) {
	srv := startS3(t)
	s3Env(t, s3SecretKey)
	st := newTestS3Store(t, srv, "recordings")
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
	if keys, _ := st.List(ctx, "RM_s3/"); strings.Contains(strings.Join(keys, ","), recording.ObjectHeader) {
		t.Fatal("header visible before Commit")
	}
	if err := up.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	keys, err := st.List(ctx, "RM_s3/")
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
}

func TestS3StoreErrors(t *testing.T) {
	srv := startS3(t)
	s3Env(t, s3SecretKey)
	st := newTestS3Store(t, srv, "recordings")
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
		s3Env(t, "wrong-secret")
		bad, err := NewS3Store(ctx, srv.config("recordings"))
		if err != nil {
			t.Fatal(err)
		}
		_, err = bad.Open(ctx, "RM_e/AJ_e/"+recording.ObjectChatHistory, 1<<20)
		if !errors.Is(err, ErrPermanent) || errors.Is(err, recording.ErrNotFound) {
			t.Fatalf("err = %v", err)
		}
	})
	t.Run("server down is transient", func(t *testing.T) {
		srv.stop()
		_, err := st.Open(ctx, "RM_e/AJ_e/"+recording.ObjectChatHistory, 1<<20)
		if err == nil || errors.Is(err, ErrPermanent) || errors.Is(err, recording.ErrNotFound) {
			t.Fatalf("err = %v, want a transient error", err)
		}
	})
}

// TestCollectorToS3: the collector writes uploads through the S3 store.
func TestCollectorToS3(t *testing.T) {
	srv := startS3(t)
	s3Env(t, s3SecretKey)
	st := newTestS3Store(t, srv, "lk-recordings")
	ns := startNATS(t)
	cfg := testConfig(t, ns.url())
	cfg.S3 = srv.config("lk-recordings")
	cfg.S3.Prefix = "agents"
	d, _ := startDaemon(t, cfg)
	header := testHeader(t, "RM_c", "AJ_c")
	chat := mustReadFile(t, "../recording/testdata/chat_js.json")
	body, ct := pythonUpload(t, fullParts(header, chat, []byte("OggS"))[:3])
	resp, msg := post(t, "http://"+d.IngestAddr()+"/observability/recordings/v0", bearer(pythonToken(t, testKey, testSecret, true)), ct, bytes.NewReader(body))
	if resp.StatusCode != 200 {
		t.Fatalf("status %d: %s", resp.StatusCode, msg)
	}
	s, err := recording.Load(context.Background(), st, "agents/RM_c/AJ_c/", recording.DefaultLimits())
	if err != nil || s.Chat == nil || s.Chat.TimestampUnit != "ms" {
		t.Fatalf("load from S3: %v %+v", err, s)
	}
	n := streamMsgs(t, ns.url(), "LKSCORE_UPLOADS")
	if len(n) != 1 || !strings.Contains(string(n[0].Data), `"location":"s3://lk-recordings/agents/RM_c/AJ_c/"`) {
		t.Fatalf("notice: %d %s", len(n), n[0].Data)
	}
}

func mustReadFile(t testing.TB, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
