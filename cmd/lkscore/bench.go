package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/livekit/protocol/livekit"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/urfave/cli/v3"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"

	"github.com/lkscore/lkscore/cmd/lkscore/offline"
	"github.com/lkscore/lkscore/config"
	"github.com/lkscore/lkscore/consumer/broker"
	"github.com/lkscore/lkscore/internal/sdkclient"
	"github.com/lkscore/lkscore/scenarios"
	"github.com/lkscore/lkscore/wire"
)

func benchCommand(getenv func(string) string, stdout io.Writer) *cli.Command {
	return &cli.Command{
		Name:  "bench",
		Usage: "load a running lkscore with signed sessions or webhooks and report throughput and latency",
		Description: "Sessions mode (the default): each session is an agents SDK recording upload followed by LiveKit's\n" +
			"agent_job_ended webhook, both signed with your LiveKit key as the SDK and LiveKit sign them. The uploads\n" +
			"cycle through the field mix (ten chat histories of 20 to 200 turns in both SDKs' forms, with their\n" +
			"full-precision numbers; four close reasons) unless --chat gives one history for every session.\n" +
			"bench reads the scorecards from NATS and reports\n" +
			"sessions/s and the latency from the webhook's 2xx to the scorecard, with lost and duplicated ones.\n" +
			"Webhooks mode (--webhooks): unique signed room_finished events only, at --concurrency connections.\n" +
			"Exit 1 when a session is lost or scored twice, or a request is refused.",
		Flags: append(append(toolFlags(), offline.FormatFlags("print the report as JSON")...),
			&cli.StringFlag{Name: "url", Value: "http://127.0.0.1:8080", Usage: "base URL of the ingest listener (webhooks and uploads)"},
			&cli.IntFlag{Name: "sessions", Value: 2000, Usage: "sessions to send (or webhooks, with --webhooks)"},
			&cli.IntFlag{Name: "concurrency", Value: 32, Usage: "clients sending at once"},
			&cli.Float64Flag{Name: "rate", Usage: "offered sessions (or webhooks) per second; 0: as fast as the clients go"},
			&cli.BoolFlag{Name: "webhooks", Usage: "send webhooks only and report webhooks/s and their latency"},
			&cli.StringFlag{Name: "chat", Usage: "chat_history.json to upload with every session (default: the field mix, 20 to 200 turns, 24–320 KB)"},
			&cli.StringFlag{Name: "api-key", Usage: "which configured LiveKit key signs (default: the only one, or the first by name)"},
			&cli.StringSliceFlag{Name: "ops-url", Usage: "an lkscore process's ops listener (http://HOST:9090), repeated for each " +
				"process (ingest, worker): bench reports each one's CPU a session from its /metrics"},
			&cli.DurationFlag{Name: "timeout", Value: 2 * time.Minute, Usage: "how long to wait for the last scorecard after the last session is sent"},
		),
		Action: func(ctx context.Context, c *cli.Command) error {
			asJSON, err := offline.WantJSON(c)
			if err != nil {
				return err
			}
			js, subj, cfg, closeFn, err := toolNATS(c, getenv)
			if err != nil {
				return err
			}
			defer closeFn()
			o := benchOptions{url: c.String("url"), n: int(c.Int("sessions")), clients: int(c.Int("concurrency")),
				rate: c.Float64("rate"), webhooksOnly: c.Bool("webhooks"), timeout: c.Duration("timeout")}
			for _, f := range scenarios.FieldMix() {
				o.chats = append(o.chats, f.Chat)
			}
			if p := c.String("chat"); p != "" {
				chat, err := readFileLimited(p, cfg.Limits.UploadBytes())
				if err != nil {
					return exitError{code: 2, err: err}
				}
				o.chats = [][]byte{chat}
			}
			if o.closeReasons = scoredReasons(cfg.Pipeline.CloseReasons); len(o.closeReasons) == 0 {
				return exitError{code: 2, err: fmt.Errorf("pipeline.close_reasons (%s) scores none of bench's close reasons (%s)",
					strings.Join(cfg.Pipeline.CloseReasons, ", "), strings.Join(benchCloseReasons, ", "))}
			}
			if o.key, o.secret, err = signingKey(cfg, c.String("api-key")); err != nil {
				return exitError{code: 2, err: err}
			}
			if o.n < 1 || o.clients < 1 || o.rate < 0 {
				return exitError{code: 2, err: errors.New("--sessions and --concurrency must be at least 1, --rate not negative")}
			}
			return runAndReport(ctx, c.StringSlice("ops-url"), js, subj, o, asJSON, stdout)
		},
	}
}

