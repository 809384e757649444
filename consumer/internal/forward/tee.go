// Package forward is the tee: every agents SDK request lkscore accepted
// (recording upload, OTLP logs, traces, metrics) is copied into the
// recording store before its answer and relayed unchanged, with its own
// Authorization, to each configured target (forward.targets), so that a
// team keeps LiveKit Cloud's Agent Insights, or any second collector, while
// scoring here (docs/forward.md).
//
// The ingest role copies (Tee): the request's body as the handler reads it,
// and, once the handler has answered 2xx, the copy and a notice per target
// on the forward stream; only then does the SDK get its answer. A copy
// that fails is counted and logged and the SDK's answer is the handler's:
// the tee never fails an SDK request. The worker role relays (Relay): one
// durable consumer per target, retried with the pipeline's backoff; the
// copy is deleted once relayed.
//
// It owns the copies under Prefix, the forward stream and its relay
// consumers. It must not import ingest (ingest calls the Tee) nor the
// daemon's assembly (consumer); forget erases a session's copies through
// Forget.
package forward

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"hash"
	"io"
	"log/slog"
	"net/http"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/lkscore/lkscore/config"
	"github.com/lkscore/lkscore/store"
	"github.com/lkscore/lkscore/wire"
)

// Prefix is where the copies live in the recording store: no session's
// directory (the store sweep and retention look for headers).
const Prefix = "lkscore-forward/"

// Objects of one copy.
const (
	objectRequest = "request.json"
	objectBody    = "body"
)

// Request is what a copy says of the request it holds, in the store
// (request.json) and in its notice on the forward stream.
type Request struct {
	Dir    string `json:"dir"` // the copy's store directory
	Target string `json:"target"`
	Signal string `json:"signal"` // upload, logs, traces, metrics
	Path   string `json:"path"`
	Query  string `json:"query,omitempty"`
	// Header holds the headers relayed: Authorization, Content-Type,
	// Content-Encoding, User-Agent.
	Header     map[string]string `json:"header"`
	Size       int64             `json:"size"`
	SHA256     string            `json:"sha256"`
	Sessions   []string          `json:"sessions,omitempty"`
	ReceivedAt time.Time         `json:"received_at"`
}

// relayedHeaders are the request headers a relay carries.
var relayedHeaders = []string{"Authorization", "Content-Type", "Content-Encoding", "User-Agent"}

// publisher is what the tee needs of JetStream.
type publisher interface {
	PublishMsg(ctx context.Context, msg *nats.Msg, opts ...jetstream.PublishOpt) (*jetstream.PubAck, error)
}

// Metrics are the tee's and the relays' counters.
type Metrics struct {
	// Copied counts copies kept, per target; Dropped the requests not
	// copied, per reason (tmp, partial, store, queue).
	Copied, Dropped *prometheus.CounterVec
	// Relays counts relay outcomes per target: relayed, retry, refused,
	// expired, gone.
	Relays *prometheus.CounterVec
}

// NewMetrics registers the tee's metrics with reg.
func NewMetrics(reg prometheus.Registerer) Metrics {
	m := Metrics{
		Copied: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "lkscore_forward_copied_total",
			Help: "SDK requests the tee copied for relay, per forward target."}, []string{"target"}),
		Dropped: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "lkscore_forward_dropped_total",
			Help: "SDK requests accepted and not copied for relay (answered all the same), per reason: tmp, partial, store, queue."}, []string{"reason"}),
		Relays: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "lkscore_forward_relays_total",
			Help: "Relay attempts per forward target and outcome: relayed, retry, refused (a 4xx, dead-lettered), " +
				"expired (older than forward.max_age), gone (the copy was forgotten)."},
			[]string{"target", "outcome"}),
	}
	if reg != nil {
		reg.MustRegister(m.Copied, m.Dropped, m.Relays)
	}
	return m
}

// Store is what the tee needs of the recording store.
type Store interface {
	store.Writer
}

// Tee copies the SDK requests each target relays.
type Tee struct {
	targets  []config.ForwardTarget
	store    Store
	js       publisher
	subjects wire.Subjects
	timeout  time.Duration // the copy of one request, all targets
	metrics  Metrics
	log      *slog.Logger
	now      func() time.Time
}

