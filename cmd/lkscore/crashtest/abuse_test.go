//go:build !race

package crashtest

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/livekit/protocol/livekit"
	collogs "go.opentelemetry.io/proto/otlp/collector/logs/v1"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	logspb "go.opentelemetry.io/proto/otlp/logs/v1"
	"google.golang.org/protobuf/proto"

	"github.com/lkscore/lkscore/internal/sdkclient"
	"github.com/lkscore/lkscore/internal/testenv"
)

// Abuse tests: what an attacker can make lkscore spend, measured on the
// binary as users run it (lkscore serve on the embedded default, its RSS
// read from /proc). docs/security.md reports their figures.

// serveAlone starts lkscore serve on the embedded default.
func serveAlone(t *testing.T) *proc {
	t.Helper()
	bin, _ := binaries(t)
	dir := t.TempDir()
	listen, ops := freeAddr(t), freeAddr(t)
	cfg := filepath.Join(dir, "lkscore.yaml")
	testenv.WriteFile(t, cfg, "nats:\n  embedded_port: -1\n")
	cmd := exec.Command(bin, "serve", "--config", cfg, "--listen", listen, "--ops-listen", ops, "--data-dir", filepath.Join(dir, "data"))
	cmd.Env = append(os.Environ(), "LIVEKIT_API_KEY="+crashKey, "LIVEKIT_API_SECRET="+crashSecret)
	p := startProc(t, "lkscore", cmd)
	p.ops, p.http = ops, listen
	waitReady(t, p, 20*time.Second)
	return p
}

// rss is the process's resident set in bytes (/proc/<pid>/status VmRSS).
func rss(t *testing.T, pid int) int64 {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			kb, _ := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			return kb << 10
		}
	}
	t.Fatal("no VmRSS")
	return 0
}

// peakRSS samples the process's RSS every 50 ms until stop is closed.
func peakRSS(t *testing.T, pid int, stop <-chan struct{}) <-chan int64 {
	out := make(chan int64, 1)
	go func() {
		var peak int64
		tick := time.NewTicker(50 * time.Millisecond)
		defer tick.Stop()
		for {
			b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
			if err == nil {
				for _, line := range strings.Split(string(b), "\n") {
					if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
						kb, _ := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
						peak = max(peak, kb<<10)
					}
				}
			}
			select {
			case <-stop:
				out <- peak
				return
			case <-tick.C:
			}
		}
	}()
	return out
}

// signedWebhooks sends n agent_job_ended webhooks signed as LiveKit signs
// them, one at a time, and returns each one's latency; an answer other than
// 2xx fails the test.
func signedWebhooks(t *testing.T, base string, n int, every time.Duration) []time.Duration {
	snd := sdkclient.New("http://"+base, crashKey, crashSecret)
	var lat []time.Duration
	for i := range n {
		ev := &livekit.WebhookEvent{Event: "agent_job_ended", Id: fmt.Sprintf("EV_abuse_%d_%d", time.Now().UnixNano(), i),
			Job: &livekit.Job{Id: fmt.Sprintf("AJ_abuse%d", i), Room: &livekit.Room{Sid: "RM_abuse"},
				State: &livekit.JobState{Status: livekit.JobStatus_JS_SUCCESS}}}
		start := time.Now()
		if err := snd.Webhook(context.Background(), ev); err != nil {
			t.Errorf("signed webhook %d: %v", i, err)
		}
		lat = append(lat, time.Since(start))
		time.Sleep(every)
	}
	return lat
}

func p99(d []time.Duration) time.Duration {
	s := slices.Clone(d)
	slices.Sort(s)
	return s[min(len(s)-1, len(s)*99/100)]
}

// stalledBody opens a connection, sends a webhook's headers (authz is the
// Authorization header, "" for none) announcing 1 MiB, then 1 MiB minus
// one byte of it, and stalls. closed gets when the server closed it.
func stalledBody(addr, authz string, closed chan<- time.Duration, start time.Time) {
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		closed <- -1
		return
	}
	defer conn.Close()
	hdr := "POST /webhook HTTP/1.1\r\nHost: lkscore\r\nContent-Type: application/webhook+json\r\nContent-Length: 1048576\r\n"
	if authz != "" {
		hdr += "Authorization: " + authz + "\r\n"
	}
	_, _ = conn.Write([]byte(hdr + "\r\n"))
	go func() { // the body, as far as the server takes it, then stall
		_ = conn.SetWriteDeadline(time.Now().Add(40 * time.Second))
		_, _ = conn.Write(bytes.Repeat([]byte("x"), 1<<20-1))
	}()
	_ = conn.SetReadDeadline(time.Now().Add(60 * time.Second))
	_, _ = io.Copy(io.Discard, bufio.NewReader(conn)) // the answer, then EOF when the server closes
	closed <- time.Since(start)
}

