package broker

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// TestRetrySetup: set-up requests nobody answered, or answered "no leader",
// are tried again in short attempts; a configuration error is final at once.
func TestRetrySetup(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		err   error
		retry bool
	}{
		{context.DeadlineExceeded, true},
		{fmt.Errorf("create stream: %w", nats.ErrTimeout), true},
		{nats.ErrNoResponders, true},
		{&jetstream.APIError{Code: 503, ErrorCode: 10008, Description: "JetStream system temporarily unavailable"}, true},
		{&jetstream.APIError{Code: 400, ErrorCode: jetstream.JSErrCodeStreamNameInUse}, true},
		{&jetstream.APIError{Code: 400, ErrorCode: 10005, Description: "no suitable peers for placement, peer offline"}, true},
		{&jetstream.APIError{Code: 500, ErrorCode: 10047, Description: "insufficient storage resources available"}, false},
		{jetstream.ErrJetStreamNotEnabled, false},
		{errors.New("subjects overlap with an existing stream"), false},
	} {
		if got := setupRetryable(tc.err); got != tc.retry {
			t.Errorf("%v: retryable %v, want %v", tc.err, got, tc.retry)
		}
	}
	calls := 0
	start := time.Now()
	err := RetrySetup(context.Background(), nil, "stream X", time.Second, func(ctx context.Context) error {
		calls++
		if _, ok := ctx.Deadline(); !ok {
			t.Error("an attempt without a deadline")
		}
		if calls < 3 {
			return context.DeadlineExceeded
		}
		return nil
	})
	if err != nil || calls != 3 || time.Since(start) > 5*time.Second {
		t.Errorf("err %v after %d calls, %s", err, calls, time.Since(start))
	}
	calls = 0
	err = RetrySetup(context.Background(), nil, "stream X", time.Second, func(context.Context) error {
		calls++
		return jetstream.ErrJetStreamNotEnabled
	})
	if err == nil || calls != 1 {
		t.Errorf("a final error was retried: %v, %d calls", err, calls)
	}
}
