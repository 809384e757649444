package consumer

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/genproto/googleapis/rpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/lkscore/lkscore/consumer/internal/work"
	"github.com/lkscore/lkscore/internal/testenv"
	"github.com/lkscore/lkscore/recording"
)

func TestCollectorPythonUpload(t *testing.T) {
	t.Parallel()
	ns := startNATS(t)
	cfg := testConfig(t, ns.URL())
	d, reg := startDaemon(t, cfg)
	header := testenv.Header(t, "RM_abc", "AJ_def")
	chat := []byte(`{"items": [{"id": "item_1", "type": "message", "role": "user", "content": ["hi"], "created_at": 1764417604.2}]}`)
	audio := bytes.Repeat([]byte("OggS\x00fake-opus"), 50_000)
	body, ct := testenv.PythonUpload(t, testenv.FullParts(header, chat, audio))

	// Twice: the SDK may retry; one notice, same bytes. A doubled slash is tolerated.
	for i, path := range []string{"/observability/recordings/v0", "//observability/recordings/v0"} {
		resp, msg := post(t, "http://"+d.IngestAddr()+path, testenv.Bearer(testenv.PythonToken(t, testenv.Key, testenv.Secret, true)), ct, bytes.NewReader(body))
		if resp.StatusCode != 200 {
			t.Fatalf("upload %d: status %d: %s", i, resp.StatusCode, msg)
		}
	}
	dir := filepath.Join(cfg.DataDir, "recordings", "RM_abc", "AJ_def")
	for name, want := range map[string][]byte{recording.ObjectHeader: header, recording.ObjectChatHistory: chat, recording.ObjectAudio: audio} {
		got, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil || !bytes.Equal(got, want) {
			t.Errorf("%s: stored %d bytes (err %v), want the %d bytes sent", name, len(got), err, len(want))
		}
	}
	msgs := streamMsgs(t, ns.URL(), "LKSCORE_UPLOADS")
	if len(msgs) != 1 {
		t.Fatalf("%d upload notices, want 1", len(msgs))
	}
	var n work.UploadNotice
	if err := json.Unmarshal(msgs[0].Data, &n); err != nil {
		t.Fatal(err)
	}
	if n.SessionKey != "RM_abc/AJ_def" || msgs[0].Header.Get(jetstream.MsgIDHeader) != n.SessionKey ||
		n.Objects[recording.ObjectAudio].Size != int64(len(audio)) || n.APIKey != testenv.Key {
		t.Fatalf("notice %+v", n)
	}
	if v := counter(t, reg, "lkscore_collector_bytes_stored_total", map[string]string{"part": "audio"}); v != 2*float64(len(audio)) {
		t.Errorf("audio bytes stored = %v", v)
	}
}

func TestCollectorHeaderOnlyAndLegacyHeader(t *testing.T) {
	t.Parallel()
	ns := startNATS(t)
	cfg := testConfig(t, ns.URL())
	d, _ := startDaemon(t, cfg)
	// An SDK before 1.6.6 sends no job_id: the key falls back to a header hash.
	header := testenv.Header(t, "RM_old", "")
	body, ct := testenv.PythonUpload(t, testenv.FullParts(header, nil, nil)[:1])
	resp, msg := post(t, "http://"+d.IngestAddr()+"/observability/recordings/v0", testenv.Bearer(testenv.PythonToken(t, testenv.Key, testenv.Secret, true)), ct, bytes.NewReader(body))
	if resp.StatusCode != 200 {
		t.Fatalf("status %d: %s", resp.StatusCode, msg)
	}
	key := recording.SessionKey("RM_old", "", header)
	if !strings.HasPrefix(key, "RM_old/h-") {
		t.Fatalf("fallback key %q", key)
	}
	entries, err := os.ReadDir(filepath.Join(cfg.DataDir, "recordings", filepath.FromSlash(key)))
	if err != nil || len(entries) != 1 || entries[0].Name() != recording.ObjectHeader {
		t.Fatalf("stored %v (err %v), want only the header", entries, err)
	}
}

