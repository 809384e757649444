package forward

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/lkscore/lkscore/config"
	"github.com/lkscore/lkscore/consumer/internal/failure"
	"github.com/lkscore/lkscore/store"
)

// notices records what the tee published, or fails every publish.
type notices struct {
	mu   sync.Mutex
	msgs []*nats.Msg
	fail bool
}

func (n *notices) PublishMsg(_ context.Context, m *nats.Msg, _ ...jetstream.PublishOpt) (*jetstream.PubAck, error) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.fail {
		return nil, errors.New("nats: timeout")
	}
	n.msgs = append(n.msgs, m)
	return &jetstream.PubAck{}, nil
}

func newTee(t *testing.T, st *store.Local, pub *notices) *Tee {
	t.Helper()
	cfg := config.Default()
	cfg.Forward.Targets = []config.ForwardTarget{{Name: "insights", URL: "http://127.0.0.1:1"}, {Name: "logs-only", URL: "http://127.0.0.1:2", Signals: []string{"logs"}}}
	return NewTee(cfg, st, pub, NewMetrics(nil), slog.New(slog.NewTextHandler(io.Discard, nil)))
}

// TestTeeCopiesWhatWasAccepted: a request the handler answers 2xx is copied
// for each target that relays its signal, body and token as sent, before the
// answer; a refused one is not; a copy that cannot be made leaves the SDK's
// answer the handler's own, counted.
func TestTeeCopiesWhatWasAccepted(t *testing.T) {
	st, err := store.NewLocal(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	pub := &notices{}
	tee := newTee(t, st, pub)
	handler := func(status int) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			b := make([]byte, 5) // reads part of the body only: the tee reads the rest
			_, _ = io.ReadFull(r.Body, b)
			NoteSessions(r.Context(), "RM_a/AJ_b")
			w.WriteHeader(status)
			_, _ = w.Write([]byte("answer"))
		})
	}
	body := []byte("multipart body, as the SDK sent it")
	post := func(h http.Handler, path string) *httptest.ResponseRecorder {
		req := httptest.NewRequest(http.MethodPost, path, bytes.NewReader(body))
		req.Header.Set("Authorization", "Bearer tok")
		req.Header.Set("Content-Type", "multipart/form-data; boundary=x")
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		return rec
	}
	if rec := post(tee.Wrap("upload", handler(200)), "/observability/recordings/v0"); rec.Code != 200 || rec.Body.String() != "answer" {
		t.Fatalf("answer %d %q", rec.Code, rec.Body.String())
	}
	if len(pub.msgs) != 1 { // logs-only does not relay uploads
		t.Fatalf("%d notices for one upload and one target that relays uploads", len(pub.msgs))
	}
	var req Request
	if err := json.Unmarshal(pub.msgs[0].Data, &req); err != nil {
		t.Fatal(err)
	}
	rc, err := st.Open(context.Background(), req.Dir+objectBody, 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	got, _ := io.ReadAll(rc)
	_ = rc.Close()
	if !bytes.Equal(got, body) || req.Header["Authorization"] != "Bearer tok" || req.Size != int64(len(body)) || req.Target != "insights" ||
		strings.Join(req.Sessions, ",") != "RM_a/AJ_b" || pub.msgs[0].Header.Get("Lk-Sessions") != "RM_a/AJ_b" {
		t.Errorf("copy %q, request %+v", got, req)
	}
	if rec := post(tee.Wrap("logs", handler(401)), "/observability/logs/otlp/v0"); rec.Code != 401 || len(pub.msgs) != 1 {
		t.Errorf("a refused request: answer %d, %d notices", rec.Code, len(pub.msgs))
	}
	post(tee.Wrap("logs", handler(200)), "/observability/logs/otlp/v0")
	if len(pub.msgs) != 3 {
		t.Errorf("logs go to both targets: %d notices", len(pub.msgs))
	}
	pub.fail = true
	if rec := post(tee.Wrap("upload", handler(200)), "/observability/recordings/v0"); rec.Code != 200 {
		t.Errorf("a copy that could not be announced changed the SDK's answer to %d", rec.Code)
	}
	if n := testutil.ToFloat64(tee.metrics.Dropped.WithLabelValues("queue")); n != 1 {
		t.Errorf("dropped{queue} %v", n)
	}
}

