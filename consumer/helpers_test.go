package consumer

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"net/http"
	"os"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/lkscore/lkscore/config"
	"github.com/lkscore/lkscore/internal/testenv"
)

func startNATS(t testing.TB) *testenv.NATS { return testenv.StartNATS(t) }

// testConfig is a valid config on random loopback ports against url.
func testConfig(t testing.TB, url string) config.Config {
	t.Helper()
	cfg := config.Default()
	cfg.Listen = "127.0.0.1:0"
	cfg.OpsListen = "127.0.0.1:0"
	cfg.DataDir = t.TempDir()
	cfg.NATS.URL = url
	cfg.NATS.EmbeddedPort = -1
	cfg.LiveKit.Keys = map[string]string{testenv.Key: testenv.Secret}
	return cfg
}

// startDaemon starts a Daemon and stops it at cleanup.
func startDaemon(t testing.TB, cfg config.Config) (*Daemon, *prometheus.Registry) {
	t.Helper()
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	if testing.Verbose() {
		log = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	return startDaemonWith(t, cfg, log)
}

// startDaemonLogging is startDaemon with the daemon's JSON logs, from level
// up, kept for the test to read.
func startDaemonLogging(t testing.TB, cfg config.Config, level slog.Level) (*Daemon, *prometheus.Registry, *syncBuffer) {
	t.Helper()
	logs := &syncBuffer{}
	d, reg := startDaemonWith(t, cfg, slog.New(slog.NewJSONHandler(logs, &slog.HandlerOptions{Level: level})))
	return d, reg, logs
}

func startDaemonWith(t testing.TB, cfg config.Config, log *slog.Logger) (*Daemon, *prometheus.Registry) {
	t.Helper()
	reg := prometheus.NewRegistry()
	d, err := New(cfg, log, reg, reg)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	if err := d.Start(context.Background()); err != nil {
		t.Fatalf("Start: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := d.Shutdown(ctx); err != nil {
			t.Errorf("Shutdown: %v", err)
		}
	})
	return d, reg
}

// streamMsgs returns every message in a stream, in order.
func streamMsgs(t testing.TB, url, stream string) []*jetstream.RawStreamMsg {
	t.Helper()
	nc, err := nats.Connect(url)
	if err != nil {
		t.Fatalf("connect: %v", err)
	}
	defer nc.Close()
	js, _ := jetstream.New(nc)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	s, err := js.Stream(ctx, stream)
	if err != nil {
		t.Fatalf("stream %s: %v", stream, err)
	}
	info, err := s.Info(ctx)
	if err != nil {
		t.Fatalf("stream info: %v", err)
	}
	var out []*jetstream.RawStreamMsg
	for seq := info.State.FirstSeq; seq <= info.State.LastSeq && info.State.Msgs > 0; seq++ {
		m, err := s.GetMsg(ctx, seq)
		if err != nil {
			t.Fatalf("get msg %d: %v", seq, err)
		}
		out = append(out, m)
	}
	return out
}

func post(t testing.TB, url, auth, contentType string, body io.Reader) (*http.Response, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, url, body)
	if err != nil {
		t.Fatal(err)
	}
	if auth != "" {
		req.Header.Set("Authorization", auth)
	}
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("POST %s: %v", url, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp, string(b)
}

// counter reads a counter's value from reg, summing series whose labels contain all of want.
func counter(t testing.TB, reg *prometheus.Registry, name string, want map[string]string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var sum float64
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			if labelsMatch(m, want) {
				sum += m.GetCounter().GetValue()
			}
		}
	}
	return sum
}

func labelsMatch(m *dto.Metric, want map[string]string) bool {
	got := map[string]string{}
	for _, lp := range m.GetLabel() {
		got[lp.GetName()] = lp.GetValue()
	}
	for k, v := range want {
		if got[k] != v {
			return false
		}
	}
	return true
}

// gauge reads a gauge's value (-1 when absent).
func gauge(t testing.TB, reg *prometheus.Registry, name string, want map[string]string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			if labelsMatch(m, want) {
				return m.GetGauge().GetValue()
			}
		}
	}
	return -1
}

// readyz answers the daemon's /readyz status code.
func readyz(t testing.TB, d *Daemon) int {
	t.Helper()
	resp, err := http.Get("http://" + d.opsLn.Addr().String() + "/readyz")
	if err != nil {
		t.Fatal(err)
	}
	_ = resp.Body.Close()
	return resp.StatusCode
}

type syncBuffer = testenv.SyncBuffer

// checkSchema validates every published scorecard against
// docs/scorecard.schema.json.
func checkSchema(t *testing.T, url string) {
	t.Helper()
	checkStreamSchema(t, url, "LKSCORE_RESULTS", "../docs/scorecard.schema.json")
}

// checkStreamSchema validates every message of a stream against a schema.
func checkStreamSchema(t *testing.T, url, stream, schemaPath string) {
	t.Helper()
	for _, m := range streamMsgs(t, url, stream) {
		checkJSONSchema(t, schemaPath, m.Data)
	}
}

// checkAlertSchema validates one alert message.
func checkAlertSchema(t *testing.T, data []byte) {
	t.Helper()
	checkJSONSchema(t, "../docs/alert.schema.json", data)
}

func checkJSONSchema(t *testing.T, schemaPath string, data []byte) {
	t.Helper()
	schema, err := jsonschema.NewCompiler().Compile(schemaPath)
	if err != nil {
		t.Fatal(err)
	}
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(data))
	if err != nil {
		t.Fatal(err)
	}
	if err := schema.Validate(doc); err != nil {
		t.Errorf("message does not match %s: %v\n%s", schemaPath, err, data)
	}
}

// settleWait is how long the daemon tests wait for a pipeline to get somewhere.
const settleWait = 15 * time.Second

// waitConsumerIdle waits until a durable consumer has nothing pending and
// nothing unacknowledged.
func waitConsumerIdle(t *testing.T, url, stream, durable string) {
	t.Helper()
	js := testenv.JetStream(t, url)
	testenv.WaitFor(t, settleWait, durable+" to be idle", func() bool {
		c, err := js.Consumer(context.Background(), stream, durable)
		if err != nil {
			return false
		}
		info, err := c.Info(context.Background())
		return err == nil && info.NumPending == 0 && info.NumAckPending == 0
	})
}
