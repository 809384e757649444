package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"sort"
	"time"

	"github.com/livekit/protocol/livekit"
	"github.com/livekit/protocol/livekit/agent"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/urfave/cli/v3"

	"github.com/lkscore/lkscore/cmd/lkscore/offline"
	"github.com/lkscore/lkscore/config"
	"github.com/lkscore/lkscore/consumer"
	"github.com/lkscore/lkscore/internal/sdkclient"
	"github.com/lkscore/lkscore/recording"
	"github.com/lkscore/lkscore/scenarios"
	"github.com/lkscore/lkscore/session"
	"github.com/lkscore/lkscore/wire"
)

func demoCommand(stdout, stderr io.Writer) *cli.Command {
	return &cli.Command{
		Name:  "demo",
		Usage: "run the eight acceptance scenarios through a local daemon and print their scorecards",
		Description: "Starts the embedded default on free loopback ports (data in a temporary directory unless\n" +
			"--data-dir is given), sends the scenarios through the real HTTP paths (uploads and OTLP logs signed\n" +
			"as the agents SDKs sign them, agent_job_ended webhooks signed as LiveKit signs them, in both orders),\n" +
			"waits for the scorecards on NATS and prints them. Exit 0 only when all eight arrived with their\n" +
			"expected verdicts and close reasons.",
		Flags: []cli.Flag{
			&cli.BoolFlag{Name: "keep", Usage: "keep the daemon (and its dashboard) running after the demo, until interrupted"},
			&cli.StringFlag{Name: "data-dir", Usage: "keep the demo's NATS store and recordings here (default: a temporary directory, removed at exit)"},
			&cli.DurationFlag{Name: "timeout", Value: time.Minute, Usage: "how long to wait for the scorecards"},
		},
		Action: func(ctx context.Context, c *cli.Command) error {
			return runDemo(ctx, stdout, stderr, c.String("data-dir"), c.Bool("keep"), c.Duration("timeout"))
		},
	}
}

// demoAgent names the agent of every demo session (the goldens' agent name).
const demoAgent = "booking-agent"

func runDemo(ctx context.Context, stdout, stderr io.Writer, dataDir string, keep bool, timeout time.Duration) error {
	all, err := scenarios.All()
	if err != nil {
		return exitError{code: 1, err: err}
	}
	if dataDir == "" {
		if dataDir, err = os.MkdirTemp("", "lkscore-demo-"); err != nil {
			return exitError{code: 1, err: err}
		}
		defer os.RemoveAll(dataDir)
	}
	var raw [16]byte
	_, _ = rand.Read(raw[:])
	key, secret := "APIdemo", hex.EncodeToString(raw[:])
	cfg := config.Default()
	cfg.Listen, cfg.OpsListen, cfg.DataDir, cfg.NATS.EmbeddedPort = "127.0.0.1:0", "127.0.0.1:0", dataDir, -1
	cfg.LiveKit.Keys = map[string]string{key: secret}
	cfg.Pipeline.CloseReasons = config.CloseReasons() // the demo scores every reason
	cfg.Pipeline.SettleWindow = 2 * time.Second
	log := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	reg := prometheus.NewRegistry()
	d, err := consumer.New(cfg, log, reg, reg)
	if err != nil {
		return exitError{code: 1, err: err}
	}
	if err := d.Start(ctx); err != nil {
		return exitError{code: 1, err: fmt.Errorf("start the daemon: %w", err)}
	}
	defer func() {
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), cfg.ShutdownTimeout)
		defer cancel()
		_ = d.Shutdown(sctx)
	}()
	fmt.Fprintf(stdout, "lkscore demo: daemon on %s (NATS %s, data in %s)\n", d.IngestAddr(), d.NATSURLRedacted(), dataDir)

	want, err := sendScenarios(ctx, sdkclient.New("http://"+d.IngestAddr(), key, secret), all)
	if err != nil {
		return exitError{code: 1, err: err}
	}
	subj := wire.NewSubjects(cfg.NATS.SubjectPrefix, cfg.NATS.StreamPrefix)
	got, err := awaitScorecards(ctx, d.NATSURL(), subj.ResultStream(), len(want), timeout)
	if err != nil {
		return exitError{code: 1, err: err}
	}
	cards := make([]session.Scorecard, 0, len(got))
	for _, sc := range got {
		cards = append(cards, sc)
	}
	sort.Slice(cards, func(i, j int) bool { return cards[i].Session.Key < cards[j].Session.Key })
	fmt.Fprintln(stdout)
	if err := offline.PrintScorecards(stdout, "table", cards); err != nil {
		return exitError{code: 1, err: err}
	}
	wrong := compareScorecards(want, got)
	if keep {
		fmt.Fprintf(stdout, "\ndashboard: http://%s/ui\n", d.OpsAddr())
	} else {
		fmt.Fprintln(stdout, "\n(run with --keep to look at these sessions on the dashboard before the demo stops)")
	}
	if len(wrong) > 0 {
		return exitError{code: 1, err: fmt.Errorf("demo: %w", errors.Join(wrong...))}
	}
	fmt.Fprintf(stdout, "demo passed: %d sessions scored with their expected verdicts and close reasons\n", len(want))
	if keep {
		fmt.Fprintln(stdout, "keeping the daemon running; interrupt (Ctrl-C) to stop")
		<-ctx.Done()
	}
	return nil
}