// runAndReport runs the load, reads the daemons' CPU (opsURLs) around it and
// prints the report; a lost, duplicated or refused session is exit 1.
func runAndReport(ctx context.Context, opsURLs []string, js jetstream.JetStream, subj wire.Subjects, o benchOptions,
	asJSON bool, stdout io.Writer) error {
	ops := &http.Client{Timeout: 10 * time.Second}
	cpu, err := startCPU(ctx, ops, opsURLs)
	if err != nil {
		return exitError{code: 2, err: err}
	}
	rep, err := runBench(ctx, js, subj, o)
	if err != nil {
		return exitError{code: 1, err: err}
	}
	done := rep.Scored
	if o.webhooksOnly {
		done = rep.Acked
	}
	if err := finishCPU(ctx, ops, cpu, done); err != nil {
		return exitError{code: 1, err: err}
	}
	rep.DaemonCPU = cpu
	if asJSON {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		err = enc.Encode(rep)
	} else {
		err = rep.print(stdout)
	}
	if err != nil {
		return exitError{code: 1, err: err}
	}
	if rep.Lost > 0 || rep.Duplicated > 0 || rep.Refused > 0 {
		return exitError{code: 1, err: fmt.Errorf("%d lost, %d duplicated, %d refused", rep.Lost, rep.Duplicated, rep.Refused)}
	}
	return nil
}

// signingKey picks the LiveKit key bench signs with.
func signingKey(cfg config.Config, want string) (string, string, error) {
	keys := make([]string, 0, len(cfg.LiveKit.Keys))
	for k := range cfg.LiveKit.Keys {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	switch {
	case want != "":
		if s, ok := cfg.LiveKit.Keys[want]; ok {
			return want, s, nil
		}
		return "", "", fmt.Errorf("--api-key %s is not among the configured LiveKit keys", want)
	case len(keys) == 0:
		return "", "", errors.New("no LiveKit key configured: set LIVEKIT_API_KEY and LIVEKIT_API_SECRET (the daemon's own)")
	}
	return keys[0], cfg.LiveKit.Keys[keys[0]], nil
}

func readFileLimited(path string, limit int64) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, limit+1))
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", path, err)
	}
	if int64(len(b)) > limit {
		return nil, fmt.Errorf("%s: larger than the upload limit of %d bytes", path, limit)
	}
	return b, nil
}

// benchCloseReasons are the close reasons bench's sessions name, in turn,
// the clean ones most often; bench sends only those the configuration's
// workers score (pipeline.close_reasons: by default not CR_JOB_SHUTDOWN),
// since the others are never scored.
var benchCloseReasons = []string{"CR_USER_INITIATED", "CR_PARTICIPANT_DISCONNECTED", "CR_USER_INITIATED", "CR_JOB_SHUTDOWN",
	"CR_COMPLETED", "CR_PARTICIPANT_DISCONNECTED", "CR_USER_INITIATED"}

// scoredReasons are benchCloseReasons that workers with these close
// reasons score, in order.
func scoredReasons(scored []string) []string {
	return slices.DeleteFunc(slices.Clone(benchCloseReasons), func(r string) bool { return !slices.Contains(scored, r) })
}

