package consumer

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"io"
	"log/slog"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/lkscore/lkscore/config"
	"github.com/lkscore/lkscore/consumer/internal/forward"
	"github.com/lkscore/lkscore/internal/testenv"
	"github.com/lkscore/lkscore/wire"
)

// relayed is one request as the SDK sent it or the stand-in received it.
type relayed struct{ path, auth, contentType, encoding, sum string }

// fieldSDKRequests are the agents SDK's requests of the recorded field
// traffic (uploads, OTLP logs, traces, metrics; not LiveKit's webhooks), in
// order, each as the SDK sent it: a fresh token, traces gzipped again.
func fieldSDKRequests(t *testing.T) []*http.Request {
	t.Helper()
	var out []*http.Request
	for _, r := range fieldRequests(t) {
		if r.Path == "/webhook" {
			continue
		}
		body := r.sentBody(t)
		req, _ := http.NewRequest(http.MethodPost, r.Path, nil)
		req.Header.Set("Content-Type", r.ContentType)
		if r.ContentEncoding != "" {
			req.Header.Set("Content-Encoding", r.ContentEncoding)
		}
		req.Body, req.ContentLength = io.NopCloser(bytes.NewReader(body)), int64(len(body))
		req.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(body)), nil }
		out = append(out, req)
	}
	return out
}