// TestRelayOutcomes: 2xx deletes the copy; 5xx and a dead target are
// retried; any other 4xx dead-letters; a copy past max age is dropped; one
// forgotten is gone; Sweep and Forget delete what they should.
func TestRelayOutcomes(t *testing.T) {
	st, err := store.NewLocal(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	pub := &notices{}
	tee := newTee(t, st, pub)
	var status int
	var gotAuth, gotBody string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		gotAuth, gotBody = r.Header.Get("Authorization"), string(b)
		w.WriteHeader(status)
	}))
	defer srv.Close()
	m := NewMetrics(nil)
	r := Relays(config.Forward{Targets: []config.ForwardTarget{{Name: "insights", URL: srv.URL}}, MaxAge: time.Hour, Timeout: 5 * time.Second},
		srv.Client(), st, m, slog.New(slog.NewTextHandler(io.Discard, nil)))[0]
	copyOne := func(sessions ...string) jetstream.Msg {
		h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			_, _ = io.ReadAll(r.Body)
			NoteSessions(r.Context(), sessions...)
		})
		req := httptest.NewRequest(http.MethodPost, "/observability/traces/otlp/v0", strings.NewReader("spans"))
		req.Header.Set("Authorization", "Bearer t1")
		tee.Wrap("traces", h).ServeHTTP(httptest.NewRecorder(), req)
		return &msg{data: pub.msgs[len(pub.msgs)-1].Data}
	}
	ctx := context.Background()
	status = 200
	if err := r.Handle(ctx, copyOne()); err != nil || gotAuth != "Bearer t1" || gotBody != "spans" {
		t.Fatalf("relay: %v, %q %q", err, gotAuth, gotBody)
	}
	if objs, _ := st.List(ctx, Prefix); len(objs) != 0 {
		t.Errorf("relayed copy left: %v", objs)
	}
	status = 503
	if err := r.Handle(ctx, copyOne()); err == nil || failure.Classify(err).Kind == failure.KindPermanent {
		t.Errorf("a 503 must be retried: %v", err)
	}
	status = 401
	if err := r.Handle(ctx, copyOne()); failure.Classify(err).Kind != failure.KindPermanent {
		t.Errorf("a 401 will not change by itself: %v", err)
	}
	r.now = func() time.Time { return time.Now().Add(2 * time.Hour) }
	if err := r.Handle(ctx, copyOne()); err != nil || testutil.ToFloat64(m.Relays.WithLabelValues("insights", "expired")) != 1 {
		t.Errorf("an expired copy: %v", err)
	}
	r.now = time.Now
	gone := copyOne("RM_x/AJ_y")
	if n, err := Forget(ctx, st, "RM_x/AJ_y"); err != nil || n != 2 {
		t.Fatalf("forget: %d objects, %v", n, err)
	}
	if err := r.Handle(ctx, gone); err != nil || testutil.ToFloat64(m.Relays.WithLabelValues("insights", "gone")) != 1 {
		t.Errorf("a forgotten copy: %v", err)
	}
	// The 503's copy is still there; the sweep removes it only once old.
	if n, _ := Sweep(ctx, st, time.Hour, time.Now()); n != 0 {
		t.Errorf("the sweep deleted %d young objects", n)
	}
	if n, _ := Sweep(ctx, st, time.Hour, time.Now().Add(2*time.Hour)); n == 0 {
		t.Error("the sweep left old copies")
	}
}

// msg is a jetstream.Msg with data only.
type msg struct {
	jetstream.Msg
	data []byte
}

func (m *msg) Data() []byte { return m.data }
