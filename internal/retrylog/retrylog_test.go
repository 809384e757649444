package retrylog

import (
	"bytes"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"
)

// TestTenMinutesDown: a target failing 648 times a minute for 10 minutes
// (what one test's forward target did) leaves its first failure, one
// summary a minute and one recovery line; another target's lines are its
// own.
func TestTenMinutesDown(t *testing.T) {
	var buf bytes.Buffer
	clock := time.Unix(1_800_000_000, 0)
	l := New(slog.New(slog.NewTextHandler(&buf, nil)), func() time.Time { return clock }, 0)
	step := time.Minute / 648
	tries := 0
	for end := clock.Add(10 * time.Minute); clock.Before(end); clock = clock.Add(step) {
		l.Failed("forward-a", "forward failed", fmt.Errorf("answered 503 (try %d)", tries))
		tries++
		if tries%100 == 0 {
			l.OK("forward-b", "forward recovered") // another target that works
		}
	}
	l.Failed("forward-b", "forward failed", errors.New("refused"))
	l.OK("forward-a", "forward recovered")
	l.OK("forward-a", "forward recovered") // nothing to recover from: no line
	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	var warnA, infoA, warnB int
	for _, line := range lines {
		switch {
		case strings.Contains(line, "level=WARN") && strings.Contains(line, "target=forward-a"):
			warnA++
		case strings.Contains(line, "level=INFO") && strings.Contains(line, "target=forward-a"):
			infoA++
			if !strings.Contains(line, fmt.Sprintf("failed_tries=%d", tries)) || !strings.Contains(line, "failed_for=10m0") {
				t.Errorf("recovery line %q", line)
			}
		case strings.Contains(line, "target=forward-b") && strings.Contains(line, "level=WARN"):
			warnB++
		}
	}
	if warnA < 10 || warnA > 12 || infoA != 1 || warnB != 1 {
		t.Fatalf("%d tries in 10 minutes: %d warn lines, %d recovery lines (want ~11 and 1); b: %d\n%s", tries, warnA, infoA, warnB, buf.String())
	}
	if !strings.Contains(lines[1], "forward failed: still failing") || !strings.Contains(lines[1], "failing_for=1m0s") ||
		!strings.Contains(lines[1], "tries=6") || !strings.Contains(lines[1], `last_err="answered 503 (try 6`) {
		t.Errorf("the first summary: %q", lines[1])
	}
	if l.failing.Load() != 1 || !l.Failing("forward-b") || l.Failing("forward-a") {
		t.Errorf("failing %d", l.failing.Load())
	}
}

// TestFlappingTarget: a target whose tries fail and work in turn for 10
// minutes (a per-message error, an overloaded target) logs at most a
// failure and a recovery line a minute, each failure line counting the
// failures that logged nothing since the one before.
func TestFlappingTarget(t *testing.T) {
	var buf bytes.Buffer
	clock := time.Unix(1_800_000_000, 0)
	l := New(slog.New(slog.NewTextHandler(&buf, nil)), func() time.Time { return clock }, 0)
	for end := clock.Add(10 * time.Minute); clock.Before(end); clock = clock.Add(100 * time.Millisecond) {
		l.Failed("notify-x", "alert not delivered", errors.New("503"))
		clock = clock.Add(100 * time.Millisecond)
		l.OK("notify-x", "alert delivered again")
	}
	if n := strings.Count(buf.String(), "\n"); n < 3 || n > 24 {
		t.Fatalf("%d lines in 10 minutes of flapping:\n%s", n, buf.String())
	}
	if !strings.Contains(buf.String(), "failed_tries_unlogged=300") {
		t.Fatalf("the unlogged failures are not counted:\n%s", buf.String())
	}
}