// NewTee copies for cfg.Forward.Targets into st, announcing on js; nil when
// no target is configured.
func NewTee(cfg config.Config, st Store, js publisher, m Metrics, log *slog.Logger) *Tee {
	if len(cfg.Forward.Targets) == 0 {
		return nil
	}
	return &Tee{targets: cfg.Forward.Targets, store: st, js: js, subjects: wire.NewSubjects(cfg.NATS.SubjectPrefix, cfg.NATS.StreamPrefix),
		timeout: max(cfg.NATS.PublishTimeout, 5*time.Second), metrics: m, log: log, now: time.Now}
}

// maxRest bounds what is read after the handler is done (a multipart
// epilogue, a gzip trailer): a body with more left unread is not copied.
const maxRest = 1 << 20

// noted collects what the handler says of the request: its sessions.
type noted struct {
	mu       sync.Mutex
	sessions []string
}

type notedKey struct{}

// NoteSessions tells the tee which sessions the request in ctx concerned
// (so that lkscore forget finds its copy); a no-op without a tee.
func NoteSessions(ctx context.Context, keys ...string) {
	n, _ := ctx.Value(notedKey{}).(*noted)
	if n == nil {
		return
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	for _, k := range keys {
		if k != "" && !slices.Contains(n.sessions, k) && len(n.sessions) < 1000 {
			n.sessions = append(n.sessions, k)
		}
	}
}

// Wrap copies the requests of signal h answers 2xx, for each target that
// relays signal; t nil or no such target: h itself.
func (t *Tee) Wrap(signal string, h http.Handler) http.Handler {
	if t == nil {
		return h
	}
	var targets []config.ForwardTarget
	for _, tg := range t.targets {
		if tg.Relays(signal) {
			targets = append(targets, tg)
		}
	}
	if len(targets) == 0 {
		return h
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost {
			h.ServeHTTP(w, r)
			return
		}
		tmp, err := os.CreateTemp("", "lkscore-forward-*")
		if err != nil {
			t.drop("tmp", err)
			h.ServeHTTP(w, r)
			return
		}
		defer func() { _ = tmp.Close(); _ = os.Remove(tmp.Name()) }()
		body := &copyingBody{r: r.Body, w: tmp, h: sha256.New()}
		r.Body = body
		n := &noted{}
		r = r.WithContext(context.WithValue(r.Context(), notedKey{}, n))
		rec := &heldResponse{w: w, header: http.Header{}}
		h.ServeHTTP(rec, r)
		if rec.status == 0 {
			rec.status = http.StatusOK
		}
		if rec.status/100 == 2 {
			t.keep(r, signal, targets, body, tmp, n)
		}
		rec.release()
	})
}

// keep copies the request for each target, once the handler answered 2xx.
func (t *Tee) keep(r *http.Request, signal string, targets []config.ForwardTarget, body *copyingBody, tmp *os.File, n *noted) {
	if rest, err := io.Copy(io.Discard, io.LimitReader(body, maxRest+1)); err != nil || rest > maxRest {
		t.drop("partial", fmt.Errorf("%d bytes of the body left unread by the handler: %v", rest, err))
		return
	}
	if body.err != nil {
		t.drop("tmp", body.err)
		return
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(r.Context()), t.timeout)
	defer cancel()
	n.mu.Lock()
	sessions := slices.Clone(n.sessions)
	n.mu.Unlock()
	hdr := map[string]string{}
	for _, k := range relayedHeaders {
		if v := r.Header.Get(k); v != "" {
			hdr[k] = v
		}
	}
	now := t.now()
	var rnd [6]byte
	_, _ = rand.Read(rnd[:])
	id := fmt.Sprintf("%019d-%s", now.UnixNano(), hex.EncodeToString(rnd[:]))
	for _, tg := range targets {
		req := Request{Dir: Prefix + wire.ForwardConsumer(tg.Name) + "/" + id + "/", Target: tg.Name, Signal: signal, Path: r.URL.Path,
			Query: r.URL.RawQuery, Header: hdr, Size: body.n, SHA256: hex.EncodeToString(body.h.Sum(nil)), Sessions: sessions, ReceivedAt: now}
		if err := t.copyFor(ctx, req, tmp); err != nil {
			t.drop("store", fmt.Errorf("target %s: %w", tg.Name, err))
			continue
		}
		if err := t.announce(ctx, req); err != nil {
			t.drop("queue", fmt.Errorf("target %s: %w", tg.Name, err))
			continue
		}
		t.metrics.Copied.WithLabelValues(tg.Name).Inc()
	}
}