type benchOptions struct {
	url          string
	key, secret  string
	n, clients   int
	rate         float64 // per second; 0: closed loop
	webhooksOnly bool
	signed       []signedWebhook // webhooks mode, signed ahead (signWebhooks)
	signedAt     time.Time       // when they were
	chats        [][]byte        // session i uploads chats[i%len(chats)]
	closeReasons []string        // session i names closeReasons[i%len(closeReasons)]
	timeout      time.Duration
}

// benchReport is what `lkscore bench` prints. Latencies are milliseconds.
type benchReport struct {
	Mode        string  `json:"mode"` // sessions or webhooks
	Sent        int     `json:"sent"`
	Clients     int     `json:"clients"`
	OfferedRate float64 `json:"offered_rate,omitempty"`
	SendSeconds float64 `json:"send_seconds"`
	// Acked counts the webhooks answered 2xx; WebhooksPerSec them over the
	// sending time.
	Acked          int     `json:"acked"`
	WebhooksPerSec float64 `json:"webhooks_per_sec"`
	// SessionsPerSec is scored sessions over the time from the first send
	// to the last scorecard (sessions mode).
	SessionsPerSec float64 `json:"sessions_per_sec,omitempty"`
	Scored         int     `json:"scored,omitempty"`
	Lost           int     `json:"lost"`
	Duplicated     int     `json:"duplicated"`
	Refused        int     `json:"refused"`
	// DaemonCPU is each --ops-url process's CPU over the run.
	DaemonCPU []daemonCPU `json:"daemon_cpu,omitempty"`
	// SignedAhead: webhooks mode signed its webhooks before the clock
	// started (signWebhooks), so the signing's CPU is not in the run
	// (except for any sent more than 4 minutes after, signed again).
	SignedAhead bool     `json:"signed_ahead,omitempty"`
	Latency     latStats `json:"latency_ms"` // webhook 2xx → scorecard, or webhook request → 2xx
	LatencyOf   string   `json:"latency_of"`
	// PerSecond is the latency of the sessions whose webhook was answered
	// in each second of the run, from its start (sessions mode): how the
	// pipeline kept up over time, not only at the end.
	PerSecond []secondStats `json:"per_second,omitempty"`
}

// secondStats is one second of a run.
type secondStats struct {
	Second   int      `json:"second"`
	Sessions int      `json:"sessions"`
	Latency  latStats `json:"latency_ms"`
}

// perSecond groups latencies by the second of the run their webhook was
// answered in.
func perSecond(start time.Time, acked map[string]time.Time, got map[string]time.Time) []secondStats {
	by := map[int][]time.Duration{}
	for key, at := range got {
		sec := int(acked[key].Sub(start) / time.Second)
		by[sec] = append(by[sec], max(at.Sub(acked[key]), 0))
	}
	out := make([]secondStats, 0, len(by))
	for sec, d := range by {
		out = append(out, secondStats{Second: sec, Sessions: len(d), Latency: percentiles(d)})
	}
	slices.SortFunc(out, func(a, b secondStats) int { return a.Second - b.Second })
	return out
}

type latStats struct {
	P50, P90, P99, Max float64
}

func (l latStats) MarshalJSON() ([]byte, error) {
	return json.Marshal(map[string]float64{"p50": l.P50, "p90": l.P90, "p99": l.P99, "max": l.Max})
}

func percentiles(d []time.Duration) latStats {
	if len(d) == 0 {
		return latStats{}
	}
	slices.Sort(d)
	at := func(q float64) float64 {
		i := int(q*float64(len(d))+0.5) - 1
		return float64(d[min(max(i, 0), len(d)-1)].Microseconds()) / 1000
	}
	return latStats{P50: at(0.50), P90: at(0.90), P99: at(0.99), Max: at(1)}
}

