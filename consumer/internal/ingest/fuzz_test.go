package ingest

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/livekit/protocol/auth"
	"github.com/livekit/protocol/livekit"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/lkscore/lkscore/config"
	"github.com/lkscore/lkscore/consumer/broker"
	"github.com/lkscore/lkscore/consumer/internal/metrics"
	"github.com/lkscore/lkscore/internal/testenv"
	"github.com/lkscore/lkscore/store"
	"github.com/lkscore/lkscore/wire"
)

// fuzzJS returns a JetStream context on a fresh embedded server with lkscore's streams.
func fuzzJS(t testing.TB) jetstream.JetStream {
	t.Helper()
	ns := testenv.StartNATS(t)
	nc, err := nats.Connect(ns.URL())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	js, _ := jetstream.New(nc)
	n := config.Default().NATS
	n.Storage = "memory"
	subj := wire.NewSubjects(n.SubjectPrefix, n.StreamPrefix)
	if err := broker.EnsureStreams(context.Background(), js, subj, withNATS(n), nil); err != nil {
		t.Fatal(err)
	}
	return js
}

func FuzzWebhookHandler(f *testing.F) {
	f.Add([]byte(`{"event":"room_finished","id":"EV_1","room":{"sid":"RM_1"}}`), true)
	f.Add([]byte(`{"event":"agent_job_ended","id":"EV_2","job":{"id":"AJ_1","room":{"sid":"RM_1"},"createdAt":"17"}}`), true)
	f.Add([]byte(`{"event":"participant_joined","id":"EV_3"}`), true)
	f.Add([]byte(`{"event":"","id":""}`), true)
	f.Add([]byte(`{"event":"room_finished","id":"EV_4","numDropped":"x"}`), true)
	f.Add([]byte(`null`), false)
	js := fuzzJS(f)
	cfg := config.Default()
	cfg.Webhook.MaxBodyBytes, cfg.NATS.PublishTimeout = 4096, 2*time.Second
	cfg.LiveKit.Keys = map[string]string{testenv.Key: testenv.Secret}
	o := Options{Config: cfg, JS: js, Metrics: metrics.NewIngest(nil), Log: slog.New(slog.NewTextHandler(io.Discard, nil))}
	h, err := newWebhookHandler(o, auth.NewSimpleKeyProvider(testenv.Key, testenv.Secret))
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, body []byte, sign bool) {
		req := httptest.NewRequest(http.MethodPost, "/webhook", bytes.NewReader(body))
		if sign {
			req.Header.Set("Authorization", testenv.SignWebhook(t, testenv.Key, testenv.Secret, body, time.Minute))
		}
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		oversize := len(body) > 4096
		switch rec.Code {
		case 200:
			var ev livekit.WebhookEvent
			if !sign || oversize || unmarshalEvent.Unmarshal(body, &ev) != nil || ev.Id == "" || ev.Event == "" {
				t.Fatalf("200 for an unsigned, oversize or invalid event %q", body)
			}
		case 413:
			if !oversize {
				t.Fatalf("413 for a %d-byte body", len(body))
			}
		case 400:
			if !sign || oversize {
				t.Fatalf("400 for an unsigned or oversize body: auth and size come first")
			}
		case 401:
			if sign && !oversize {
				t.Fatalf("401 for a correctly signed body %q", body)
			}
		default:
			t.Fatalf("unexpected status %d", rec.Code)
		}
	})
}

func FuzzCollectorMultipart(f *testing.F) {
	header := testenv.Header(f, "RM_fz", "AJ_fz")
	seed, _ := testenv.PythonUpload(f, testenv.FullParts(header, []byte(`{"items": []}`), []byte("OggS")))
	f.Add(seed)
	seed2, _ := testenv.PythonUpload(f, testenv.FullParts(header, nil, nil)[:1])
	f.Add(seed2)
	f.Add([]byte("--B\r\nContent-Disposition: form-data; name=\"header\"\r\n\r\n\n\x06RM_abc\r\n--B--\r\n"))
	f.Add([]byte("--B\r\n\r\n--B--"))
	js := fuzzJS(f)
	dir := f.TempDir()
	st, err := store.NewLocal(dir)
	if err != nil {
		f.Fatal(err)
	}
	cfg := config.Default()
	cfg.Limits.ChatHistoryBytes, cfg.Limits.AudioBytes = 4096, 4096
	cfg.NATS.PublishTimeout = 2 * time.Second
	o := Options{Config: cfg, JS: js, Store: st, Metrics: metrics.NewIngest(nil), Log: slog.New(slog.NewTextHandler(io.Discard, nil))}
	c, err := newCollector(o, auth.NewSimpleKeyProvider(testenv.Key, testenv.Secret), time.Now)
	if err != nil {
		f.Fatal(err)
	}
	tok := testenv.Bearer(testenv.PythonToken(f, testenv.Key, testenv.Secret, true))
	f.Fuzz(func(t *testing.T, body []byte) {
		// The seeds use multipart.Writer's random boundary; re-frame them on "B".
		if i := bytes.Index(body, []byte("\r\n")); i > 2 && bytes.HasPrefix(body, []byte("--")) {
			body = bytes.ReplaceAll(body, body[2:i], []byte("B"))
		}
		req := httptest.NewRequest(http.MethodPost, "/observability/recordings/v0", bytes.NewReader(body))
		req.Header.Set("Authorization", tok)
		req.Header.Set("Content-Type", "multipart/form-data; boundary=B")
		rec := httptest.NewRecorder()
		c.ServeHTTP(rec, req)
		switch rec.Code {
		case 200, 400, 413:
		default:
			t.Fatalf("unexpected status %d: %s", rec.Code, rec.Body)
		}
		if st, _ := os.ReadDir(filepath.Join(dir, ".staging")); len(st) != 0 {
			t.Fatalf("status %d left %d staging entries", rec.Code, len(st))
		}
	})
}

func withNATS(n config.NATS) config.Config {
	c := config.Default()
	c.NATS = n
	return c
}