// copyFor writes one target's copy: request.json and the body.
func (t *Tee) copyFor(ctx context.Context, req Request, tmp *os.File) error {
	meta, err := json.Marshal(req)
	if err != nil {
		return err
	}
	if _, err := tmp.Seek(0, io.SeekStart); err != nil {
		return err
	}
	up, err := t.store.Begin(ctx, req.Dir)
	if err != nil {
		return err
	}
	if _, err := up.Write(ctx, objectBody, tmp, req.Size+1); err != nil {
		_ = up.Abort(ctx)
		return err
	}
	if _, err := up.Write(ctx, objectRequest, bytes.NewReader(meta), int64(len(meta))+1); err != nil {
		_ = up.Abort(ctx)
		return err
	}
	if err := up.Commit(ctx); err != nil {
		_ = up.Abort(ctx)
		return err
	}
	return nil
}

// announce publishes the copy's notice for its target's relay.
func (t *Tee) announce(ctx context.Context, req Request) error {
	data, err := json.Marshal(req)
	if err != nil {
		return err
	}
	msg := nats.NewMsg(t.subjects.Forward(wire.ForwardConsumer(req.Target)))
	msg.Data = data
	if len(req.Sessions) > 0 {
		msg.Header.Set(wire.HeaderSessions, strings.Join(req.Sessions, ","))
	}
	_, err = t.js.PublishMsg(ctx, msg, jetstream.WithMsgID(req.Dir), jetstream.WithExpectStream(t.subjects.ForwardStream()))
	return err
}

// drop counts and logs a request accepted and not copied.
func (t *Tee) drop(reason string, err error) {
	t.metrics.Dropped.WithLabelValues(reason).Inc()
	t.log.Warn("forward: an accepted SDK request was not copied for relay; the SDK was answered all the same", "reason", reason, "err", err)
}

// copyingBody is the request body, copied to w and hashed as it is read.
type copyingBody struct {
	r   io.ReadCloser
	w   io.Writer
	h   hash.Hash
	n   int64
	err error // the first error writing the copy
}

func (b *copyingBody) Read(p []byte) (int, error) {
	n, err := b.r.Read(p)
	if n > 0 {
		b.n += int64(n)
		_, _ = b.h.Write(p[:n])
		if b.err == nil {
			_, b.err = b.w.Write(p[:n])
		}
	}
	return n, err
}

func (b *copyingBody) Close() error { return b.r.Close() }

// heldResponse holds the handler's answer until the copy is kept: the
// SDK's answer then says the copy exists. The SDK endpoints' answers are
// small (an empty OTLP response, a short error).
type heldResponse struct {
	w      http.ResponseWriter
	header http.Header
	status int
	body   bytes.Buffer
}

func (h *heldResponse) Header() http.Header { return h.header }

func (h *heldResponse) WriteHeader(code int) {
	if h.status == 0 {
		h.status = code
	}
}

func (h *heldResponse) Write(b []byte) (int, error) {
	if h.status == 0 {
		h.status = http.StatusOK
	}
	if h.body.Len()+len(b) > 1<<20 {
		return 0, errors.New("forward: response larger than 1 MiB")
	}
	return h.body.Write(b)
}

// Unwrap lets http.ResponseController reach the connection (read deadlines).
func (h *heldResponse) Unwrap() http.ResponseWriter { return h.w }

// release writes the held answer.
func (h *heldResponse) release() {
	dst := h.w.Header()
	for k, v := range h.header {
		dst[k] = v
	}
	h.w.WriteHeader(h.status)
	_, _ = h.w.Write(h.body.Bytes())
}