// TestPreAuthBodiesBounded: 200 connections that send an unauthenticated
// webhook announcing 1 MiB, send 1 MiB minus one byte and stall, and 50 that
// do the same with a garbage token. lkscore's RSS grows by at most 64 MiB,
// every one of those connections is closed within 30 s, and signed webhooks
// sent meanwhile are answered 2xx with p99 under 1 s.
func TestPreAuthBodiesBounded(t *testing.T) {
	if testing.Short() {
		t.Skip("abuse test: -short")
	}
	p := serveAlone(t)
	signedWebhooks(t, p.http, 20, 0) // warm up: the first publishes create what they need
	base := rss(t, p.cmd.Process.Pid)
	stop := make(chan struct{})
	peak := peakRSS(t, p.cmd.Process.Pid, stop)

	start := time.Now()
	closed := make(chan time.Duration, 250)
	for i := range 250 {
		authz := ""
		if i >= 200 {
			authz = "Bearer garbage.token.here"
		}
		go stalledBody(p.http, authz, closed, start)
	}
	time.Sleep(time.Second) // all of them connected and sending
	lat := signedWebhooks(t, p.http, 100, 20*time.Millisecond)
	var longest time.Duration
	unanswered := 0
	for range 250 {
		d := <-closed
		if d < 0 || d > 30*time.Second {
			unanswered++
		}
		longest = max(longest, d)
	}
	close(stop)
	grown := <-peak - base
	t.Logf("RSS %d MiB at rest, peak +%.1f MiB; 250 stalled bodies closed within %s (over 30 s: %d); signed webhooks meanwhile p99 %s",
		base>>20, float64(grown)/(1<<20), longest.Round(time.Millisecond), unanswered, p99(lat).Round(time.Millisecond))
	if grown > 64<<20 {
		t.Errorf("RSS grew %d MiB, over 64 MiB", grown>>20)
	}
	if unanswered > 0 {
		t.Errorf("%d stalled connections were not closed within 30 s (longest %s)", unanswered, longest)
	}
	if p99(lat) >= time.Second {
		t.Errorf("signed webhooks' p99 %s, want < 1 s", p99(lat))
	}
}