func TestCollectorRefusals(t *testing.T) {
	t.Parallel()
	ns := startNATS(t)
	cfg := testConfig(t, ns.URL())
	cfg.Limits.ChatHistoryBytes = 1024
	d, _ := startDaemon(t, cfg)
	url := "http://" + d.IngestAddr() + "/observability/recordings/v0"
	good := testenv.PythonToken(t, testenv.Key, testenv.Secret, true)
	header := testenv.Header(t, "RM_ref", "AJ_ref")
	okBody, okCT := testenv.PythonUpload(t, testenv.FullParts(header, []byte(`{"items": []}`), nil)[:2])
	bigBody, bigCT := testenv.PythonUpload(t, testenv.FullParts(header, bytes.Repeat([]byte("x"), 2048), nil)[:2])
	badHdr, badHdrCT := testenv.PythonUpload(t, testenv.FullParts([]byte("\xff\xff\xff"), nil, nil)[:1])
	wrongOrder, wrongOrderCT := testenv.PythonUpload(t, []testenv.UploadPart{testenv.FullParts(nil, []byte("{}"), nil)[1], testenv.FullParts(header, nil, nil)[0]})

	tests := []struct {
		name, auth, ct string
		body           []byte
		status         int
	}{
		{"no token", "", okCT, okBody, 401},
		{"raw token without Bearer", good, okCT, okBody, 401},
		{"missing grant", testenv.Bearer(testenv.PythonToken(t, testenv.Key, testenv.Secret, false)), okCT, okBody, 401},
		{"wrong secret", testenv.Bearer(testenv.PythonToken(t, testenv.Key, "nope", true)), okCT, okBody, 401},
		{"unknown key", testenv.Bearer(testenv.PythonToken(t, "APIother", testenv.Secret, true)), okCT, okBody, 401},
		{"not multipart", testenv.Bearer(good), "application/json", []byte("{}"), 400},
		{"oversize chat history", testenv.Bearer(good), bigCT, bigBody, 413},
		{"header not a protobuf", testenv.Bearer(good), badHdrCT, badHdr, 400},
		{"header not first", testenv.Bearer(good), wrongOrderCT, wrongOrder, 400},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			resp, msg := post(t, url, tc.auth, tc.ct, bytes.NewReader(tc.body))
			if resp.StatusCode != tc.status {
				t.Fatalf("status %d, want %d: %s", resp.StatusCode, tc.status, msg)
			}
			// Answering "data recording is disabled" would switch the SDK off for good.
			if l := strings.ToLower(msg); strings.Contains(l, "disabled") {
				t.Fatalf("response mentions disabled: %q", msg)
			}
		})
	}
	assertNothingStored(t, cfg.DataDir)
	if msgs := streamMsgs(t, ns.URL(), "LKSCORE_UPLOADS"); len(msgs) != 0 {
		t.Fatalf("%d upload notices after refusals, want 0", len(msgs))
	}
}

// assertNothingStored checks no session and no staging leftovers exist.
func assertNothingStored(t *testing.T, dataDir string) {
	t.Helper()
	root := filepath.Join(dataDir, "recordings")
	entries, _ := os.ReadDir(root)
	for _, e := range entries {
		if e.Name() != ".staging" && e.Name() != ".lkscore-store-id" { // the store's identity marker (store.Local.Identity)
			t.Errorf("stored %s after a refused upload", e.Name())
		}
	}
	if st, _ := os.ReadDir(filepath.Join(root, ".staging")); len(st) != 0 {
		t.Errorf("%d staging leftovers", len(st))
	}
}

// TestCollectorClientDisconnects: a client that goes away mid-upload leaves nothing behind.
func TestCollectorClientDisconnects(t *testing.T) {
	t.Parallel()
	ns := startNATS(t)
	cfg := testConfig(t, ns.URL())
	d, reg := startDaemon(t, cfg)
	body, ct := testenv.PythonUpload(t, testenv.FullParts(testenv.Header(t, "RM_gone", "AJ_gone"), []byte(`{"items": []}`), bytes.Repeat([]byte("a"), 1<<20)))
	conn, err := net.Dial("tcp", d.IngestAddr())
	if err != nil {
		t.Fatal(err)
	}
	fmt.Fprintf(conn, "POST /observability/recordings/v0 HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer %s\r\nContent-Type: %s\r\nContent-Length: %d\r\n\r\n",
		testenv.PythonToken(t, testenv.Key, testenv.Secret, true), ct, len(body))
	_, _ = conn.Write(body[:len(body)/2])
	_ = conn.Close()
	testenv.WaitFor(t, settleWait, "the request to end", func() bool {
		return counter(t, reg, "lkscore_http_requests_total", map[string]string{"endpoint": "recordings"}) == 1
	})
	assertNothingStored(t, cfg.DataDir)
}

