package ingest

import (
	"bytes"
	"context"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/livekit/protocol/auth"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	collogs "go.opentelemetry.io/proto/otlp/collector/logs/v1"
	coltrace "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"

	"github.com/lkscore/lkscore/config"
	"github.com/lkscore/lkscore/consumer/internal/metrics"
	"github.com/lkscore/lkscore/internal/testenv"
)

// decodedMessages counts the messages a decoded request holds, itself included.
func decodedMessages(m protoreflect.Message) int {
	n := 1
	m.Range(func(fd protoreflect.FieldDescriptor, v protoreflect.Value) bool {
		switch {
		case fd.IsMap():
			if fd.MapValue().Message() != nil {
				v.Map().Range(func(_ protoreflect.MapKey, mv protoreflect.Value) bool {
					n += decodedMessages(mv.Message())
					return true
				})
			}
		case fd.IsList():
			if fd.Message() != nil {
				for i := range v.List().Len() {
					n += decodedMessages(v.List().Get(i).Message())
				}
			}
		case fd.Message() != nil:
			n += decodedMessages(v.Message())
		}
		return true
	})
	return n
}

// TestCountElements: the count is refused past the limit with a typed error
// naming the limit and where it went over, before anything is decoded; a
// real SDK request counts exactly what it decodes into.
func TestCountElements(t *testing.T) {
	var req collogs.ExportLogsServiceRequest
	if err := otlpJSON.Unmarshal(testenv.JSLogs("RM_c", "AJ_c", "agent",
		map[string]any{"msg": "AgentSession closed", "reason": "user_initiated"}, map[string]any{"msg": "x"}), &req); err != nil {
		t.Fatal(err)
	}
	pb, _ := proto.Marshal(&req)
	want := decodedMessages(req.ProtoReflect())
	md := req.ProtoReflect().Descriptor()
	if err := countElements(pb, md, want); err != nil {
		t.Errorf("%d messages within a limit of %d: %v", want, want, err)
	}
	err := countElements(pb, md, want-1)
	var ee *ElementsError
	if !errors.As(err, &ee) || !errors.Is(err, ErrTooManyElements) || ee.Limit != want-1 {
		t.Errorf("%d messages over a limit of %d: %v", want, want-1, err)
	}
	bomb := bytes.Repeat([]byte{0x0a, 0x00}, 1<<20) // a million empty ResourceLogs
	if err := countElements(bomb, md, 100_000); !errors.As(err, &ee) || ee.Message != "opentelemetry.proto.logs.v1.ResourceLogs" {
		t.Errorf("empty ResourceLogs: %v", err)
	}
	if err := countJSONElements([]byte(`{"resourceLogs":[`+string(bytes.Repeat([]byte(`{},`), 10))+`{}]}`), md, 10); err == nil {
		t.Error("12 JSON objects within a limit of 10")
	}
	if err := countJSONElements([]byte(`{"a":"{{{{{{{{{{{{\"{{{{"}`), md, 2); err != nil {
		t.Errorf("braces in a string counted: %v", err)
	}
}

// FuzzOTLPElements: whatever the body, a request that decodes never holds
// more messages than the count let through.
func FuzzOTLPElements(f *testing.F) {
	var req collogs.ExportLogsServiceRequest
	_ = otlpJSON.Unmarshal(testenv.JSLogs("RM_f", "AJ_f", "agent", map[string]any{"msg": "AgentSession closed", "reason": "user_initiated"}), &req)
	pb, _ := proto.Marshal(&req)
	f.Add(pb, false, true)
	f.Add(testenv.JSLogs("RM_f", "AJ_f", "agent", map[string]any{"msg": "x"}), true, true)
	tr, _ := proto.Marshal(pySpanRequest("python", 0.5))
	f.Add(tr, false, false)
	f.Add([]byte{0x0a, 0x00, 0x0a, 0x02, 0x12, 0x00}, false, true)
	f.Fuzz(func(t *testing.T, body []byte, isJSON, logs bool) {
		var m proto.Message = &coltrace.ExportTraceServiceRequest{}
		if logs {
			m = &collogs.ExportLogsServiceRequest{}
		}
		const limit = 50
		count := countElements
		if isJSON {
			count = countJSONElements
		}
		if err := count(body, m.ProtoReflect().Descriptor(), limit); err != nil {
			return
		}
		if decodeOTLP(body, isJSON, m) != nil {
			return
		}
		if n := decodedMessages(m.ProtoReflect()); n > limit {
			t.Errorf("counted within %d, decoded into %d messages", limit, n)
		}
	})
}

// noPublish fails the test if anything is published.
type noPublish struct{ t *testing.T }

func (p noPublish) PublishMsg(context.Context, *nats.Msg, ...jetstream.PublishOpt) (*jetstream.PubAck, error) {
	p.t.Error("published")
	return nil, errors.New("no")
}

