package testenv

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"fmt"
	"io"
	"mime/multipart"
	"net/textproto"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
	"github.com/livekit/protocol/livekit"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/lkscore/lkscore/recording"
)

// The agents SDKs' requests, as their sources build them: the recording
// upload's token and multipart body (docs/formats.md, "Recording upload"),
// the recording header, and LiveKit's webhook signature.

// The API key and secret the tests' daemons know.
const (
	Key    = "APItestkey"
	Secret = "testsecret-0123456789abcdef-0123456789"
)

// Bearer is an Authorization header value.
func Bearer(tok string) string { return "Bearer " + strings.TrimSpace(tok) }

// PythonToken mints the JWT the Python SDK sends (docs/formats.md, "Recording upload"): HS256,
// {"observability":{"write":true},"sub":"","iss":key,"nbf":now,"exp":now+6h}.
func PythonToken(t testing.TB, key, secret string, grant bool) string {
	t.Helper()
	now := time.Now()
	claims := jwt.MapClaims{"sub": "", "iss": key, "nbf": now.Unix(), "exp": now.Add(6 * time.Hour).Unix()}
	if grant {
		claims["observability"] = map[string]any{"write": true}
	}
	tok, err := jwt.NewWithClaims(jwt.SigningMethodHS256, claims).SignedString([]byte(secret))
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

// UploadPart is one part of a recording upload.
type UploadPart struct {
	Name, Filename, ContentType string
	Body                        []byte
}

// PythonUpload builds the multipart body as aiohttp's MultipartWriter("form-data")
// does in the SDK: parts in order, each with Content-Type and Content-Length.
func PythonUpload(t testing.TB, parts []UploadPart) (body []byte, contentType string) {
	t.Helper()
	var buf bytes.Buffer
	mw := multipart.NewWriter(&buf)
	for _, p := range parts {
		h := textproto.MIMEHeader{}
		h.Set("Content-Type", p.ContentType)
		h.Set("Content-Disposition", fmt.Sprintf(`form-data; name="%s"; filename="%s"`, p.Name, p.Filename))
		h.Set("Content-Length", strconv.Itoa(len(p.Body)))
		w, err := mw.CreatePart(h)
		if err != nil {
			t.Fatal(err)
		}
		_, _ = w.Write(p.Body)
	}
	_ = mw.Close()
	return buf.Bytes(), mw.FormDataContentType()
}

// Header is a recording header whose summary names CR_PARTICIPANT_DISCONNECTED.
func Header(t testing.TB, roomID, jobID string) []byte {
	return HeaderWithSummary(t, roomID, jobID, `{"close_reason":"CR_PARTICIPANT_DISCONNECTED"}`)
}

// HeaderWithSummary is a recording header with the given session_summary.
func HeaderWithSummary(t testing.TB, roomID, jobID, summary string) []byte {
	t.Helper()
	b, err := proto.Marshal(&livekit.MetricsRecordingHeader{
		RoomId: roomID, JobId: jobID, StartTime: timestamppb.New(time.Unix(1764417600, 0)),
		SessionSummary: summary,
	})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// FullParts are an upload's three parts, in the SDK's order.
func FullParts(header, chat, audio []byte) []UploadPart {
	return []UploadPart{
		{"header", "header.binpb", "application/protobuf", header},
		{"chat_history", "chat_history.json", "application/json", chat},
		{"audio", "recording.ogg", "audio/ogg", audio},
	}
}

// SignWebhook signs body exactly as livekit/protocol's notifier does.
func SignWebhook(t testing.TB, key, secret string, body []byte, exp time.Duration) string {
	t.Helper()
	sum := sha256.Sum256(body)
	now := time.Now()
	claims := jwt.MapClaims{
		"iss": key, "iat": now.Unix(), "nbf": now.Unix(), "exp": now.Add(exp).Unix(),
		"sha256": base64.StdEncoding.EncodeToString(sum[:]),
	}
	tok, err := jwt.NewWithClaims(jwt.SigningMethodHS256, claims).SignedString([]byte(secret))
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

// ScenarioDir is the acceptance scenarios' data directory.
func ScenarioDir() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "..", "scenarios", "data")
}

// PutSession writes a scenario's upload (its header and chat history) into
// a store directory, as the collector would; begin is the store's Begin.
func PutSession[U interface {
	Write(ctx context.Context, name string, r io.Reader, limit int64) (int64, error)
	Commit(ctx context.Context) error
}](t testing.TB, begin func(ctx context.Context, dir string) (U, error), scenario, dir string) {
	t.Helper()
	ctx := context.Background()
	up, err := begin(ctx, dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{recording.ObjectChatHistory, recording.ObjectHeader} {
		b, err := os.ReadFile(filepath.Join(ScenarioDir(), scenario, name))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := up.Write(ctx, name, bytes.NewReader(b), 1<<20); err != nil {
			t.Fatal(err)
		}
	}
	if err := up.Commit(ctx); err != nil {
		t.Fatal(err)
	}
}