// awaitScorecards reads scorecards from the results stream until n distinct
// sessions have one, or timeout.
func awaitScorecards(ctx context.Context, natsURL, stream string, n int, timeout time.Duration) (map[string]session.Scorecard, error) {
	nc, err := nats.Connect(natsURL)
	if err != nil {
		return nil, err
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	cons, err := js.OrderedConsumer(ctx, stream, jetstream.OrderedConsumerConfig{})
	if err != nil {
		return nil, fmt.Errorf("read scorecards: %w", err)
	}
	got := map[string]session.Scorecard{}
	for len(got) < n {
		m, err := cons.Next(jetstream.FetchContext(ctx))
		if err != nil {
			return got, fmt.Errorf("%d of %d scorecards arrived: %w", len(got), n, err)
		}
		var sc session.Scorecard
		if err := json.Unmarshal(m.Data(), &sc); err != nil {
			return got, fmt.Errorf("scorecard: %w", err)
		}
		got[sc.Session.Key] = sc
	}
	return got, nil
}

// sendScenarios sends each scenario as a session: its upload and its
// agent_job_ended webhook (in both orders, by turns), then its close log.
// It returns the golden scorecards by session key.
func sendScenarios(ctx context.Context, snd *sdkclient.Sender, all []scenarios.Scenario) (map[string]session.Scorecard, error) {
	want := map[string]session.Scorecard{}
	for i, sc := range all {
		var golden session.Scorecard
		if err := json.Unmarshal(sc.Golden, &golden); err != nil {
			return nil, fmt.Errorf("scenario %s: %w", sc.Name, err)
		}
		hdr, err := recording.ParseHeader(sc.Header, recording.DefaultMaxHeaderBytes)
		if err != nil {
			return nil, fmt.Errorf("scenario %s: %w", sc.Name, err)
		}
		want[recording.SessionKey(hdr.RoomId, hdr.JobId, sc.Header)] = golden
		if sc.FromSignals() {
			// As a self-hosted livekit-server and the SDK with its logs off
			// sent it: the upload, the room's webhooks, the session report.
			if err := sendSignals(ctx, snd, sc); err != nil {
				return nil, fmt.Errorf("scenario %s: %w", sc.Name, err)
			}
			continue
		}
		status := livekit.JobStatus_JS_SUCCESS
		if golden.Completion.CloseReason == agent.CloseReason_CR_ERROR.String() {
			status = livekit.JobStatus_JS_FAILED
		}
		ev := &livekit.WebhookEvent{Event: "agent_job_ended", Id: "EV_demo_" + sc.Name, CreatedAt: time.Now().Unix(),
			Job: &livekit.Job{Id: hdr.JobId, AgentName: demoAgent, Room: &livekit.Room{Sid: hdr.RoomId, Name: "demo-" + sc.Name},
				State: &livekit.JobState{Status: status}}}
		steps := []func() error{
			func() error { return snd.Upload(ctx, sc.Header, sc.Chat) },
			func() error { return snd.Webhook(ctx, ev) },
		}
		if i%2 == 1 { // both orders: LiveKit's webhook often comes first
			steps[0], steps[1] = steps[1], steps[0]
		}
		// The session's close log, as agents-js exports it (the facts read it).
		steps = append(steps, func() error {
			return snd.CloseLog(ctx, hdr.RoomId, hdr.JobId, demoAgent, recording.SDKCloseReason(golden.Completion.CloseReason))
		})
		for _, step := range steps {
			if err := step(); err != nil {
				return nil, fmt.Errorf("scenario %s: %w", sc.Name, err)
			}
		}
	}
	return want, nil
}

// sendSignals sends a scenario whose facts come from its signals: the
// upload, then its webhooks and its logs as recorded.
func sendSignals(ctx context.Context, snd *sdkclient.Sender, sc scenarios.Scenario) error {
	if err := snd.Upload(ctx, sc.Header, sc.Chat); err != nil {
		return err
	}
	for _, body := range sc.Webhooks {
		if err := snd.WebhookBody(ctx, body); err != nil {
			return err
		}
	}
	if sc.Logs != nil {
		return snd.Logs(ctx, sc.Logs)
	}
	return nil
}

// compareScorecards lists the sessions whose scorecard is missing or whose
// verdict or close reason is not the golden one.
func compareScorecards(want, got map[string]session.Scorecard) []error {
	var wrong []error
	for k, w := range want {
		g, ok := got[k]
		switch {
		case !ok:
			wrong = append(wrong, fmt.Errorf("%s: no scorecard", k))
		case g.Overall.Verdict != w.Overall.Verdict || g.Completion.CloseReason != w.Completion.CloseReason:
			wrong = append(wrong, fmt.Errorf("%s: %s %s, want %s %s", k, g.Overall.Verdict, g.Completion.CloseReason,
				w.Overall.Verdict, w.Completion.CloseReason))
		}
	}
	return wrong
}
