// Package failure decides, in one place, what an error means for the work
// that met it: whether a pipeline message is acked, retried or
// dead-lettered (and under which label), and what an HTTP client is
// answered. docs/guarantees.md lists the outcomes.
package failure

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"net/http"
	"time"
	"unicode/utf8"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/lkscore/lkscore/recording"
	"github.com/lkscore/lkscore/store"
)

// Kind is what a failure means for the work that met it.
type Kind int

const (
	// KindTransient: retry later (NATS or the store unavailable, a timeout).
	KindTransient Kind = iota
	// KindNotYet: the recording a message announces is not in the store yet.
	KindNotYet
	// KindPermanent: retrying cannot fix it; dead-letter it or answer 4xx.
	KindPermanent
	// KindStoreDown: the recording store is unavailable; pause until it is back.
	KindStoreDown
)

// Failure is a classified error.
type Failure struct {
	Kind Kind
	// Label is the bounded dead-letter reason: recording_not_found,
	// malformed_recording, store, bad_message, or transient.
	Label string
	// Status is the HTTP answer to a client whose request met the error.
	Status int
}

// ErrNotYet means the recording a webhook announces is not in the store
// (yet): the locator retries with growing delays until its deadline.
var ErrNotYet = errors.New("recording not found (yet)")

// permanentError marks an error that retrying cannot fix.
type permanentError struct{ err error }

func (e *permanentError) Error() string { return e.err.Error() }
func (e *permanentError) Unwrap() error { return e.err }

func Permanent(err error) error {
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

func Refuse(status int, format string, a ...any) error {
	return &clientError{status: status, err: fmt.Errorf(format, a...)}
}

// BodyError marks an error that came from reading a request body (the
// client went away, bad framing), so it is told apart from a store failure.
type BodyError struct{ Err error }

func (e *BodyError) Error() string { return e.Err.Error() }
func (e *BodyError) Unwrap() error { return e.Err }

// Classify is the one place that sorts errors.
func Classify(err error) Failure {
	var ce *clientError
	var pe *permanentError
	var be *BodyError
	var parse *recording.ParseError
	var tooLarge *http.MaxBytesError
	var notShared *StoreNotSharedError
	switch {
	case errors.As(err, &notShared):
		return Failure{KindPermanent, "store_not_shared", http.StatusServiceUnavailable}
	case errors.As(err, &ce):
		return Failure{KindPermanent, "bad_message", ce.status}
	case errors.Is(err, ErrNotYet):
		return Failure{KindNotYet, "recording_not_found", http.StatusNotFound}
	case errors.Is(err, recording.ErrLimit) || errors.As(err, &tooLarge):
		return Failure{KindPermanent, "malformed_recording", http.StatusRequestEntityTooLarge}
	case errors.As(err, &parse):
		return Failure{KindPermanent, "malformed_recording", http.StatusBadRequest}
	case errors.As(err, &be):
		return Failure{KindPermanent, "bad_message", http.StatusBadRequest}
	case errors.Is(err, store.ErrNotFound):
		return Failure{KindPermanent, "recording_not_found", http.StatusNotFound}
	case errors.Is(err, store.ErrPermanent):
		// The client is not at fault: a denied bucket is ours to fix, and a
		// 503 keeps the SDK retrying meanwhile.
		return Failure{KindPermanent, "store", http.StatusServiceUnavailable}
	case errors.As(err, &pe):
		return Failure{KindPermanent, "bad_message", http.StatusBadRequest}
	case errors.Is(err, nats.ErrMaxPayload) || errors.Is(err, jetstream.ErrInvalidKey) || errors.Is(err, nats.ErrBadSubject):
		// What one message asked of NATS that it never takes (the server's
		// max_payload, a key or subject it refuses): retrying cannot fix it.
		return Failure{KindPermanent, "bad_message", http.StatusBadRequest}
	case errors.Is(err, store.ErrUnavailable):
		return Failure{KindStoreDown, "store_unavailable", http.StatusServiceUnavailable}
	}
	return Failure{KindTransient, "transient", http.StatusServiceUnavailable}
}

// HTTPReason is the bounded metric label of an HTTP answer.
func HTTPReason(status int) string {
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
	case http.StatusRequestTimeout:
		return "timeout" // the body did not arrive within http.body_timeout
	}
	return "unavailable"
}

// maxBackoff caps every retry delay.
const maxBackoff = 5 * time.Minute

// Backoff is the redelivery delay after n deliveries: base doubling, at
// most maxBackoff, then jittered by ±20% so that messages failed together
// (an outage) do not all come back in the same instant.
func Backoff(base time.Duration, n uint64) time.Duration {
	d := base
	for i := uint64(1); i < n && d < maxBackoff; i++ {
		d *= 2
	}
	d = min(d, maxBackoff)
	return d + time.Duration((rand.Float64()*0.4-0.2)*float64(d))
}

// TruncateHeader bounds a header value at 1 KiB without cutting a UTF-8
// character in half.
func TruncateHeader(s string) string {
	if len(s) <= 1024 {
		return s
	}
	n := 1024
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n] + "…"
}

// StoreNotSharedError is an upload notice from a store this worker does not
// read: ingest and worker do not share one recording store. It is permanent.
type StoreNotSharedError struct{ Ingest, Worker string }

func (e *StoreNotSharedError) Error() string {
	return fmt.Sprintf("store_not_shared: upload stored in %s, but this worker reads %s: ingest and worker must share one recording store "+
		"(set s3.bucket / LKSCORE_S3_BUCKET on both, or run --role all on one data_dir)", e.Ingest, e.Worker)
}

// IsRefusal reports whether err is, or wraps, a Refuse.
func IsRefusal(err error) bool {
	var ce *clientError
	return errors.As(err, &ce)
}
