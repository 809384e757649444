package ingest

import (
	"context"
	"errors"
	"io"
	"net/http"
	"time"
)

// What an unauthenticated request may cost is bounded here and in each
// endpoint (docs/security.md): every request's body must arrive within
// http.body_timeout of the request's start (withBodyDeadline), tokens are
// checked before a body is read, and the bodies read at once are capped per
// endpoint (slots).

// withBodyDeadline gives every request's body http.body_timeout to arrive:
// a client that stalls mid-body is cut off then, whatever the endpoint (a
// refused request's unread body is read by net/http too, to reuse the
// connection). The collector stretches it for an authenticated upload
// (progressReader).
func withBodyDeadline(h http.Handler, d time.Duration) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_ = http.NewResponseController(w).SetReadDeadline(time.Now().Add(d))
		h.ServeHTTP(w, r)
	})
}

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

// slots caps the bodies one endpoint reads at once. Webhooks never wait
// for one: a full endpoint answers 503 at once, which LiveKit's notifier
// retries. OTLP requests wait a little (otlpSlotWait): the SDKs export logs
// and traces of several sessions at once, each decoded in milliseconds.
type slots chan struct{}

func newSlots(n int) slots { return make(slots, max(n, 1)) }

// take takes a slot, or says the endpoint is full.
func (s slots) take() bool {
	select {
	case s <- struct{}{}:
		return true
	default:
		return false
	}
}

// takeWithin waits up to d for a slot (a request that waits holds its
// connection and headers, not its body). It reports whether it got one.
func (s slots) takeWithin(ctx context.Context, d time.Duration) bool {
	if s.take() {
		return true
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case s <- struct{}{}:
		return true
	case <-t.C:
		return false
	case <-ctx.Done():
		return false
	}
}

func (s slots) give() { <-s }

// errBusy is a full endpoint's answer.
var errBusy = errors.New("too many requests in flight, retry later")