// emptyResourceLogsBomb is a 16 MiB OTLP logs request of empty ResourceLogs
// (2 bytes each on the wire, some 100 in memory decoded), gzipped to ~16 KB.
func emptyResourceLogsBomb(t *testing.T) []byte {
	var buf bytes.Buffer
	zw, _ := gzip.NewWriterLevel(&buf, gzip.BestCompression)
	chunk := bytes.Repeat([]byte{0x0a, 0x00}, 1<<15)
	for range (16 << 20) / len(chunk) {
		_, _ = zw.Write(chunk)
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// stringBomb is a valid OTLP logs request of one record whose body is a
// string of nearly 16 MiB, gzipped to ~16 KB: few messages, many bytes.
func stringBomb(t *testing.T) []byte {
	req := &collogs.ExportLogsServiceRequest{ResourceLogs: []*logspb.ResourceLogs{{ScopeLogs: []*logspb.ScopeLogs{{
		LogRecords: []*logspb.LogRecord{{Body: &commonpb.AnyValue{Value: &commonpb.AnyValue_StringValue{
			StringValue: strings.Repeat("a", 16<<20-64)}}}}}}}}}
	raw, err := proto.Marshal(req)
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	zw, _ := gzip.NewWriterLevel(&buf, gzip.BestCompression)
	_, _ = zw.Write(raw)
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// TestOTLPDecodeBounded: four concurrent OTLP bodies, each 16 KB of gzip
// that decompress to 16 MiB of empty ResourceLogs, sent with a valid
// observability token. lkscore's RSS grows by at most 128 MiB, each is
// refused (413 for the elements, or 503 while the decoders are busy), and
// the daemon keeps serving: a real OTLP request and a signed webhook after
// them are answered 200. Four valid bodies of one 16 MiB string each (few
// messages, many bytes) are answered 200 with RSS growing at most 192 MiB:
// what two decoders hold of two bodies at the byte limit.
func TestOTLPDecodeBounded(t *testing.T) {
	if testing.Short() {
		t.Skip("abuse test: -short")
	}
	p := serveAlone(t)
	bomb := emptyResourceLogsBomb(t)
	token := testenv.Bearer(testenv.PythonToken(t, crashKey, crashSecret, true))
	otlp := func(body []byte, gz bool, ct string) (int, string) {
		req, _ := http.NewRequest(http.MethodPost, "http://"+p.http+"/observability/logs/otlp/v0", bytes.NewReader(body))
		req.Header.Set("Authorization", token)
		req.Header.Set("Content-Type", ct)
		if gz {
			req.Header.Set("Content-Encoding", "gzip")
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return 0, err.Error()
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	real := testenv.JSLogs("RM_otlp", "AJ_otlp", "bomb-agent", map[string]any{"msg": "AgentSession closed", "reason": "user_initiated"})
	if code, msg := otlp(real, false, "application/json"); code != 200 {
		t.Fatalf("a real OTLP request before: %d %s", code, msg)
	}
	base := rss(t, p.cmd.Process.Pid)
	stop := make(chan struct{})
	peak := peakRSS(t, p.cmd.Process.Pid, stop)
	var wg sync.WaitGroup
	var tooLarge, busy, other atomic.Int32
	for range 4 {
		wg.Go(func() {
			switch code, msg := otlp(bomb, true, "application/x-protobuf"); code {
			case http.StatusRequestEntityTooLarge:
				tooLarge.Add(1)
				if !strings.Contains(msg, "limits.otlp_elements") {
					t.Errorf("413 without the limit's name: %s", msg)
				}
			case http.StatusServiceUnavailable:
				busy.Add(1)
			default:
				other.Add(1)
				t.Errorf("the bomb got %d %s", code, msg)
			}
		})
	}
	wg.Wait()
	close(stop)
	grown := <-peak - base
	t.Logf("%d KB gzip → 16 MiB ×4: %d refused 413, %d 503; RSS %d MiB at rest, peak +%.1f MiB",
		len(bomb)>>10, tooLarge.Load(), busy.Load(), base>>20, float64(grown)/(1<<20))
	if grown > 128<<20 {
		t.Errorf("RSS grew %d MiB, over 128 MiB", grown>>20)
	}
	if tooLarge.Load() == 0 {
		t.Error("no bomb was refused for its elements")
	}
	if code, msg := otlp(real, false, "application/json"); code != 200 {
		t.Errorf("a real OTLP request after: %d %s", code, msg)
	}
	signedWebhooks(t, p.http, 5, 0)

	strBomb := stringBomb(t)
	base = rss(t, p.cmd.Process.Pid)
	stop = make(chan struct{})
	peak = peakRSS(t, p.cmd.Process.Pid, stop)
	var ok atomic.Int32
	for range 4 {
		wg.Go(func() {
			switch code, msg := otlp(strBomb, true, "application/x-protobuf"); code {
			case http.StatusOK:
				ok.Add(1)
			case http.StatusServiceUnavailable:
			default:
				t.Errorf("the string bomb got %d %s", code, msg)
			}
		})
	}
	wg.Wait()
	close(stop)
	grown = <-peak - base
	t.Logf("%d KB gzip → one 16 MiB string ×4: %d answered 200; RSS %d MiB at rest, peak +%.1f MiB",
		len(strBomb)>>10, ok.Load(), base>>20, float64(grown)/(1<<20))
	// A valid body at the byte limit is held twice while it decodes (the
	// body, the string copied out of it) by each of http.max_inflight_otlp
	// decoders: 4 × 16 MiB live, and the collector's slack on top.
	if grown > 192<<20 {
		t.Errorf("RSS grew %d MiB, over 192 MiB", grown>>20)
	}
	if code, msg := otlp(real, false, "application/json"); code != 200 {
		t.Errorf("a real OTLP request after the string bombs: %d %s", code, msg)
	}
}