func (r benchReport) print(w io.Writer) error {
	var err error
	p := func(format string, a ...any) {
		if err == nil {
			_, err = fmt.Fprintf(w, format, a...)
		}
	}
	rate := "as fast as they go"
	if r.OfferedRate > 0 {
		rate = fmt.Sprintf("offered %.0f/s", r.OfferedRate)
	}
	p("lkscore bench: %d %s from %d clients (%s) in %.2f s\n", r.Sent, r.Mode, r.Clients, rate, r.SendSeconds)
	signed := ""
	if r.SignedAhead {
		signed = " (signed before the clock started)"
	}
	p("webhooks:   %.0f/s acknowledged%s\n", r.WebhooksPerSec, signed)
	if r.Mode == "sessions" {
		p("sessions:   %.0f/s end to end (first send → last scorecard), %d scored\n", r.SessionsPerSec, r.Scored)
	}
	p("latency:    p50 %.1f ms  p90 %.1f ms  p99 %.1f ms  max %.1f ms (%s)\n", r.Latency.P50, r.Latency.P90, r.Latency.P99, r.Latency.Max, r.LatencyOf)
	if len(r.PerSecond) > 0 {
		worst := r.PerSecond[0]
		var p99s []string
		for _, s := range r.PerSecond {
			if s.Latency.P99 > worst.Latency.P99 {
				worst = s
			}
			p99s = append(p99s, fmt.Sprintf("%.0f", s.Latency.P99))
		}
		p("per second: worst p99 %.1f ms (second %d, %d sessions); p99 ms by second: %s\n", worst.Latency.P99, worst.Second,
			worst.Sessions, strings.Join(p99s, " "))
	}
	p("lost %d, duplicated %d, refused %d\n", r.Lost, r.Duplicated, r.Refused)
	unit, total := "session", 0.0
	if r.Mode == "webhooks" {
		unit = "webhook"
	}
	for _, d := range r.DaemonCPU {
		p("daemon CPU: %s %.3f ms a %s (%.2f s, %s)\n", d.Role, d.PerSession, unit, d.CPU, d.OpsURL)
		total += d.PerSession
	}
	if len(r.DaemonCPU) > 1 {
		p("daemon CPU: %.3f ms a %s, all %d processes\n", total, unit, len(r.DaemonCPU))
	}
	return err
}

// runBench sends the load and, in sessions mode, waits for every scorecard.
func runBench(ctx context.Context, js jetstream.JetStream, subj wire.Subjects, o benchOptions) (benchReport, error) {
	var run [4]byte
	_, _ = rand.Read(run[:])
	id := hex.EncodeToString(run[:])
	rep := benchReport{Mode: "sessions", Sent: o.n, Clients: o.clients, OfferedRate: o.rate,
		LatencyOf: "webhook 2xx → scorecard received"}
	if o.webhooksOnly {
		rep.Mode, rep.LatencyOf = "webhooks", "webhook request → 2xx"
	}
	snd := sdkclient.New(o.url, o.key, o.secret)
	// One keep-alive connection per client, as LiveKit's notifier keeps them.
	snd.Client = &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{
		MaxIdleConns: o.clients, MaxIdleConnsPerHost: o.clients, IdleConnTimeout: time.Minute}}
	defer snd.Client.CloseIdleConnections()

	var cards *cardWatch
	if !o.webhooksOnly {
		var err error
		if cards, err = watchCards(ctx, js, subj, o.n); err != nil {
			return rep, err
		}
		defer cards.stop()
	}

	if err := o.signWebhooks(snd, id, &rep); err != nil {
		return rep, err
	}
	var mu sync.Mutex
	acked := make(map[string]time.Time, o.n) // session key → webhook 2xx
	var hookLat []time.Duration
	refused := 0
	next := make(chan int)
	var wg sync.WaitGroup
	start := time.Now()
	for range o.clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				room, job := benchRoom(id, i), fmt.Sprintf("AJ_bench%s_%06d", id, i)
				t0, t1, err := benchSession(ctx, snd, o, i, room, job)
				mu.Lock()
				if err != nil {
					refused++
				} else {
					acked[room+"/"+job] = t1
					hookLat = append(hookLat, t1.Sub(t0))
				}
				mu.Unlock()
			}
		}()
	}
	feed(ctx, next, o.n, o.rate)
	close(next)
	wg.Wait()
	sent := time.Since(start)
	rep.SendSeconds = sent.Seconds()
	rep.Refused = refused
	rep.Acked = len(acked)
	rep.WebhooksPerSec = float64(len(acked)) / sent.Seconds()
	if o.webhooksOnly {
		rep.Latency = percentiles(hookLat)
		return rep, ctx.Err()
	}

	got, dups, last := cards.wait(ctx, acked, o.timeout)
	lat := make([]time.Duration, 0, len(got))
	for key, at := range got {
		lat = append(lat, max(at.Sub(acked[key]), 0))
	}
	rep.Scored, rep.Duplicated, rep.Lost = len(got), dups, len(acked)-len(got)
	rep.Latency = percentiles(lat)
	rep.PerSecond = perSecond(start, acked, got)
	if len(got) > 0 {
		rep.SessionsPerSec = float64(len(got)) / last.Sub(start).Seconds()
	}
	return rep, nil
}

