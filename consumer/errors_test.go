package consumer

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/lkscore/lkscore/recording"
	"github.com/lkscore/lkscore/store"
	"github.com/lkscore/lkscore/wire"
)

func TestClassify(t *testing.T) {
	for _, tc := range []struct {
		name   string
		err    error
		kind   errKind
		label  string
		status int
	}{
		{"not yet", fmt.Errorf("locate: %w", errNotYet), kindNotYet, "recording_not_found", http.StatusNotFound},
		{"parse error", &recording.ParseError{Part: "chat_history", Err: errors.New("bad")}, kindPermanent, "malformed_recording", http.StatusBadRequest},
		{"limit", fmt.Errorf("open: %w", recording.ErrLimit), kindPermanent, "malformed_recording", http.StatusRequestEntityTooLarge},
		{"max bytes", &http.MaxBytesError{Limit: 1}, kindPermanent, "malformed_recording", http.StatusRequestEntityTooLarge},
		{"gone from the store", fmt.Errorf("get: %w", store.ErrNotFound), kindPermanent, "recording_not_found", http.StatusNotFound},
		{"store denied", fmt.Errorf("get: %w", store.ErrPermanent), kindPermanent, "store", http.StatusServiceUnavailable},
		{"bad message", permanent(errors.New("not JSON")), kindPermanent, "bad_message", http.StatusBadRequest},
		{"refusal", refuse(http.StatusUnauthorized, "no"), kindPermanent, "bad_message", http.StatusUnauthorized},
		{"client gone", &bodyError{err: errors.New("unexpected EOF")}, kindPermanent, "bad_message", http.StatusBadRequest},
		{"timeout", context.DeadlineExceeded, kindTransient, "transient", http.StatusServiceUnavailable},
		{"anything else", errors.New("nats: no responders"), kindTransient, "transient", http.StatusServiceUnavailable},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := classify(tc.err)
			if f.kind != tc.kind || f.label != tc.label || f.status != tc.status {
				t.Errorf("classify(%v) = %+v, want kind %d label %s status %d", tc.err, f, tc.kind, tc.label, tc.status)
			}
		})
	}
}

func TestBackoffIsJitteredAndBounded(t *testing.T) {
	seen := map[time.Duration]bool{}
	for n := uint64(1); n <= 20; n++ {
		want := min(5*time.Second<<min(n-1, 10), maxBackoff)
		for range 50 {
			d := backoff(5*time.Second, n)
			if d < want*8/10 || d > want*12/10 {
				t.Fatalf("backoff(5s, %d) = %s, want within ±20%% of %s", n, d, want)
			}
			seen[d] = true
		}
	}
	if len(seen) < 100 {
		t.Errorf("only %d distinct delays in 1000 draws: not jittered", len(seen))
	}
}

func TestTruncateHeaderKeepsUTF8(t *testing.T) {
	for _, s := range []string{strings.Repeat("é", 600), strings.Repeat("a", 1023) + "€€", strings.Repeat("🎙", 300)} {
		got := truncateHeader(s)
		if !utf8.ValidString(got) || len(got) > 1024+len("…") {
			t.Errorf("truncateHeader(%d bytes) = %d bytes, valid %v", len(s), len(got), utf8.ValidString(got))
		}
	}
	if short := "short ✓"; truncateHeader(short) != short {
		t.Error("a short value changed")
	}
}

// TestPipelineStopWaitsForLoops: stop returns only after every background
// loop has returned, so none can publish while NATS drains.
func TestPipelineStopWaitsForLoops(t *testing.T) {
	bg, cancel := context.WithCancel(context.Background())
	p := &pipeline{cancel: func() {}, background: cancel}
	finished := make(chan struct{})
	p.goLoop(func() {
		<-bg.Done()
		time.Sleep(100 * time.Millisecond) // a round still publishing
		close(finished)
	})
	if err := p.stop(context.Background()); err != nil {
		t.Fatal(err)
	}
	select {
	case <-finished:
	default:
		t.Fatal("stop returned before the loop did")
	}

	// A loop that outlives the deadline is reported, not waited for forever.
	bg2, cancel2 := context.WithCancel(context.Background())
	p2 := &pipeline{cancel: func() {}, background: cancel2}
	release := make(chan struct{})
	defer close(release)
	p2.goLoop(func() { <-bg2.Done(); <-release })
	ctx, done := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer done()
	if err := p2.stop(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("stop = %v, want the deadline", err)
	}
}

// TestWatchdogNamesTheStall: a stage with work pending that settled nothing
// for stall_after is flagged and logged with the likely cause.
func TestWatchdogNamesTheStall(t *testing.T) {
	var logs strings.Builder
	log := slog.New(slog.NewTextHandler(&logs, nil))
	m := newPipelineMetrics(nil)
	now := time.Now()
	s := &stage{name: wire.StageScore, consumerName: "score-default", concurrency: 4, metrics: m, log: log,
		health: newHealth(nil, nil, time.Second, time.Second, m.dependencyUp, log), now: func() time.Time { return now }}
	s.progress.Store(now.Add(-2 * time.Minute).UnixNano())
	info := &jetstream.ConsumerInfo{NumPending: 7, NumAckPending: 10, Config: jetstream.ConsumerConfig{MaxAckPending: 10}}
	s.checkStall(info, time.Minute)
	if v := testutil.ToFloat64(m.stalled.WithLabelValues(wire.StageScore, "score-default")); v != 1 {
		t.Errorf("stalled gauge = %v, want 1", v)
	}
	if !strings.Contains(logs.String(), "stage making no progress") || !strings.Contains(logs.String(), "max_ack_pending reached") {
		t.Errorf("log: %s", logs.String())
	}
	s.busy.Store(4)
	logs.Reset()
	s.checkStall(info, time.Minute)
	if !strings.Contains(logs.String(), "every slot is busy") {
		t.Errorf("log: %s", logs.String())
	}
	s.progress.Store(now.UnixNano())
	s.checkStall(info, time.Minute)
	if v := testutil.ToFloat64(m.stalled.WithLabelValues(wire.StageScore, "score-default")); v != 0 {
		t.Errorf("stalled gauge = %v after progress, want 0", v)
	}
}
