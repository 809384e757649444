package seen

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/lkscore/lkscore/internal/testenv"
	"github.com/lkscore/lkscore/wire"
)

// TestTrackerCounts: accepted requests per endpoint and key, refusals per
// reason with the last key named, both on /metrics; unverified keys past
// the bound fold into one row.
func TestTrackerCounts(t *testing.T) {
	now := time.Date(2026, 12, 4, 10, 0, 0, 0, time.UTC)
	reg := prometheus.NewRegistry()
	tr := NewTracker(reg, func() time.Time { return now })
	tr.Accept("webhook", "APIa")
	now = now.Add(time.Second)
	tr.Accept("webhook", "APIa")
	tr.Accept("upload", "APIa")
	tr.Refuse("webhook", "bad_signature", "APIa")
	tr.Refuse("webhook", "bad_signature", "APIb")
	rep := tr.Report("p", "all")
	if len(rep.Accepted) != 2 || rep.Accepted[1].Endpoint != "webhook" || rep.Accepted[1].Count != 2 || !rep.Accepted[1].Last.Equal(now) {
		t.Errorf("accepted %+v", rep.Accepted)
	}
	if len(rep.Refused) != 1 || rep.Refused[0].Count != 2 || rep.Refused[0].LastKey != "APIb" {
		t.Errorf("refused %+v", rep.Refused)
	}
	if got := testutil.ToFloat64(tr.refused.WithLabelValues("webhook", "bad_signature")); got != 2 {
		t.Errorf("lkscore_ingest_refused_total %v", got)
	}
	if got := testutil.ToFloat64(tr.last.WithLabelValues("webhook", "APIa")); got != float64(now.Unix()) {
		t.Errorf("lkscore_ingest_last_accepted_timestamp_seconds %v", got)
	}
	for i := range 2 * maxRows {
		tr.Accept("otlp_logs", fmt.Sprint("K", i))
	}
	if rep := tr.Report("p", "all"); len(rep.Accepted) > maxRows+1 || rep.Accepted[len(rep.Accepted)-1].APIKey == "" {
		t.Errorf("%d accepted rows past the bound", len(rep.Accepted))
	}
	if n := testutil.CollectAndCount(tr.last); n > maxRows+1 {
		t.Errorf("%d metric series past the bound", n)
	}
}

// TestGatherAsksEveryProcess: over a real NATS server, two processes'
// reports come back to one request, with the waits one of them lists.
func TestGatherAsksEveryProcess(t *testing.T) {
	ns := testenv.StartNATS(t)
	subject := wire.Default().Ingestion()
	for i, role := range []string{"ingest", "worker"} {
		nc, err := nats.Connect(ns.URL())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(nc.Close)
		tr := NewTracker(nil, nil)
		if role == "ingest" {
			tr.Accept("webhook", "APIa")
		} else {
			at := time.Now().Add(-time.Minute)
			tr.WatchWaiting(func() ([]wire.IngestWaiting, int) {
				return Oldest(map[string]time.Time{"RM_b.AJ_b": at.Add(time.Second), "RM_a.AJ_a": at, "RM_c.AJ_c": at.Add(2 * time.Second)}, 2)
			})
		}
		if _, err := Serve(nc, subject, func() wire.IngestionReport { return tr.Report(fmt.Sprint("p", i), role) }); err != nil {
			t.Fatal(err)
		}
		if err := nc.Flush(); err != nil {
			t.Fatal(err)
		}
	}
	nc, err := nats.Connect(ns.URL())
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	reps, err := Gather(context.Background(), nc, subject, 300*time.Millisecond)
	if err != nil || len(reps) != 2 {
		t.Fatalf("%v: %d reports", err, len(reps))
	}
	if reps[0].Process != "p0" || len(reps[0].Accepted) != 1 || reps[1].WaitingTotal != 3 || len(reps[1].Waiting) != 2 ||
		reps[1].Waiting[0].Key != "RM_a.AJ_a" || !strings.HasPrefix(reps[1].Waiting[1].Key, "RM_b") {
		t.Errorf("reports %+v", reps)
	}
}