// TestWebhookElementsBounded: a signed webhook of empty objects (3 bytes of
// JSON each, a message each in memory) is refused with 413 before it is
// decoded; LiveKit's events hold tens of objects.
func TestWebhookElementsBounded(t *testing.T) {
	cfg := config.Default()
	cfg.LiveKit.Keys = map[string]string{testenv.Key: testenv.Secret}
	o := Options{Config: cfg, JS: noPublish{t}, Metrics: metrics.NewIngest(nil), Log: slog.New(slog.NewTextHandler(io.Discard, nil))}
	h, err := newWebhookHandler(o, auth.NewSimpleKeyProvider(testenv.Key, testenv.Secret))
	if err != nil {
		t.Fatal(err)
	}
	body := []byte(`{"event":"participant_left","id":"EV_b","participant":{"tracks":[` + strings.Repeat(`{},`, 20_000) + `{}]}}`)
	req := httptest.NewRequest(http.MethodPost, "/webhook", bytes.NewReader(body))
	req.Header.Set("Authorization", testenv.SignWebhook(t, testenv.Key, testenv.Secret, body, time.Minute))
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	if rec.Code != http.StatusRequestEntityTooLarge || !strings.Contains(rec.Body.String(), "too many elements") {
		t.Errorf("%d %s", rec.Code, rec.Body.String())
	}
}

// countingReader counts the bytes read from it.
type countingReader struct {
	r io.Reader
	n int64
}

func (c *countingReader) Read(b []byte) (int, error) {
	n, err := c.r.Read(b)
	c.n += int64(n)
	return n, err
}

// TestReadCountedStopsEarly: 16 MiB of empty ResourceLogs is refused after
// reading a little past the limit's worth of it, in protobuf and in JSON;
// a real request is read whole and unchanged.
func TestReadCountedStopsEarly(t *testing.T) {
	md := (&collogs.ExportLogsServiceRequest{}).ProtoReflect().Descriptor()
	for name, tc := range map[string]struct {
		body   []byte
		isJSON bool
	}{
		"protobuf": {bytes.Repeat([]byte{0x0a, 0x00}, 8<<20), false},
		"json":     {[]byte(`{"resourceLogs":[` + strings.Repeat(`{},`, 5<<20) + `{}]}`), true},
	} {
		cr := &countingReader{r: bytes.NewReader(tc.body)}
		var buf bytes.Buffer
		err := readCounted(cr, tc.isJSON, md, 100_000, 32<<20, &buf)
		var ee *ElementsError
		if !errors.As(err, &ee) || cr.n > 1<<20 {
			t.Errorf("%s: %v after reading %d of %d bytes", name, err, cr.n, len(tc.body))
		}
	}
	var req collogs.ExportLogsServiceRequest
	_ = otlpJSON.Unmarshal(testenv.JSLogs("RM_c", "AJ_c", "agent", map[string]any{"msg": "AgentSession closed", "reason": "user_initiated"}), &req)
	pb, _ := proto.Marshal(&req)
	var buf bytes.Buffer
	if err := readCounted(bytes.NewReader(pb), false, md, 100_000, 16<<20, &buf); err != nil || !bytes.Equal(buf.Bytes(), pb) {
		t.Errorf("a real request: %v, read %d of %d bytes unchanged: %v", err, buf.Len(), len(pb), bytes.Equal(buf.Bytes(), pb))
	}
	if err := readCounted(bytes.NewReader(pb), false, md, 100_000, int64(len(pb)-1), &bytes.Buffer{}); !errors.Is(err, errBodyTooLarge) {
		t.Errorf("a body over the byte limit: %v", err)
	}
}

// FuzzReadCounted: whatever the body, what readCounted lets through is the
// body unchanged, and what it refuses for its elements the whole count
// refuses too.
func FuzzReadCounted(f *testing.F) {
	var req collogs.ExportLogsServiceRequest
	_ = otlpJSON.Unmarshal(testenv.JSLogs("RM_f", "AJ_f", "agent", map[string]any{"msg": "x"}), &req)
	pb, _ := proto.Marshal(&req)
	f.Add(pb, false)
	f.Add(testenv.JSLogs("RM_f", "AJ_f", "agent", map[string]any{"msg": "x"}), true)
	f.Add([]byte{0x0a, 0x00, 0x0b, 0x0c, 0x0a, 0x00}, false)
	f.Add([]byte{0x0a, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01}, false)
	md := req.ProtoReflect().Descriptor()
	f.Fuzz(func(t *testing.T, body []byte, isJSON bool) {
		const limit, maxBody = 20, 1 << 16
		var buf bytes.Buffer
		err := readCounted(bytes.NewReader(body), isJSON, md, limit, maxBody, &buf)
		count := countElements
		if isJSON {
			count = countJSONElements
		}
		var ee *ElementsError
		switch {
		case err == nil:
			if !bytes.Equal(buf.Bytes(), body) {
				t.Fatalf("read %x, body %x", buf.Bytes(), body)
			}
		case errors.As(err, &ee):
			if count(body, md, limit) == nil {
				t.Fatalf("refused early (%v), the whole count lets it through", err)
			}
		case errors.Is(err, errBodyTooLarge):
			if len(body) <= maxBody {
				t.Fatalf("%d bytes refused as over %d", len(body), maxBody)
			}
		}
	})
}
