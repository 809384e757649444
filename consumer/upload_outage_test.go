package consumer

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/livekit/protocol/livekit"

	"github.com/lkscore/lkscore/internal/testenv"
	"github.com/lkscore/lkscore/store"
)

// uploadDisablers are what the SDKs look for in a 401's body to stop
// uploading for good (agents-py telemetry/traces.py _UploadGate, agents-js
// telemetry/upload_gate.js DISABLED_MARKERS): no lkscore answer may carry them.
var uploadDisablers = []string{"data recording is disabled", "disabled by owner"}

// answer is one of lkscore's answers the recording proxy saw.
type answer struct {
	path   string
	status int
	body   []byte
}

// recordingProxy stands between the SDK and lkscore's ingest and keeps every
// answer, body included.
type recordingProxy struct {
	mu      sync.Mutex
	answers []answer
}

func (p *recordingProxy) start(t *testing.T, target string) string {
	t.Helper()
	u, err := url.Parse(target)
	if err != nil {
		t.Fatal(err)
	}
	rp := httputil.NewSingleHostReverseProxy(u)
	rp.ModifyResponse = func(r *http.Response) error {
		body, err := io.ReadAll(r.Body)
		if err != nil {
			return err
		}
		r.Body = io.NopCloser(bytes.NewReader(body))
		p.mu.Lock()
		p.answers = append(p.answers, answer{path: r.Request.URL.Path, status: r.StatusCode, body: body})
		p.mu.Unlock()
		return nil
	}
	srv := httptest.NewServer(rp)
	t.Cleanup(srv.Close)
	return srv.URL
}

func (p *recordingProxy) seen() []answer {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]answer(nil), p.answers...)
}

// TestAgentsJSUploadThroughOutage: the real agents-js SDK (1.9.0) ends a
// call while one of lkscore's dependencies is down, the recording store
// (S3, versitygw) or NATS; it comes back once the SDK's upload was refused.
//
// The SDK posts the session report logs first, once, and gives the upload
// up if they are refused (telemetry/traces.js uploadSessionReport); then
// the upload, retried only on RetryInfo or a connection failure, at most
// four times (telemetry/recording_upload.js). With the store down the logs
// land (NATS is up) and the upload gets 503 with RetryInfo until the store
// is back. With NATS down the logs' facts are spooled into the store and
// answered 200 (package spool; a 503 there lost the whole session), and the
// upload gets 503 with RetryInfo until NATS is back. Either way the session
// is scored exactly once, with its recording and the close reason of the
// SDK's log, and no answer lkscore gave holds a phrase that makes an SDK
// switch uploads off, nor a final 4xx.
func TestAgentsJSUploadThroughOutage(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: runs the real agents-js SDK in Node")
	}
	for _, down := range []string{"store", "nats"} {
		t.Run(down, func(t *testing.T) { uploadThroughOutage(t, down) })
	}
}

func uploadThroughOutage(t *testing.T, down string) {
	dir, node := agentsJS(t)
	srv := testenv.StartS3(t)
	testenv.SetAWSEnv(t, testenv.S3SecretKey)
	testenv.OpenBucket(t, srv, "rec", store.NewS3)
	ns := startNATS(t)
	cfg := pipelineConfig(t, ns.URL())
	cfg.S3 = srv.Config("rec")
	cfg.S3.MaxAttempts, cfg.S3.RequestTimeout = 1, time.Second
	cfg.Pipeline.HealthInterval = 200 * time.Millisecond
	d, reg := startDaemon(t, cfg)
	var proxy recordingProxy
	lkURL := proxy.start(t, "http://"+d.IngestAddr())
	room := "RM_Outage" + down

	stop, start := srv.Stop, func() { srv.Start(t) }
	if down == "nats" {
		stop, start = ns.Stop, ns.Start
	}
	stop()
	if down == "nats" {
		testenv.WaitFor(t, 10*time.Second, "ingest to see NATS down", func() bool { return readyz(t, d) != http.StatusOK })
	}
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, node, "session.mjs")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "LKSCORE_URL="+lkURL, "ROOM_ID="+room, "JOB_ID=AJ_Outage",
		"LIVEKIT_API_KEY="+testenv.Key, "LIVEKIT_API_SECRET="+testenv.Secret)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			for _, a := range proxy.seen() {
				t.Logf("answer %s %d %.200q", a.path, a.status, a.body)
			}
			t.Logf("agents-js output:\n%s", out.String())
		}
	})
	refused := func() bool {
		for _, a := range proxy.seen() {
			if a.path == "/observability/recordings/v0" && a.status == http.StatusServiceUnavailable {
				return true
			}
		}
		return false
	}
	testenv.WaitFor(t, 30*time.Second, "the upload refused while the "+down+" is down", refused)
	start()
	if err := cmd.Wait(); err != nil || !strings.Contains(out.String(), "session sent") {
		t.Fatalf("agents-js: %v\n%s", err, out.String())
	}
	testenv.WaitFor(t, 20*time.Second, "ingest ready again", func() bool { return readyz(t, d) == http.StatusOK })
	sendWebhook(t, d, jobEnded("EV_outage"+down, room, "AJ_Outage", "js-agent", livekit.JobStatus_JS_SUCCESS))

	cards := oneCardEach(t, d.NATSURL(), room)
	c := cards[room]
	if got := strings.Join(c.Inputs, ","); !strings.HasPrefix(got, "recording,logs") || c.Completion.CloseReason != "CR_USER_INITIATED" ||
		c.Session.SDK == nil || c.Session.SDK.Version != "1.9.0" {
		t.Errorf("inputs %q, close reason %s, sdk %+v: the retried upload or the logs' facts did not land", got, c.Completion.CloseReason, c.Session.SDK)
	}
	if down == "nats" {
		if n := counter(t, reg, "lkscore_otlp_spooled_total", map[string]string{"signal": "logs"}); n < 1 {
			t.Errorf("%v logs requests spooled during the NATS outage", n)
		}
		testenv.WaitFor(t, 30*time.Second, "the spool drained", func() bool {
			return counter(t, reg, "lkscore_otlp_spool_drained_total", map[string]string{"signal": "logs"}) ==
				counter(t, reg, "lkscore_otlp_spooled_total", map[string]string{"signal": "logs"})
		})
	}
	var uploads []string
	for _, a := range proxy.seen() {
		if a.path == "/observability/recordings/v0" {
			uploads = append(uploads, fmt.Sprint(a.status))
		}
		if a.status >= 400 && a.status != http.StatusServiceUnavailable && a.status != http.StatusTooManyRequests {
			t.Errorf("%s answered %d during an outage: the SDK gives up on it (%q)", a.path, a.status, a.body)
		}
		for _, phrase := range uploadDisablers {
			if strings.Contains(strings.ToLower(string(a.body)), phrase) {
				t.Errorf("%s answered %d with %q, which switches the SDK's uploads off", a.path, a.status, phrase)
			}
		}
	}
	t.Logf("%s down: upload answers in order: %s", down, strings.Join(uploads, ", "))
	if len(uploads) < 2 || uploads[len(uploads)-1] != "200" {
		t.Errorf("upload answers %v: want refusals, then a 200", uploads)
	}
}
