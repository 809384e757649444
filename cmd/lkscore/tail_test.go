package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/livekit/protocol/livekit"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/lkscore/lkscore/config"
	"github.com/lkscore/lkscore/consumer"
	"github.com/lkscore/lkscore/internal/population"
	"github.com/lkscore/lkscore/internal/sdkclient"
	"github.com/lkscore/lkscore/internal/testenv"
	"github.com/lkscore/lkscore/recording"
	"github.com/lkscore/lkscore/scenarios"
	"github.com/lkscore/lkscore/scoring"
	"github.com/lkscore/lkscore/wire"
)

// startTestDaemon runs the daemon in process on the embedded default.
func startTestDaemon(t *testing.T) (*consumer.Daemon, *sdkclient.Sender) {
	d, snd, _ := startTestDaemonIn(t, t.TempDir())
	return d, snd
}

func startTestDaemonIn(t *testing.T, dataDir string, opts ...func(*config.Config)) (*consumer.Daemon, *sdkclient.Sender, config.Config) {
	t.Helper()
	cfg := config.Default()
	cfg.Listen, cfg.OpsListen, cfg.DataDir, cfg.NATS.EmbeddedPort = "127.0.0.1:0", "127.0.0.1:0", dataDir, -1
	cfg.LiveKit.Keys = map[string]string{"APItail": "tail-secret-0123456789"}
	cfg.Pipeline.CloseReasons = config.CloseReasons()
	for _, o := range opts {
		o(&cfg)
	}
	reg := serveRegistry(cfg) // as `lkscore serve` has it
	d, err := consumer.New(cfg, slog.New(slog.NewTextHandler(io.Discard, nil)), reg, reg)
	if err != nil {
		t.Fatal(err)
	}
	if err := d.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = d.Shutdown(ctx)
	})
	return d, sdkclient.New("http://"+d.IngestAddr(), "APItail", "tail-secret-0123456789"), cfg
}

// sendScenario sends one scenario's upload, webhook and close log.
func sendScenario(t *testing.T, snd *sdkclient.Sender, name string) {
	t.Helper()
	sendScenarioAs(t, snd, name, "tail-agent")
}

// sendScenarioAs is sendScenario with the agent's name, and a stereo
// recording.ogg when ogg is given.
func sendScenarioAs(t *testing.T, snd *sdkclient.Sender, name, agent string, ogg ...[]byte) {
	t.Helper()
	all, _ := scenarios.All()
	for _, sc := range all {
		if sc.Name != name {
			continue
		}
		hdr, err := recording.ParseHeader(sc.Header, recording.DefaultMaxHeaderBytes)
		if err != nil {
			t.Fatal(err)
		}
		ctx := context.Background()
		ev := &livekit.WebhookEvent{Event: "agent_job_ended", Id: "EV_" + name, Job: &livekit.Job{Id: hdr.JobId, AgentName: agent,
			Room: &livekit.Room{Sid: hdr.RoomId}, State: &livekit.JobState{Status: livekit.JobStatus_JS_SUCCESS}}}
		for _, err := range []error{snd.Upload(ctx, sc.Header, sc.Chat, ogg...), snd.Webhook(ctx, ev), snd.CloseLog(ctx, hdr.RoomId, hdr.JobId, agent, "user_initiated")} {
			if err != nil {
				t.Fatal(err)
			}
		}
		return
	}
	t.Fatalf("no scenario %s", name)
}

func runTail(ctx context.Context, natsURL string, args ...string) (int, string, string) {
	var stdout, stderr bytes.Buffer
	code := run(ctx, append([]string{"lkscore", "tail", "--nats-url", natsURL}, args...), func(string) string { return "" }, &stdout, &stderr)
	return code, stdout.String(), stderr.String()
}

