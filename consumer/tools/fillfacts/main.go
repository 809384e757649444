// Command fillfacts fills lkscore's session facts bucket with realistic,
// already-published entries, as a week of sessions leaves it, to measure
// start-up with a large history (README "Performance", docs/performance.md):
//
//	go run ./consumer/tools/fillfacts --nats-url nats://127.0.0.1:4222 --entries 1000000
//
// The bucket must exist (start lkscore serve against the server once). Each
// entry is a session lkscore has scored: its observations from a webhook and
// OTLP logs, its recording's place, published_at set. Like a running lkscore,
// it leaves the settler's low-water mark past them (settle.LowWaterKey).
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"strconv"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/lkscore/lkscore/consumer/internal/facts"
	"github.com/lkscore/lkscore/consumer/internal/settle"
	"github.com/lkscore/lkscore/wire"
)

func main() {
	url := flag.String("nats-url", "nats://127.0.0.1:4222", "NATS URL")
	entries := flag.Int("entries", 100_000, "entries to write")
	prefix := flag.String("stream-prefix", "LKSCORE", "nats.stream_prefix")
	deleteMark := flag.Bool("delete-mark", false, "only delete the settler's low-water mark (as before an upgrade to a version that keeps it)")
	flag.Parse()
	if *deleteMark {
		*entries = -1
	}
	if err := fill(*url, *prefix, *entries); err != nil {
		fmt.Fprintln(os.Stderr, "fillfacts:", err)
		os.Exit(1)
	}
}

func fill(url, prefix string, n int) error {
	nc, err := nats.Connect(url)
	if err != nil {
		return err
	}
	defer nc.Close()
	js, err := jetstream.New(nc, jetstream.WithPublishAsyncMaxPending(4096))
	if err != nil {
		return err
	}
	ctx := context.Background()
	bucket := wire.NewSubjects("lkscore.", prefix).SessionFacts()
	kv, err := js.KeyValue(ctx, bucket)
	if err != nil {
		return fmt.Errorf("bucket %s (start lkscore serve once first): %w", bucket, err)
	}
	if n < 0 {
		return kv.Purge(ctx, settle.LowWaterKey)
	}
	start := time.Now()
	run := start.UnixNano()
	published := start.Add(-time.Hour).UTC()
	var bytes int
	for i := range n {
		room, job := fmt.Sprintf("RM_fill%d_%08d", run%100000, i), fmt.Sprintf("AJ_fill%d_%08d", run%100000, i)
		f := facts.SessionFacts{RoomID: room, JobID: job, RoomJoined: true,
			Observations: []facts.Observation{
				{Field: "agent_name", Value: "booking-agent", Source: "webhook"},
				{Field: "close_reason", Value: "CR_USER_INITIATED", Source: "otlp_log", Evidence: "otlp_log: AgentSession closed reason=user_initiated"},
				{Field: "deployment_id", Value: "dep_2026_11_25", Source: "webhook"},
				{Field: "job_status", Value: "JS_SUCCESS", Source: "webhook"},
				{Field: "sdk_language", Value: "nodejs", Source: "otlp", Evidence: "OTLP/JSON log export"},
				{Field: "sdk_version", Value: "1.9.0", Source: "otlp", Evidence: "session report sdk_version"},
				{Field: "tag", Value: "version:1.4.2", Source: "otlp"},
			},
			Recording: &facts.RecordingRef{SessionKey: room + "/" + job, Dir: room + "/" + job + "/",
				Location: "s3://recordings/lkscore/" + room + "/" + job + "/", Origin: "upload"},
			JobEnded: true, LastInputAt: published.Add(-20 * time.Second), PublishedAt: &published,
		}
		data, err := json.Marshal(f)
		if err != nil {
			return err
		}
		bytes += len(data)
		if _, err := js.PublishAsync("$KV."+bucket+"."+room+"."+job, data); err != nil {
			return err
		}
		if i%50_000 == 49_999 {
			<-js.PublishAsyncComplete()
			fmt.Fprintf(os.Stderr, "%d entries, %.0f/s\n", i+1, float64(i+1)/time.Since(start).Seconds())
		}
	}
	select {
	case <-js.PublishAsyncComplete():
	case <-time.After(time.Minute):
		return fmt.Errorf("publishes not acknowledged within a minute")
	}
	// Past every entry written: as the settler of a running lkscore leaves it.
	st, err := kv.Status(ctx)
	if err != nil {
		return err
	}
	info := st.(*jetstream.KeyValueBucketStatus).StreamInfo()
	if _, err := kv.Put(ctx, settle.LowWaterKey, []byte(strconv.FormatUint(info.State.LastSeq+1, 10))); err != nil {
		return err
	}
	fmt.Printf("%d entries (%.0f MB) in %s in %.1f s\n", n, float64(bytes)/1e6, bucket, time.Since(start).Seconds())
	return nil
}
