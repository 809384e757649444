// Package retrylog keeps a retry loop's log readable through an outage:
// per target, the first failure, then at most one summary line per
// interval while it keeps failing ("still failing: N tries, last error …"),
// and the recovery. Metrics count every try; the log says what is wrong
// once, and that it still is.
package retrylog

import (
	"log/slog"
	"sync"
	"sync/atomic"
	"time"
)

// Every is how often a failing target's summary is logged at most.
const Every = time.Minute

// maxTargets bounds the targets tracked at once: targets are configured
// names (stages, forward and alert targets), a handful; past the bound a
// new target's failures are not logged (the metrics still count them).
const maxTargets = 1024

// Log is the retry log of one or more loops. Its zero value is not usable:
// use New.
type Log struct {
	log   *slog.Logger
	now   func() time.Time
	every time.Duration

	failing atomic.Int64 // targets failing now: OK's fast path
	mu      sync.Mutex
	targets map[string]*state
	// recovered is when each target's last logged recovery was: a target
	// failing again within an interval of it (one that flaps) starts
	// without a line of its own, and shows in the next summary.
	recovered map[string]recovery
}

type recovery struct {
	at     time.Time
	silent int // tries that failed since, in episodes that logged nothing
}

type state struct {
	since, logged time.Time
	tries         int // failed tries since the first failure
	sinceSummary  int // failed tries since the last line
	lastErr       string
	announced     bool // a line said it fails: its recovery is said too
}

// New logs to log, reading now (nil: time.Now), a summary at most every
// interval (0: Every).
func New(log *slog.Logger, now func() time.Time, every time.Duration) *Log {
	if now == nil {
		now = time.Now
	}
	if every <= 0 {
		every = Every
	}
	return &Log{log: log, now: now, every: every, targets: map[string]*state{}, recovered: map[string]recovery{}}
}

// Failed records a failed try at target: the first one since it last
// worked is logged at warning level as msg with err and attrs; later ones
// only as a "still failing" summary once an interval has passed since the
// last line.
func (l *Log) Failed(target, msg string, err error, attrs ...any) {
	now := l.now()
	l.mu.Lock()
	st, ok := l.targets[target]
	if !ok && len(l.targets) >= maxTargets {
		l.mu.Unlock()
		return
	}
	if !ok {
		st = &state{since: now, logged: now, tries: 1, sinceSummary: 1, lastErr: errString(err)}
		l.targets[target] = st
		l.failing.Add(1)
		rec, flapped := l.recovered[target]
		if flapped && now.Sub(rec.at) < l.every {
			st.logged = rec.at // flapping: the next line comes an interval after the recovery line
			l.mu.Unlock()
			return
		}
		delete(l.recovered, target)
		st.announced, st.sinceSummary = true, 0
		l.mu.Unlock()
		head := []any{"target", target, "err", err}
		if rec.silent > 0 {
			head = append(head, "failed_tries_unlogged", rec.silent) // flapped since the last recovery line
		}
		l.log.Warn(msg, append(head, attrs...)...)
		return
	}
	st.tries++
	st.sinceSummary++
	st.lastErr = errString(err)
	if now.Sub(st.logged) < l.every {
		l.mu.Unlock()
		return
	}
	tries, recent, since, last := st.tries, st.sinceSummary, st.since, st.lastErr
	st.logged, st.sinceSummary, st.announced = now, 0, true
	l.mu.Unlock()
	l.log.Warn(msg+": still failing", append([]any{"target", target, "tries", tries, "tries_since_last_line", recent,
		"failing_for", now.Sub(since).Round(time.Second).String(), "last_err", last}, attrs...)...)
}

// OK records a try at target that worked: after failures a line announced,
// the recovery is logged at info level as msg, with how many tries failed
// and for how long. A target that fails again within an interval of its
// recovery line starts silently (counted in its next line): one that flaps
// logs at most a failure and a recovery line an interval.
func (l *Log) OK(target, msg string, attrs ...any) {
	if l.failing.Load() == 0 {
		return
	}
	now := l.now()
	l.mu.Lock()
	st, ok := l.targets[target]
	if ok {
		delete(l.targets, target)
		l.failing.Add(-1)
		if st.announced {
			l.recovered[target] = recovery{at: now}
		} else if rec, ok := l.recovered[target]; ok {
			rec.silent += st.tries
			l.recovered[target] = rec
		}
	}
	l.mu.Unlock()
	if ok && st.announced {
		l.log.Info(msg, append([]any{"target", target, "failed_tries", st.tries,
			"failed_for", now.Sub(st.since).Round(time.Millisecond).String()}, attrs...)...)
	}
}

// Failing reports whether target's last try failed.
func (l *Log) Failing(target string) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	_, ok := l.targets[target]
	return ok
}

func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}