// cardWatch collects scorecards as they arrive: the first receive time per
// session key, and how many arrived for a key already seen.
type cardWatch struct {
	cons jetstream.ConsumeContext
	mu   sync.Mutex
	at   map[string]time.Time
	dups int
	more chan struct{}
}

func watchCards(ctx context.Context, js jetstream.JetStream, subj wire.Subjects, n int) (*cardWatch, error) {
	// An ephemeral consumer from now on: only this run's scorecards count.
	c, err := js.OrderedConsumer(ctx, subj.ResultStream(), jetstream.OrderedConsumerConfig{DeliverPolicy: jetstream.DeliverNewPolicy})
	if err != nil {
		return nil, broker.Missing("follow stream "+subj.ResultStream(), err)
	}
	w := &cardWatch{at: make(map[string]time.Time, n), more: make(chan struct{}, 1)}
	w.cons, err = c.Consume(func(m jetstream.Msg) {
		now := time.Now()
		key := m.Headers().Get(wire.HeaderSessionKey)
		w.mu.Lock()
		if _, seen := w.at[key]; seen {
			w.dups++
		} else {
			w.at[key] = now
		}
		w.mu.Unlock()
		select {
		case w.more <- struct{}{}:
		default:
		}
	})
	if err != nil {
		return nil, broker.Missing("follow stream "+subj.ResultStream(), err)
	}
	return w, nil
}

func (w *cardWatch) stop() { w.cons.Stop() }

// wait returns, for the sessions in sent, when each scorecard arrived; the
// duplicates among them; and the last arrival. It gives up timeout after
// the last new scorecard.
func (w *cardWatch) wait(ctx context.Context, sent map[string]time.Time, timeout time.Duration) (map[string]time.Time, int, time.Time) {
	timer := time.NewTimer(timeout)
	defer timer.Stop()
	collect := func() (map[string]time.Time, int, time.Time) {
		w.mu.Lock()
		defer w.mu.Unlock()
		got := map[string]time.Time{}
		var last time.Time
		for k := range sent {
			if at, ok := w.at[k]; ok {
				got[k] = at
				if at.After(last) {
					last = at
				}
			}
		}
		return got, w.dups, last
	}
	for {
		got, dups, last := collect()
		if len(got) == len(sent) {
			// A duplicate would come right behind: give it a moment.
			time.Sleep(500 * time.Millisecond)
			_, dups, _ = collect()
			return got, dups, last
		}
		select {
		case <-w.more:
			if !timer.Stop() {
				<-timer.C
			}
			timer.Reset(timeout)
		case <-timer.C:
			return got, dups, last
		case <-ctx.Done():
			return got, dups, last
		}
	}
}

