package broker

import (
	"fmt"
	"log/slog"
	"slices"
	"strings"
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

// Require is the check every part's constructor makes of what it was
// given: absent maps a dependency's name to whether it is missing, and the
// error names every missing one, sorted ("locator: facts, store required").
func Require(part string, absent map[string]bool) error {
	var missing []string
	for name, a := range absent {
		if a {
			missing = append(missing, name)
		}
	}
	if len(missing) == 0 {
		return nil
	}
	slices.Sort(missing)
	return fmt.Errorf("%s: %s required", part, strings.Join(missing, ", "))
}
