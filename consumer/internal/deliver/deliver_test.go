package deliver

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/lkscore/lkscore/config"
	"github.com/lkscore/lkscore/consumer/broker"
	"github.com/lkscore/lkscore/consumer/internal/failure"
	"github.com/lkscore/lkscore/consumer/internal/metrics"
	"github.com/lkscore/lkscore/wire"
)

// alertMsg is a delivered alert: only its data is read.
type alertMsg struct {
	jetstream.Msg
	data []byte
}

func (m alertMsg) Data() []byte         { return m.data }
func (m alertMsg) Headers() nats.Header { return nats.Header{} }

// TestTargetHandle: a webhook target delivers an alert's JSON as it is on
// NATS; a receiver's 5xx or 429 is retried, a 4xx is refused for good
// (dead-lettered by the stage), a message that is not an alert is
// permanent; each outcome is counted.
func TestTargetHandle(t *testing.T) {
	t.Parallel()
	var status atomic.Int32
	var got atomic.Value // []byte: the last body the receiver got
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		got.Store(b)
		w.WriteHeader(int(status.Load()))
	}))
	defer srv.Close()
	m := metrics.NewPipeline(nil)
	env := broker.Env{Log: slog.New(slog.NewTextHandler(io.Discard, nil)), Now: time.Now}
	targets, err := Targets(env, Options{Client: srv.Client(), Metrics: m.AlertDelivery(),
		Alerts: config.Alerts{Timeout: 5 * time.Second, Webhooks: []config.AlertWebhook{{URL: srv.URL + "/hook", Format: "json"}}}})
	if err != nil {
		t.Fatal(err)
	}
	if len(targets) != 1 || targets[0].Name() != "webhook-1" || targets[0].ID() != wire.NotifyConsumer("webhook", srv.URL+"/hook") {
		t.Fatalf("targets: %d, %+v", len(targets), targets)
	}
	tg := targets[0]
	alert, _ := json.Marshal(wire.Alert{ID: "regression/booking/2/1.4.0/overall@7", Kind: "regression", Status: "firing", Agent: "booking",
		Metric: "overall", Baseline: 92, Current: 71})
	for _, tc := range []struct {
		status    int
		data      []byte
		permanent bool
		ok        bool
		outcome   string
	}{
		{status: 200, data: alert, ok: true, outcome: "delivered"},
		{status: 503, data: alert, outcome: "retry"},
		{status: 429, data: alert, outcome: "retry"},
		{status: 400, data: alert, permanent: true, outcome: "refused"},
		{status: 200, data: []byte("not json"), permanent: true},
	} {
		status.Store(int32(tc.status))
		got.Store([]byte(nil))
		before := map[string]float64{}
		for _, o := range []string{"delivered", "retry", "refused"} {
			before[o] = testutil.ToFloat64(m.Deliveries.WithLabelValues(tg.Name(), o))
		}
		err := tg.Handle(context.Background(), alertMsg{data: tc.data})
		if (err == nil) != tc.ok || errors.Is(err, failure.ErrNotYet) ||
			(err != nil && (failure.Classify(err).Kind == failure.KindPermanent) != tc.permanent) {
			t.Errorf("status %d, %q: err %v (permanent %v), want ok %v permanent %v", tc.status, tc.data, err,
				err != nil && failure.Classify(err).Kind == failure.KindPermanent, tc.ok, tc.permanent)
		}
		if body, _ := got.Load().([]byte); tc.ok && !bytes.Equal(body, tc.data) {
			t.Errorf("the receiver got %s, want the alert as on NATS %s", body, tc.data)
		}
		for _, o := range []string{"delivered", "retry", "refused"} {
			want := before[o]
			if o == tc.outcome {
				want++
			}
			if v := testutil.ToFloat64(m.Deliveries.WithLabelValues(tg.Name(), o)); v != want {
				t.Errorf("status %d: deliveries{%s} = %v, want %v", tc.status, o, v, want)
			}
		}
	}
}
