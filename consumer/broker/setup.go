package broker

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/lkscore/lkscore/internal/retrylog"
)

// setupDeadline bounds how long start-up waits for JetStream to answer its
// stream, bucket and consumer set-up. A stream whose leader was on a node
// that just died gets a new leader in seconds, but a request sent meanwhile
// is never answered; replicas creating one R3 stream at once on a fresh
// cluster time out although the stream is created (nats-server #3677). Short
// attempts retried until the deadline ride both out; /readyz says not ready
// meanwhile.
const setupDeadline = 2 * time.Minute

// setupAttempt bounds one attempt (and at most nats.request_timeout).
const setupAttempt = 5 * time.Second

// RetrySetup runs one set-up request until it succeeds, fails for a reason
// waiting does not change, or setupDeadline passes.
func RetrySetup(ctx context.Context, log *slog.Logger, what string, requestTimeout time.Duration, fn func(context.Context) error) error {
	deadline := time.Now().Add(setupDeadline)
	wait := 250 * time.Millisecond
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	retries := retrylog.New(log, nil, 0)
	for attempt := 1; ; attempt++ {
		actx, cancel := context.WithTimeout(ctx, min(requestTimeout, setupAttempt))
		err := fn(actx)
		cancel()
		if err == nil {
			retries.OK(what, "nats set-up answered", "attempts", attempt)
			return nil
		}
		if !setupRetryable(err) || ctx.Err() != nil || time.Now().Add(wait).After(deadline) {
			return fmt.Errorf("%s: %w", what, err)
		}
		retries.Failed(what, "nats set-up not answered; retrying (a cluster electing a leader answers within seconds)", err,
			"attempt", attempt)
		select {
		case <-ctx.Done():
			return fmt.Errorf("%s: %w", what, ctx.Err())
		case <-time.After(wait):
		}
		wait = min(2*wait, 2*time.Second)
	}
}

// errCodeNoSuitablePeers is nats-server's JSClusterNoPeersErr (10005, "no
// suitable peers for placement"): on a cluster that just elected its meta
// leader, before every peer has reported in. On a cluster too small for
// nats.replicas it persists, and set-up fails after setupDeadline with it.
const errCodeNoSuitablePeers jetstream.ErrorCode = 10005

// setupRetryable: no answer, no leader yet, JetStream temporarily
// unavailable, or a concurrent create of the same stream. A wrong
// configuration (JetStream off, not enough storage for max_bytes) is final.
func setupRetryable(err error) bool {
	if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, nats.ErrTimeout) || errors.Is(err, nats.ErrNoResponders) ||
		errors.Is(err, jetstream.ErrNoStreamResponse) || errors.Is(err, nats.ErrConnectionReconnecting) {
		return true
	}
	var apiErr *jetstream.APIError
	if !errors.As(err, &apiErr) {
		return false
	}
	switch apiErr.ErrorCode {
	case jetstream.JSErrCodeJetStreamNotEnabled, jetstream.JSErrCodeJetStreamNotEnabledForAccount:
		return false
	case jetstream.JSErrCodeStreamNameInUse: // another replica's create won the race
		return true
	case errCodeNoSuitablePeers: // a fresh cluster whose peers have not all reported in yet
		return true
	}
	return apiErr.Code == http.StatusServiceUnavailable // no leader, JetStream temporarily unavailable
}