// benchSession sends session i: with webhooksOnly a room_finished webhook,
// else its upload and then its agent_job_ended webhook. t0 and t1 time the
// webhook's request and its 2xx.
func benchSession(ctx context.Context, snd *sdkclient.Sender, o benchOptions, i int, room, job string) (t0, t1 time.Time, err error) {
	if o.webhooksOnly {
		if o.signed != nil && time.Since(o.signedAt) < signAheadFor {
			t0 = time.Now()
			err = snd.PostWebhook(ctx, o.signed[i].body, o.signed[i].token)
			return t0, time.Now(), err
		}
		// Not signed ahead, or its token is near LiveKit's 5 minutes: signed now.
		t0 = time.Now()
		err = snd.Webhook(ctx, benchWebhook(room))
		return t0, time.Now(), err
	}
	header, _ := proto.Marshal(&livekit.MetricsRecordingHeader{RoomId: room, JobId: job,
		SessionSummary: `{"close_reason":"` + o.closeReasons[i%len(o.closeReasons)] + `"}`})
	if err = snd.Upload(ctx, header, o.chats[i%len(o.chats)]); err != nil {
		return t0, t1, err
	}
	ev := &livekit.WebhookEvent{Event: "agent_job_ended", Id: "EV_" + job, CreatedAt: time.Now().Unix(),
		Job: &livekit.Job{Id: job, AgentName: "lkscore-bench", Room: &livekit.Room{Sid: room},
			State: &livekit.JobState{Status: livekit.JobStatus_JS_SUCCESS}}}
	t0 = time.Now()
	err = snd.Webhook(ctx, ev)
	return t0, time.Now(), err
}

// benchRoom is the room id of run id's session i.
func benchRoom(id string, i int) string { return fmt.Sprintf("RM_bench%s_%06d", id, i) }

// benchWebhook is webhooks mode's event for room: a room_finished.
func benchWebhook(room string) *livekit.WebhookEvent {
	return &livekit.WebhookEvent{Event: "room_finished", Id: "EV_" + room, CreatedAt: time.Now().Unix(),
		Room: &livekit.Room{Sid: room, Name: "bench"}}
}

// signedWebhook is a webhook body and its token, made before the clock
// starts.
type signedWebhook struct {
	body  []byte
	token string
}

// maxSignedAhead bounds the webhooks signed before a run (about 600 bytes
// each); a pre-signed webhook is sent while its token is younger than
// signAheadFor (LiveKit's tokens live 5 minutes), later ones are signed as
// they are sent.
const (
	maxSignedAhead = 100_000
	signAheadFor   = 4 * time.Minute
)

// signWebhooks signs webhooks mode's webhooks of run id into o.signed before
// the clock starts, so the report measures the daemon and not the signer
// that shares its machine (up to maxSignedAhead of them).
func (o *benchOptions) signWebhooks(snd *sdkclient.Sender, id string, rep *benchReport) error {
	if !o.webhooksOnly || o.n > maxSignedAhead {
		return nil
	}
	o.signed, o.signedAt = make([]signedWebhook, o.n), time.Now()
	for i := range o.signed {
		body, err := protojson.Marshal(benchWebhook(benchRoom(id, i)))
		if err != nil {
			return err
		}
		tok, err := snd.SignWebhook(body)
		if err != nil {
			return err
		}
		o.signed[i] = signedWebhook{body: body, token: tok}
	}
	rep.SignedAhead = true
	return nil
}

// feed hands the session numbers 0..n-1 to the clients, rate a second (0:
// as fast as they take them), until ctx ends.
func feed(ctx context.Context, next chan<- int, n int, rate float64) {
	var tick *time.Ticker
	if rate > 0 {
		tick = time.NewTicker(time.Duration(float64(time.Second) / rate))
		defer tick.Stop()
	}
	for i := range n {
		if tick != nil {
			select {
			case <-tick.C:
			case <-ctx.Done():
				return
			}
		}
		select {
		case next <- i:
		case <-ctx.Done():
			return
		}
	}
}
