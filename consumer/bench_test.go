package consumer

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"runtime"
	"sync/atomic"
	"testing"
	"time"

	"github.com/livekit/protocol/auth"
	"github.com/livekit/protocol/webhook"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/lkscore/lkscore/consumer/broker"
	"github.com/lkscore/lkscore/internal/testenv"
	"github.com/lkscore/lkscore/wire"
)

// The three benchmarks below are meant to run side by side in one run:
//
//	go test ./consumer -run '^$' -bench 'Webhook' -benchtime 40000x -count 5
//
// (a) BenchmarkWebhookHTTP: the full path over real HTTP with 64 concurrent
// senders (verify + durable publish + response); (b) BenchmarkWebhookVerify:
// livekit/protocol's verification alone, one goroutine; (c)
// BenchmarkWebhookPublish: a bare acknowledged JetStream publish of the same
// payload with a msg id, 64 concurrent publishers, same kind of server. The
// README reports (a) against the ceiling 1/(t_b + t_c).

const benchSenders = 64

type signedEvent struct {
	body []byte
	tok  string
}

// benchEvents pre-signs n distinct webhook events, so signing is not timed.
func benchEvents(b *testing.B, n int) []signedEvent {
	b.Helper()
	evs := make([]signedEvent, n)
	for i := range evs {
		body := []byte(fmt.Sprintf(`{"event":"room_finished","room":{"sid":"RM_bench%08d","name":"bench-room","creationTime":"1764417600","numParticipants":2},"id":"EV_bench_%08d_%d","createdAt":"1764417781"}`, i, i, time.Now().UnixNano()))
		evs[i] = signedEvent{body: body, tok: testenv.SignWebhook(b, testenv.Key, testenv.Secret, body, 5*time.Minute)}
	}
	return evs
}

func setParallel(b *testing.B, goroutines int) {
	// RunParallel starts parallelism × GOMAXPROCS goroutines.
	b.SetParallelism(max(1, goroutines/runtime.GOMAXPROCS(0)))
}

func BenchmarkWebhookHTTP(b *testing.B) {
	ns := startNATS(b)
	cfg := testConfig(b, ns.URL())
	cfg.Role = "ingest" // the ingest path alone; no locator competing for the cores
	d, _ := startDaemon(b, cfg)
	url := "http://" + d.IngestAddr() + "/webhook"
	client := &http.Client{Transport: &http.Transport{MaxIdleConns: 256, MaxIdleConnsPerHost: 256}}
	evs := benchEvents(b, b.N)
	var next, failed atomic.Int64
	setParallel(b, benchSenders)
	b.ReportAllocs()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			ev := evs[next.Add(1)-1]
			req, _ := http.NewRequest(http.MethodPost, url, bytes.NewReader(ev.body))
			req.Header.Set("Authorization", ev.tok)
			req.Header.Set("Content-Type", "application/webhook+json")
			resp, err := client.Do(req)
			if err != nil {
				failed.Add(1)
				continue
			}
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode != http.StatusOK {
				failed.Add(1)
			}
		}
	})
	b.StopTimer()
	if failed.Load() > 0 {
		b.Fatalf("%d of %d webhooks failed", failed.Load(), b.N)
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "events/s")
}

func BenchmarkWebhookVerify(b *testing.B) {
	evs := benchEvents(b, 1)
	kp := auth.NewSimpleKeyProvider(testenv.Key, testenv.Secret)
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		req := httptest.NewRequest(http.MethodPost, "/webhook", bytes.NewReader(evs[0].body))
		req.Header.Set("Authorization", evs[0].tok)
		if _, err := webhook.Receive(req, kp); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "events/s")
}

func BenchmarkWebhookPublish(b *testing.B) {
	ns := startNATS(b)
	cfg := testConfig(b, ns.URL())
	nc, err := nats.Connect(ns.URL())
	if err != nil {
		b.Fatal(err)
	}
	defer nc.Close()
	js, _ := jetstream.New(nc)
	subj := wire.NewSubjects(cfg.NATS.SubjectPrefix, cfg.NATS.StreamPrefix)
	if err := broker.EnsureStreams(context.Background(), js, subj, cfg, nil); err != nil {
		b.Fatal(err)
	}
	evs := benchEvents(b, 1)
	var next atomic.Int64
	setParallel(b, benchSenders)
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			i := next.Add(1)
			msg := nats.NewMsg(subj.Webhook("room_finished"))
			msg.Data = evs[0].body
			if _, err := js.PublishMsg(context.Background(), msg, jetstream.WithMsgID(fmt.Sprintf("EV_pub_%d", i))); err != nil {
				b.Error(err)
				return
			}
		}
	})
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "events/s")
}
