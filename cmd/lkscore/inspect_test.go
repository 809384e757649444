package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"mime/multipart"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/livekit/protocol/livekit"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/lkscore/lkscore/config"
	"github.com/lkscore/lkscore/internal/testenv"
	"github.com/lkscore/lkscore/recording"
	"github.com/lkscore/lkscore/store"
)

func headerBytes(t *testing.T, summary string) []byte {
	t.Helper()
	b, err := proto.Marshal(&livekit.MetricsRecordingHeader{RoomId: "RM_i", JobId: "AJ_i", StartTime: timestamppb.New(time.Unix(1764417600, 0)), SessionSummary: summary})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func multipartBody(t *testing.T, header, chat []byte) []byte {
	t.Helper()
	var buf bytes.Buffer
	mw := multipart.NewWriter(&buf)
	for _, p := range []struct {
		name, file string
		b          []byte
	}{{"header", "header.binpb", header}, {"chat_history", "chat_history.json", chat}, {"audio", "recording.ogg", []byte("OggS1234")}} {
		w, _ := mw.CreateFormFile(p.name, p.file)
		_, _ = w.Write(p.b)
	}
	_ = mw.Close()
	return buf.Bytes()
}

func runInspect(t *testing.T, env map[string]string, arg string) (int, map[string]any, string) {
	t.Helper()
	var stdout, stderr bytes.Buffer
	code := run(context.Background(), []string{"lkscore", "inspect", arg}, func(k string) string { return env[k] }, &stdout, &stderr)
	var out map[string]any
	if code == 0 {
		if err := json.Unmarshal(stdout.Bytes(), &out); err != nil {
			t.Fatalf("output is not JSON: %v\n%s", err, stdout.String())
		}
	}
	return code, out, stderr.String()
}

func checkInspected(t *testing.T, out map[string]any, wantReason string, wantItems float64) {
	t.Helper()
	chat, _ := out["chat"].(map[string]any)
	if out["session_key"] != "RM_i/AJ_i" || out["close_reason"] != wantReason || out["close_reason_source"] != "summary" || chat == nil || chat["items"] != wantItems {
		t.Fatalf("output %v", out)
	}
}

func TestInspectLocal(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "RM_i", "AJ_i")
	_ = os.MkdirAll(dir, 0o755)
	chat, _ := os.ReadFile("../../recording/testdata/chat_js_camel.json")
	testenv.WriteFile(t, filepath.Join(dir, recording.ObjectHeader), string(headerBytes(t, `{"close_reason":"task_completed"}`)))
	testenv.WriteFile(t, filepath.Join(dir, recording.ObjectChatHistory), string(chat))
	for _, arg := range []string{dir, filepath.Join(dir, recording.ObjectHeader)} {
		code, out, stderr := runInspect(t, nil, arg)
		if code != 0 {
			t.Fatalf("%s: exit %d: %s", arg, code, stderr)
		}
		checkInspected(t, out, "CR_COMPLETED", 7)
	}
	mp := filepath.Join(t.TempDir(), "upload.bin")
	testenv.WriteFile(t, mp, string(multipartBody(t, headerBytes(t, `{"close_reason":"CR_ERROR"}`), chat)))
	code, out, stderr := runInspect(t, nil, mp)
	if code != 0 {
		t.Fatalf("multipart: exit %d: %s", code, stderr)
	}
	checkInspected(t, out, "CR_ERROR", 7)
	if out["audio_bytes"] != float64(8) {
		t.Errorf("audio bytes %v", out["audio_bytes"])
	}
	if _, ok := out["no_transcript"]; ok {
		t.Error("no_transcript on an upload with a chat history")
	}
	// A session whose transcript metadata_only removed: inspect says why.
	_ = os.Remove(filepath.Join(dir, recording.ObjectChatHistory))
	code, out, stderr = runInspect(t, nil, dir)
	if why, _ := out["no_transcript"].(string); code != 0 || !strings.Contains(why, "metadata_only") {
		t.Errorf("header only: exit %d, no_transcript %q, %s", code, why, stderr)
	}
}

func TestInspectErrors(t *testing.T) {
	bad := filepath.Join(t.TempDir(), "header.binpb")
	testenv.WriteFile(t, bad, "\xff\xff\xff")
	for _, arg := range []string{"/does/not/exist", bad, t.TempDir()} {
		code, _, stderr := runInspect(t, nil, arg)
		if code == 0 || strings.Count(strings.TrimSpace(stderr), "\n") != 0 || !strings.Contains(stderr, "inspect ") {
			t.Errorf("%s: exit %d, stderr %q: want non-zero and one line", arg, code, stderr)
		}
	}
}

func TestInspectS3(t *testing.T) {
	srv := testenv.StartS3(t)
	testenv.SetAWSEnv(t, testenv.S3SecretKey)
	srv.CreateBucket(t, "rec")
	env := map[string]string{"LKSCORE_S3_ENDPOINT": srv.Endpoint, "LKSCORE_S3_FORCE_PATH_STYLE": "true", "LKSCORE_S3_REGION": "us-east-1"}
	s3cfg, _ := config.S3FromEnv(func(k string) string { return env[k] })
	s3cfg.Bucket = "rec"
	st, err := store.NewS3(context.Background(), s3cfg)
	if err != nil {
		t.Fatal(err)
	}
	chat, _ := os.ReadFile("../../recording/testdata/chat_python.json")
	ctx := context.Background()
	up, _ := st.Begin(ctx, "lk/RM_i/AJ_i/")
	_, _ = up.Write(ctx, recording.ObjectChatHistory, bytes.NewReader(chat), 1<<20)
	_, _ = up.Write(ctx, recording.ObjectHeader, bytes.NewReader(headerBytes(t, `{"close_reason":"CR_USER_INITIATED"}`)), 1<<20)
	if err := up.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	up2, _ := st.Begin(ctx, "raw/")
	_, _ = up2.Write(ctx, "upload.multipart", bytes.NewReader(multipartBody(t, headerBytes(t, `{"close_reason":3}`), chat)), 1<<20)
	_ = up2.Commit(ctx)

	for arg, want := range map[string]string{
		"s3://rec/lk/RM_i/AJ_i/":                                 "CR_USER_INITIATED",
		"s3://rec/lk/RM_i/AJ_i":                                  "CR_USER_INITIATED",
		"s3://rec/lk/RM_i/AJ_i/header.binpb":                     "CR_USER_INITIATED",
		"s3://rec/raw/upload.multipart":                          "CR_PARTICIPANT_DISCONNECTED",
		fmt.Sprintf("%s/rec/raw/upload.multipart", srv.Endpoint): "CR_PARTICIPANT_DISCONNECTED",
	} {
		code, out, stderr := runInspect(t, env, arg)
		if code != 0 {
			t.Fatalf("%s: exit %d: %s", arg, code, stderr)
		}
		checkInspected(t, out, want, 7)
	}
	if code, _, stderr := runInspect(t, env, "s3://rec/nope/"); code == 0 || !strings.Contains(stderr, "not found") {
		t.Errorf("missing session: exit %d, %q", code, stderr)
	}
}