// TestForwardTee: 100 SDK requests of the real agents-js traffic (its 42
// uploads, logs, traces and metrics, sent again, then its logs a third
// time), each with its own token, to a daemon whose tee relays to a
// stand-in collector that is down for the first minute. Every request is
// answered 200 at once, as without a tee; once the stand-in is up, it
// receives every one byte-identical with its token, path and content
// headers; it drops the connection of one relay after reading it (a lost
// ack), which is the only duplicate; the copies are deleted once relayed.
// The relay's retry loop logs its first failure, at most one summary a
// minute and one recovery line, however many tries the minute took
// (before the retry log, one line per try: 648 in this minute); the
// metrics count every try.
func TestForwardTee(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: the stand-in is down for a minute")
	}
	t.Parallel()
	const downFor = time.Minute
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	_ = ln.Close() // down: nothing listens there for the first minute
	start := time.Now()

	cfg := pipelineConfig(t, "")
	cfg.Pipeline.RetryBase = time.Second
	cfg.Forward.Targets = []config.ForwardTarget{{Name: "insights", URL: "http://" + addr}}
	d, _, daemonLogs := startDaemonLogging(t, cfg, slog.LevelInfo)

	var sent []relayed
	reqs := fieldSDKRequests(t)
	if len(reqs) != 42 {
		t.Fatalf("the field traffic has %d SDK requests, want 42", len(reqs))
	}
	var logs []*http.Request
	for _, r := range reqs {
		if r.URL.Path == "/observability/logs/otlp/v0" {
			logs = append(logs, r)
		}
	}
	var slowest time.Duration
	for _, r := range append(append(append([]*http.Request{}, reqs...), reqs...), logs...) {
		body, _ := r.GetBody()
		b, _ := io.ReadAll(body)
		req, _ := http.NewRequest(http.MethodPost, "http://"+d.IngestAddr()+r.URL.Path, bytes.NewReader(b))
		req.Header = r.Header.Clone()
		req.Header.Set("Authorization", testenv.Bearer(testenv.PythonToken(t, testenv.Key, testenv.Secret, true)))
		t0 := time.Now()
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		msg, _ := io.ReadAll(resp.Body)
		_ = resp.Body.Close()
		slowest = max(slowest, time.Since(t0))
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("%s answered %d %s with the stand-in down", r.URL.Path, resp.StatusCode, msg)
		}
		sum := sha256.Sum256(b)
		sent = append(sent, relayed{r.URL.Path, req.Header.Get("Authorization"), req.Header.Get("Content-Type"), req.Header.Get("Content-Encoding"), hex.EncodeToString(sum[:])})
	}
	if len(sent) != 100 {
		t.Fatalf("sent %d requests", len(sent))
	}
	t.Logf("100 SDK requests answered 200 with the stand-in down, the slowest in %s", slowest)
	if slowest > 10*time.Second {
		t.Errorf("an SDK request waited %s: the tee must not wait on its target", slowest)
	}
	if time.Since(start) > downFor {
		t.Fatalf("sending took %s, past the stand-in's downtime: the test proves nothing", time.Since(start))
	}
	if got := testutil.ToFloat64(d.fwd.Copied.WithLabelValues("insights")); got != 100 {
		t.Errorf("lkscore_forward_copied_total %v, want 100", got)
	}

	// The stand-in comes up after a minute.
	time.Sleep(time.Until(start.Add(downFor)))
	var mu sync.Mutex
	got := map[relayed]int{}
	lostAcks := 0
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, err := io.ReadAll(r.Body)
		if err != nil {
			http.Error(w, err.Error(), 400)
			return
		}
		sum := sha256.Sum256(b)
		k := relayed{r.URL.Path, r.Header.Get("Authorization"), r.Header.Get("Content-Type"), r.Header.Get("Content-Encoding"), hex.EncodeToString(sum[:])}
		mu.Lock()
		got[k]++
		drop := lostAcks == 0 && len(got) == 5
		if drop {
			lostAcks++
		}
		mu.Unlock()
		if drop { // read, then the connection dies before the answer
			if c, _, err := http.NewResponseController(w).Hijack(); err == nil {
				_ = c.Close()
			}
			return
		}
		w.WriteHeader(http.StatusOK)
	})}
	up, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatalf("the stand-in cannot take its address back: %v", err)
	}
	go func() { _ = srv.Serve(up) }()
	t.Cleanup(func() { _ = srv.Close() })

	want := map[relayed]int{}
	for _, s := range sent {
		want[s]++
	}
	testenv.WaitFor(t, 2*time.Minute, "every request relayed", func() bool {
		mu.Lock()
		defer mu.Unlock()
		for k, n := range want {
			if got[k] < n {
				return false
			}
		}
		return true
	})
	testenv.WaitFor(t, 30*time.Second, "the copies deleted", func() bool {
		left, _ := filepath.Glob(filepath.Join(cfg.DataDir, "recordings", forward.Prefix, "*", "*", "*"))
		return len(left) == 0
	})
	time.Sleep(2 * time.Second) // any late duplicate arrives
	mu.Lock()
	defer mu.Unlock()
	extra := 0
	for k, n := range got {
		if want[k] == 0 {
			t.Errorf("the stand-in got a request nobody sent: %+v", k)
		}
		extra += max(0, n-want[k])
	}
	t.Logf("relayed %d requests (%d distinct) %s after the stand-in came up ; %d duplicates, %d lost acks; %v relay retries", len(sent), len(got), time.Since(start.Add(downFor)).Round(time.Second), extra, lostAcks,
		testutil.ToFloat64(d.fwd.Relays.WithLabelValues("insights", "retry")))
	if extra > lostAcks {
		t.Errorf("%d duplicates for %d lost acks", extra, lostAcks)
	}
	if n := testutil.ToFloat64(d.fwd.Relays.WithLabelValues("insights", "relayed")); n < 100 {
		t.Errorf("lkscore_forward_relays_total{outcome=relayed} %v", n)
	}
	// The relay's retry loop: its first failure, a summary a minute at
	// most, one recovery; every try counted.
	tries := testutil.ToFloat64(d.fwd.Relays.WithLabelValues("insights", "retry"))
	var warn, recovered int
	for _, line := range strings.Split(daemonLogs.String(), "\n") {
		if !strings.Contains(line, `"target":"`+wire.ForwardConsumer("insights")+`"`) {
			continue
		}
		switch {
		case strings.Contains(line, `"level":"WARN"`):
			warn++
		case strings.Contains(line, `"msg":"work succeeds again"`):
			recovered++
		}
	}
	t.Logf("the relay's retry loop: %v tries counted, %d warn lines, %d recovery lines", tries, warn, recovered)
	if tries < 100 || warn < 1 || warn > 3 || recovered != 1 {
		t.Errorf("%v tries left %d warn lines and %d recovery lines, want 1–3 and 1", tries, warn, recovered)
	}
	if n := testutil.ToFloat64(d.fwd.Dropped.WithLabelValues("store")) + testutil.ToFloat64(d.fwd.Dropped.WithLabelValues("queue")) +
		testutil.ToFloat64(d.fwd.Dropped.WithLabelValues("partial")); n != 0 {
		t.Errorf("%v requests not copied", n)
	}
}
