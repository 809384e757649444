package ingest

import (
	"context"
	"errors"
	"io"
	"net/http"
	"sync/atomic"
	"time"
)

// What an unauthenticated request may cost is bounded here and in each
// endpoint (docs/security.md): every request's body must arrive within
// http.body_timeout of the request's start (withBodyDeadline), tokens are
// checked before a body is read, and the bodies read at once are capped per
// endpoint (slots).

// withBodyDeadline gives every request's body http.body_timeout to arrive:
// a client that stalls mid-body is cut off then, whatever the endpoint. A
// refused request's connection is closed, its body never read
// (closeOnError). The collector stretches it for an authenticated upload
// (progressReader).
func withBodyDeadline(h http.Handler, d time.Duration) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_ = http.NewResponseController(w).SetReadDeadline(time.Now().Add(d))
		h.ServeHTTP(closeOnError{w}, r)
	})
}

// closeOnError closes the connection after an error answer. Refusals
// come before the body is read (an unauthenticated request costs its
// headers only), and net/http reads up to 256 KiB of an unread body
// before it writes the answer, to keep the connection: a trickled body
// held a 401 until http.body_timeout (issue 65).
type closeOnError struct{ http.ResponseWriter }

func (c closeOnError) WriteHeader(code int) {
	if code >= 400 {
		c.Header().Set("Connection", "close")
	}
	c.ResponseWriter.WriteHeader(code)
}

// Unwrap lets http.ResponseController reach the connection.
func (c closeOnError) Unwrap() http.ResponseWriter { return c.ResponseWriter }

// progressReader reads an authenticated upload's body: each read must
// bring bytes within idle of the one before, so an upload may take as long
// as it keeps sending, and one that stalls is cut off.
type progressReader struct {
	r    io.ReadCloser
	rc   *http.ResponseController
	idle time.Duration
}

func newProgressReader(w http.ResponseWriter, r io.ReadCloser, idle time.Duration) *progressReader {
	return &progressReader{r: r, rc: http.NewResponseController(w), idle: idle}
}

func (p *progressReader) Read(b []byte) (int, error) {
	_ = p.rc.SetReadDeadline(time.Now().Add(p.idle))
	return p.r.Read(b)
}

func (p *progressReader) Close() error { return p.r.Close() }

// slots caps the bodies one endpoint reads at once, and the requests that
// wait for one. Webhooks never wait: a full endpoint answers 503 at once,
// which LiveKit's notifier retries. OTLP requests wait a little
// (otlpSlotWait; the SDKs export several sessions' logs and traces at once,
// each decoded in milliseconds), uploads up to http.upload_wait. A request
// that waits holds its connection and headers, not its body; once
// maxWaitersPerSlot per slot wait, the next is answered 503 at once.
type slots struct {
	ch      chan struct{}
	waiting atomic.Int64
}

// maxWaitersPerSlot bounds the requests waiting for a slot, per slot.
const maxWaitersPerSlot = 64

func newSlots(n int) *slots { return &slots{ch: make(chan struct{}, max(n, 1))} }

// errBusy is a full endpoint's answer: every slot taken and, for the
// endpoints that wait, as many waiting as may.
var errBusy = errors.New("too many requests in flight, retry later")

// errSlotWait is a request that waited its whole wait for a slot.
var errSlotWait = errors.New("no slot free within the wait")

// take takes a slot now, or says the endpoint is full.
func (s *slots) take() bool {
	select {
	case s.ch <- struct{}{}:
		return true
	default:
		return false
	}
}

// takeWithin waits up to d for a slot: nil when it has one, errBusy when
// too many wait already, errSlotWait after d, or ctx's error. waiting, when
// not nil, counts the requests waiting (a gauge).
func (s *slots) takeWithin(ctx context.Context, d time.Duration, waiting interface {
	Inc()
	Dec()
}) error {
	if s.take() {
		return nil
	}
	if s.waiting.Add(1) > int64(maxWaitersPerSlot*cap(s.ch)) {
		s.waiting.Add(-1)
		return errBusy
	}
	defer s.waiting.Add(-1)
	if waiting != nil {
		waiting.Inc()
		defer waiting.Dec()
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case s.ch <- struct{}{}:
		return nil
	case <-t.C:
		return errSlotWait
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (s *slots) give() { <-s.ch }