// TestCollectorNATSDown: a transient failure answers the google.rpc.Status
// with RetryInfo that makes the Python SDK retry; the retry then succeeds.
func TestCollectorNATSDown(t *testing.T) {
	t.Parallel()
	ns := startNATS(t)
	cfg := testConfig(t, ns.URL())
	d, _ := startDaemon(t, cfg)
	url := "http://" + d.IngestAddr() + "/observability/recordings/v0"
	body, ct := testenv.PythonUpload(t, testenv.FullParts(testenv.Header(t, "RM_t", "AJ_t"), []byte(`{"items": []}`), nil)[:2])
	ns.Stop()
	resp, msg := post(t, url, testenv.Bearer(testenv.PythonToken(t, testenv.Key, testenv.Secret, true)), ct, bytes.NewReader(body))
	if resp.StatusCode != http.StatusServiceUnavailable {
		t.Fatalf("status %d, want 503", resp.StatusCode)
	}
	var st status.Status
	if err := proto.Unmarshal([]byte(msg), &st); err != nil || len(st.Details) != 1 {
		t.Fatalf("body is not a google.rpc.Status with one detail: %v", err)
	}
	var ri errdetails.RetryInfo
	if err := st.Details[0].UnmarshalTo(&ri); err != nil || ri.RetryDelay.AsDuration() <= 0 {
		t.Fatalf("detail is not a RetryInfo with a delay: %v", err)
	}
	ns.Start()
	testenv.WaitFor(t, settleWait, "retry to succeed", func() bool {
		resp, _ := post(t, url, testenv.Bearer(testenv.PythonToken(t, testenv.Key, testenv.Secret, true)), ct, bytes.NewReader(body))
		return resp.StatusCode == 200
	})
	if msgs := streamMsgs(t, ns.URL(), "LKSCORE_UPLOADS"); len(msgs) != 1 {
		t.Fatalf("%d notices, want 1", len(msgs))
	}
}

// TestCollectorInflightBound: with http.max_inflight_uploads 1, an upload
// arriving while another is being stored waits (counted in
// lkscore_collector_uploads_waiting) and is stored once the first is done;
// one that waits longer than http.upload_wait gets the retryable 503 and
// stores nothing.
func TestCollectorInflightBound(t *testing.T) {
	ns := startNATS(t)
	cfg := testConfig(t, ns.URL())
	cfg.HTTP.MaxInflightUploads, cfg.HTTP.UploadWait = 1, time.Second
	d, reg := startDaemon(t, cfg)
	url := "http://" + d.IngestAddr() + "/observability/recordings/v0"
	tok := testenv.Bearer(testenv.PythonToken(t, testenv.Key, testenv.Secret, true))
	waiting := func() float64 { return gauge(t, reg, "lkscore_collector_uploads_waiting", nil) }

	// The first upload holds the only slot while its body trickles in.
	body1, ct1 := testenv.PythonUpload(t, testenv.FullParts(testenv.Header(t, "RM_slow", "AJ_slow"), []byte(`{"items": []}`), bytes.Repeat([]byte("a"), 4096)))
	pr, pw := io.Pipe()
	first := make(chan int, 1)
	go func() {
		req, _ := http.NewRequest(http.MethodPost, url, pr)
		req.Header.Set("Authorization", tok)
		req.Header.Set("Content-Type", ct1)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			first <- 0
			return
		}
		resp.Body.Close()
		first <- resp.StatusCode
	}()
	// Into the audio part: the chat history is staged, the upload is not done.
	cut := bytes.Index(body1, []byte(`name="audio"`)) + 1024
	_, _ = pw.Write(body1[:cut])
	testenv.WaitFor(t, settleWait, "the first upload to stage its objects", func() bool {
		staged, _ := os.ReadDir(filepath.Join(cfg.DataDir, "recordings", ".staging"))
		return len(staged) > 0
	})

	// A second upload waits past http.upload_wait: 503, nothing stored.
	body2, ct2 := testenv.PythonUpload(t, testenv.FullParts(testenv.Header(t, "RM_late", "AJ_late"), []byte(`{"items": []}`), nil))
	start := time.Now()
	if resp, msg := post(t, url, tok, ct2, bytes.NewReader(body2)); resp.StatusCode != http.StatusServiceUnavailable || time.Since(start) < cfg.HTTP.UploadWait {
		t.Fatalf("second upload: %d after %s: %s", resp.StatusCode, time.Since(start), msg)
	}
	if _, err := os.Stat(filepath.Join(cfg.DataDir, "recordings", "RM_late")); err == nil {
		t.Fatal("the refused upload was stored")
	}

	// A third waits, is counted, and is stored once the first finishes.
	third := make(chan int, 1)
	go func() {
		resp, _ := post(t, url, tok, ct2, bytes.NewReader(body2))
		third <- resp.StatusCode
	}()
	testenv.WaitFor(t, settleWait, "the third upload to wait", func() bool { return waiting() == 1 })
	_, _ = pw.Write(body1[cut:])
	_ = pw.Close()
	if code := <-first; code != 200 {
		t.Fatalf("first upload: %d", code)
	}
	if code := <-third; code != 200 {
		t.Fatalf("third upload: %d", code)
	}
	if w := waiting(); w != 0 {
		t.Fatalf("%v uploads still counted as waiting", w)
	}
	if _, err := os.Stat(filepath.Join(cfg.DataDir, "recordings", "RM_late", "AJ_late", recording.ObjectHeader)); err != nil {
		t.Fatalf("the third upload was not stored: %v", err)
	}
}
