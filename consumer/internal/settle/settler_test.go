package settle

import (
	"errors"
	"fmt"
	"testing"

	"github.com/nats-io/nats.go/jetstream"
)

// TestSettlerInProcess: only nats-server's 409 "duplicate message id is in
// process" (another replica publishing the same session) is taken as the
// other replica winning; any other publish error is a warning.
func TestSettlerInProcess(t *testing.T) {
	t.Parallel()
	inProc := fmt.Errorf("publish session RM/AJ: %w", &jetstream.APIError{Code: 409, ErrorCode: 10158, Description: "duplicate message id is in process"})
	if !inProcess(inProc) {
		t.Error("10158 not recognised")
	}
	for _, err := range []error{errors.New("nats: timeout"), &jetstream.APIError{Code: 503, ErrorCode: 10008}} {
		if inProcess(err) {
			t.Errorf("%v taken for another replica's publish", err)
		}
	}
}
