package broker

import (
	"log/slog"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/lkscore/lkscore/wire"
)

// Env is the plumbing every stage shares: the JetStream handle, the naming
// scheme, the timeouts of NATS calls, the clock and the logger.
type Env struct {
	JS       jetstream.JetStream
	Subjects wire.Subjects
	Timeouts Timeouts
	Now      func() time.Time
	Log      *slog.Logger
}