// TestTail: tail follows scorecards as they arrive, filters them, and
// replays from a point in time.
func TestTail(t *testing.T) {
	d, snd := startTestDaemon(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	type result struct {
		code        int
		out, stderr string
	}
	follow := make(chan result, 1)
	go func() {
		code, out, stderr := runTail(ctx, d.NATSURL(), "--limit", "2")
		follow <- result{code, out, stderr}
	}()
	fails := make(chan result, 1)
	go func() {
		code, out, stderr := runTail(ctx, d.NATSURL(), "--verdict", "fail", "--json", "--limit", "1")
		fails <- result{code, out, stderr}
	}()
	time.Sleep(500 * time.Millisecond) // both consumers exist: "new" starts now
	sendScenario(t, snd, "1_clean_call")
	sendScenario(t, snd, "6_error_close") // fails: CR_ERROR

	r := <-follow
	lines := strings.Split(strings.TrimSpace(r.out), "\n")
	if r.code != 0 || len(lines) != 2 || !strings.Contains(r.out, "RM_CleanCall01/AJ_CleanCall01") || !strings.Contains(r.out, "tail-agent") {
		t.Fatalf("follow: exit %d, %q, %s", r.code, r.out, r.stderr)
	}
	r = <-fails
	var sc struct {
		Overall struct{ Verdict string } `json:"overall"`
	}
	if r.code != 0 || json.Unmarshal([]byte(strings.TrimSpace(r.out)), &sc) != nil || sc.Overall.Verdict != "fail" {
		t.Fatalf("--verdict fail --json: exit %d, %q, %s", r.code, r.out, r.stderr)
	}

	// Replay: --since 1m replays both, filtered by close reason on the server.
	code, out, stderr := runTail(ctx, d.NATSURL(), "--since", "1m", "--close-reason", "CR_PARTICIPANT_DISCONNECTED", "--limit", "1")
	if code != 0 || strings.Count(out, "\n") != 1 || !strings.Contains(out, "RM_CleanCall01") {
		t.Fatalf("--since: exit %d, %q, %s", code, out, stderr)
	}
	code, out, stderr = runTail(ctx, d.NATSURL(), "--since", "1m", "--close-reason", "CR_ERROR", "--limit", "1")
	if code != 0 || !strings.Contains(out, "RM_ErrorClose06") || !strings.Contains(out, "fail") {
		t.Fatalf("--close-reason CR_ERROR: exit %d, %q, %s", code, out, stderr)
	}
	if code, _, stderr := runTail(ctx, d.NATSURL(), "--verdict", "great"); code != 2 || !strings.Contains(stderr, "great") {
		t.Errorf("bad --verdict: exit %d, %s", code, stderr)
	}
}

// testQuiet is the tests' --quiet-after: long enough for a fetch or two.
const testQuiet = 1500 * time.Millisecond

// TestTailSaysWhatItWaitsOn: after a few quiet seconds tail tells, once, on
// stderr, what it follows and how to send a test session; stdout stays
// for scorecards.
func TestTailSaysWhatItWaitsOn(t *testing.T) {
	t.Parallel()
	d, _ := startTestDaemon(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	stop := time.AfterFunc(testQuiet+2*time.Second, cancel) // as Ctrl-C would
	defer stop.Stop()
	code, out, stderr := runTail(ctx, d.NATSURL(), "--quiet-after", testQuiet.String())
	if code != 0 || out != "" || strings.Count(stderr, "no scorecards in LKSCORE_RESULTS yet") != 1 ||
		!strings.Contains(stderr, "lkscore bench --sessions 5 --url http://") {
		t.Errorf("exit %d, stdout %q, stderr %q", code, out, stderr)
	}
}

// TestTailAlerts: tail --alerts prints the alerts on the alert stream.
func TestTailAlerts(t *testing.T) {
	d, _ := startTestDaemon(t)
	js := testenv.JetStream(t, d.NATSURL())
	subj := wire.NewSubjects("lkscore.", "LKSCORE")
	a := wire.Alert{ID: "regression/booking/2/x/e2e_latency_p50_ms@9", Kind: "regression", Status: "firing", Agent: "booking", Version: "2",
		Metric: "e2e_latency_p50_ms", Baseline: 950, Current: 1400, Effect: 450, QValue: 0.001, Test: "mann_whitney_u",
		NBaseline: 40, NCurrent: 30, BaselineOf: "version 1", At: time.Now()}
	data, _ := json.Marshal(a)
	msg := nats.NewMsg(subj.Alert(a.Kind, a.Agent))
	msg.Data = data
	msg.Header.Set(wire.HeaderAgentName, a.Agent) // as the detector publishes it
	if _, err := js.PublishMsg(context.Background(), msg); err != nil {
		t.Fatal(err)
	}
	code, out, errs := runCLI(t, "tail", "--alerts", "--since", "1h", "--limit", "1", "--agent", "booking", "--nats-url", d.NATSURL())
	if code != 0 || !strings.Contains(out, "firing") || !strings.Contains(out, "booking@2") || !strings.Contains(out, "e2e_latency_p50_ms: 950 → 1400") {
		t.Fatalf("exit %d\n%s%s", code, out, errs)
	}
}

// TestTailSinceSaysWhatItReplayed: tail --since says how many scorecards it
// replayed before following new ones; when nothing is newer than --since,
// its quiet message says how many older ones the stream holds instead of
// "no scorecards yet".
func TestTailSinceSaysWhatItReplayed(t *testing.T) {
	t.Parallel()
	d, _ := startTestDaemon(t)
	js := testenv.JetStream(t, d.NATSURL())
	scorer, err := scoring.NewScorer(scoring.DefaultConfig())
	if err != nil {
		t.Fatal(err)
	}
	testenv.PublishCards(t, js, population.Generate(scorer, population.Baseline("since-agent", "1"), 3, 2), 0)
	run := func(args ...string) (int, string, string) {
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		stop := time.AfterFunc(testQuiet+2*time.Second, cancel)
		defer stop.Stop()
		return runTail(ctx, d.NATSURL(), append(args, "--quiet-after", testQuiet.String())...)
	}
	// Both at once: each follows on its own.
	later := time.Now().Add(time.Second).UTC().Format(time.RFC3339)
	type result struct {
		code        int
		out, stderr string
	}
	replay := make(chan result, 1)
	go func() {
		code, out, stderr := run("--since", "1h")
		replay <- result{code, out, stderr}
	}()
	code, out, stderr := run("--since", later)
	if r := <-replay; r.code != 0 || strings.Count(r.out, "\n") != 2 || !strings.Contains(r.stderr, "tail: replayed 2 since") {
		t.Errorf("--since 1h: exit %d, stdout %q, stderr %q", r.code, r.out, r.stderr)
	}
	if code != 0 || out != "" || !strings.Contains(stderr, "nothing matched since") || !strings.Contains(stderr, "holds 2 scorecards") ||
		strings.Contains(stderr, "no scorecards in") {
		t.Errorf("--since %s: exit %d, stdout %q, stderr %q", later, code, out, stderr)
	}
}

// TestTailThroughNATSRestart (issue 71): the NATS server tail follows
// shuts down and comes back (as the daemon's embedded server does when
// lkscore serve restarts): tail says so on stderr, follows again from the
// scorecard after the last one it showed, and shows each one once.
func TestTailThroughNATSRestart(t *testing.T) {
	ns := testenv.StartNATS(t)
	js := testenv.JetStream(t, ns.URL())
	subj := wire.NewSubjects("lkscore.", "LKSCORE")
	if _, err := js.CreateStream(context.Background(), jetstream.StreamConfig{Name: subj.ResultStream(),
		Subjects: []string{subj.Result("*")}, Storage: jetstream.FileStorage}); err != nil {
		t.Fatal(err)
	}
	scorer, err := scoring.NewScorer(scoring.DefaultConfig())
	if err != nil {
		t.Fatal(err)
	}
	cards := population.Generate(scorer, population.Clean("tail-agent", "1"), 5, 2)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var stdout, stderr testenv.SyncBuffer
	done := make(chan int, 1)
	go func() {
		done <- run(ctx, []string{"lkscore", "tail", "--nats-url", ns.URL(), "--limit", "2"}, func(string) string { return "" }, &stdout, &stderr)
	}()
	time.Sleep(500 * time.Millisecond) // tail follows new scorecards from here
	testenv.PublishCards(t, js, cards[:1], 0)
	testenv.WaitFor(t, 10*time.Second, "the first scorecard", func() bool { return strings.Contains(stdout.String(), cards[0].Session.Key) })

	ns.Stop()
	time.Sleep(time.Second)
	ns.Start()
	testenv.PublishCards(t, testenv.JetStream(t, ns.URL()), cards[1:], 0)
	select {
	case code := <-done:
		out := stdout.String()
		if code != 0 || strings.Count(out, cards[0].Session.Key) != 1 || strings.Count(out, cards[1].Session.Key) != 1 {
			t.Fatalf("tail through a NATS restart: exit %d\n%s\n%s", code, out, stderr.String())
		}
	case <-ctx.Done():
		t.Fatalf("tail did not show the scorecard after the restart\n%s\n%s", stdout.String(), stderr.String())
	}
	if e := stderr.String(); !strings.Contains(e, "lost NATS") || !strings.Contains(e, "NATS is back") {
		t.Errorf("tail did not say it lost NATS and followed again: %s", e)
	}
}
