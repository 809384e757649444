package consumer

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"net/http"
	"time"

	"github.com/lkscore/lkscore/recording"
	"github.com/lkscore/lkscore/store"
)

// What went wrong decides what happens next, in one place: whether a
// pipeline message is acked, retried or dead-lettered (and under which
// label), and what an HTTP client is answered. See docs/guarantees.md.

// errKind is what a failure means for the work that met it.
type errKind int

const (
	// kindTransient: retry later (NATS or the store unavailable, a timeout).
	kindTransient errKind = iota
	// kindNotYet: the recording a message announces is not in the store yet.
	kindNotYet
	// kindPermanent: retrying cannot fix it; dead-letter it or answer 4xx.
	kindPermanent
	// kindStoreDown: the recording store is unavailable; pause until it is back.
	kindStoreDown
)

// failure is a classified error.
type failure struct {
	kind errKind
	// label is the bounded dead-letter reason: recording_not_found,
	// malformed_recording, store, bad_message, or transient.
	label string
	// status is the HTTP answer to a client whose request met the error.
	status int
}

// errNotYet means the recording a webhook announces is not in the store
// (yet): the locator retries with growing delays until its deadline.
var errNotYet = errors.New("recording not found (yet)")

// permanentError marks an error that retrying cannot fix.
type permanentError struct{ err error }

func (e *permanentError) Error() string { return e.err.Error() }
func (e *permanentError) Unwrap() error { return e.err }

func permanent(err error) error {
	if err == nil {
		return nil
	}
	return &permanentError{err: err}
}

// clientError is a request refused for the client's fault, with its status.
type clientError struct {
	status int
	err    error
}

func (e *clientError) Error() string { return e.err.Error() }
func (e *clientError) Unwrap() error { return e.err }

func refuse(status int, format string, a ...any) error {
	return &clientError{status: status, err: fmt.Errorf(format, a...)}
}

// bodyError marks an error that came from reading a request body (the
// client went away, bad framing), so it is told apart from a store failure.
type bodyError struct{ err error }

func (e *bodyError) Error() string { return e.err.Error() }
func (e *bodyError) Unwrap() error { return e.err }

// classify is the one place that sorts errors.
func classify(err error) failure {
	var ce *clientError
	var pe *permanentError
	var be *bodyError
	var parse *recording.ParseError
	var tooLarge *http.MaxBytesError
	var notShared *storeNotSharedError
	switch {
	case errors.As(err, &notShared):
		return failure{kindPermanent, "store_not_shared", http.StatusServiceUnavailable}
	case errors.As(err, &ce):
		return failure{kindPermanent, "bad_message", ce.status}
	case errors.Is(err, errNotYet):
		return failure{kindNotYet, "recording_not_found", http.StatusNotFound}
	case errors.Is(err, recording.ErrLimit) || errors.As(err, &tooLarge):
		return failure{kindPermanent, "malformed_recording", http.StatusRequestEntityTooLarge}
	case errors.As(err, &parse):
		return failure{kindPermanent, "malformed_recording", http.StatusBadRequest}
	case errors.As(err, &be):
		return failure{kindPermanent, "bad_message", http.StatusBadRequest}
	case errors.Is(err, store.ErrNotFound):
		return failure{kindPermanent, "recording_not_found", http.StatusNotFound}
	case errors.Is(err, store.ErrPermanent):
		// The client is not at fault: a denied bucket is ours to fix, and a
		// 503 keeps the SDK retrying meanwhile.
		return failure{kindPermanent, "store", http.StatusServiceUnavailable}
	case errors.As(err, &pe):
		return failure{kindPermanent, "bad_message", http.StatusBadRequest}
	case errors.Is(err, store.ErrUnavailable):
		return failure{kindStoreDown, "store_unavailable", http.StatusServiceUnavailable}
	}
	return failure{kindTransient, "transient", http.StatusServiceUnavailable}
}

// httpReason is the bounded metric label of an HTTP answer.
func httpReason(status int) string {
	switch status {
	case http.StatusBadRequest:
		return "bad_request"
	case http.StatusUnauthorized:
		return "unauthorized"
	case http.StatusMethodNotAllowed:
		return "method_not_allowed"
	case http.StatusRequestEntityTooLarge:
		return "too_large"
	case http.StatusUnsupportedMediaType:
		return "unsupported_media_type"
	}
	return "unavailable"
}

// maxBackoff caps every retry delay.
const maxBackoff = 5 * time.Minute

// backoff is the redelivery delay after n deliveries: base doubling, at
// most maxBackoff, then jittered by ±20% so that messages failed together
// (an outage) do not all come back in the same instant.
func backoff(base time.Duration, n uint64) time.Duration {
	d := base
	for i := uint64(1); i < n && d < maxBackoff; i++ {
		d *= 2
	}
	d = min(d, maxBackoff)
	return d + time.Duration((rand.Float64()*0.4-0.2)*float64(d))
}

// truncateHeader bounds a header value at 1 KiB without cutting a UTF-8
// character in half.
func truncateHeader(s string) string {
	if len(s) <= 1024 {
		return s
	}
	return bounded(s, 1024) + "…"
}
