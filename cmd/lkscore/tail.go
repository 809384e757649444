package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/urfave/cli/v3"

	"github.com/lkscore/lkscore/cmd/lkscore/offline"
	"github.com/lkscore/lkscore/config"
	"github.com/lkscore/lkscore/consumer/broker"
	"github.com/lkscore/lkscore/session"
	"github.com/lkscore/lkscore/wire"
)

func tailCommand(getenv func(string) string, stdout, stderr io.Writer) *cli.Command {
	return &cli.Command{
		Name:  "tail",
		Usage: "follow scorecards as they are published, one line each (or one JSON object with --json)",
		Flags: append(append(toolFlags(), offline.FormatFlags("print each scorecard as one JSON object per line")...),
			&cli.StringSliceFlag{Name: "close-reason", Usage: "only these close reasons (CR_ERROR, …); repeatable"},
			&cli.StringSliceFlag{Name: "verdict", Usage: "only these verdicts (pass, warn, fail); repeatable"},
			&cli.StringFlag{Name: "agent", Usage: "only this agent name"},
			&cli.StringFlag{Name: "since", Usage: "replay from a point in time: a duration (1h) or an RFC 3339 time; default: only new scorecards"},
			&cli.IntFlag{Name: "limit", Usage: "stop after this many scorecards (0: follow until interrupted)"},
			&cli.DurationFlag{Name: "quiet-after", Value: 5 * time.Second,
				Usage: "after this long with nothing shown, say once on stderr what tail waits on"},
			&cli.BoolFlag{Name: "alerts",
				Usage: "follow regression, drift and failure alerts instead of scorecards (--agent, --json, --since and --limit apply)"},
		),
		Action: func(ctx context.Context, c *cli.Command) error {
			f, err := tailFilterFrom(c)
			if err != nil {
				return exitError{code: 2, err: err}
			}
			js, subj, cfg, closeFn, err := toolNATS(c, getenv)
			if err != nil {
				return err
			}
			defer closeFn()
			f.hint = quietHint(cfg, f)
			f.hintOut = stderr
			if err := tail(ctx, js, subj, f, stdout); err != nil && !errors.Is(err, context.Canceled) {
				return exitError{code: 1, err: err}
			}
			return nil
		},
	}
}

// tailFilter selects scorecards.
type tailFilter struct {
	reasons  []string
	verdicts []string
	agent    string
	since    time.Time // zero: only new scorecards
	asJSON   bool
	limit    int
	alerts   bool
	// hint is written to hintOut once, when nothing has been shown for
	// quietAfter: what tail waits on and how to send a session.
	hint    string
	hintOut io.Writer
	// quietAfter is how long tail waits in silence before the hint
	// (--quiet-after).
	quietAfter time.Duration
}

// quietHint says what tail is waiting on and how to get a session into
// the daemon it follows.
func quietHint(cfg config.Config, f tailFilter) string {
	url := baseURL(cfg.Listen)
	return fmt.Sprintf("waiting (filters: close reasons %v, verdicts %v, agent %q). To score five test "+
		"sessions on this daemon, with its LiveKit keys (the same --config, or LIVEKIT_API_KEY and LIVEKIT_API_SECRET): "+
		"lkscore bench --sessions 5 --url %s", f.reasons, f.verdicts, f.agent, url)
}

// quietStatus is what tail says after a silence: whether the stream holds
// anything at all, or only what the filter or --since left out.
func quietStatus(ctx context.Context, js jetstream.JetStream, stream, what string, f tailFilter) string {
	var held uint64
	var first time.Time
	if s, err := js.Stream(ctx, stream); err == nil {
		if info, err := s.Info(ctx); err == nil {
			held, first = info.State.Msgs, info.State.FirstTime
		}
	}
	switch {
	case held == 0:
		return fmt.Sprintf("tail: no %s in %s yet", what, stream)
	case !f.since.IsZero():
		return fmt.Sprintf("tail: nothing matched since %s; %s holds %d %s, the oldest from %s", f.since.Format(time.RFC3339), stream, held,
			what, first.Format(time.RFC3339))
	default:
		return fmt.Sprintf("tail: no new %s matched yet; %s holds %d older ones (--since 24h replays them)", what, stream, held)
	}
}

func tailFilterFrom(c *cli.Command) (tailFilter, error) {
	asJSON, err := offline.WantJSON(c)
	if err != nil {
		return tailFilter{}, err
	}
	f := tailFilter{reasons: c.StringSlice("close-reason"), verdicts: c.StringSlice("verdict"), agent: c.String("agent"),
		asJSON: asJSON, limit: int(c.Int("limit")), alerts: c.Bool("alerts"), quietAfter: c.Duration("quiet-after")}
	if f.alerts && (len(f.reasons) > 0 || len(f.verdicts) > 0) {
		return f, errors.New("tail: --close-reason and --verdict filter scorecards, not --alerts")
	}
	for _, r := range f.reasons {
		if !config.ValidCloseReason(r) {
			return f, fmt.Errorf("tail: --close-reason %q is not one of %s", r, strings.Join(config.CloseReasons(), ", "))
		}
	}
	for _, v := range f.verdicts {
		if v != session.Pass && v != session.Warn && v != session.Fail && v != session.Unscored {
			return f, fmt.Errorf("tail: --verdict %q is not pass, warn, fail or unscored", v)
		}
	}
	if s := c.String("since"); s != "" {
		if d, err := time.ParseDuration(s); err == nil {
			f.since = time.Now().Add(-d)
		} else if t, err := time.Parse(time.RFC3339, s); err == nil {
			f.since = t
		} else {
			return f, fmt.Errorf("tail: --since %q is neither a duration (1h) nor an RFC 3339 time", s)
		}
	}
	return f, nil
}

// tail follows the results stream with an ordered consumer (filtered by
// close reason on the server) and prints what the filter keeps.
func tail(ctx context.Context, js jetstream.JetStream, subj wire.Subjects, f tailFilter, w io.Writer) error {
	cfg := jetstream.OrderedConsumerConfig{DeliverPolicy: jetstream.DeliverNewPolicy}
	if !f.since.IsZero() {
		start := f.since
		cfg.DeliverPolicy, cfg.OptStartTime = jetstream.DeliverByStartTimePolicy, &start
	}
	for _, r := range f.reasons {
		cfg.FilterSubjects = append(cfg.FilterSubjects, subj.Result(r))
	}
	stream := subj.ResultStream()
	if f.alerts {
		stream = subj.AlertStream()
		if f.agent != "" {
			cfg.FilterSubjects = []string{subj.AlertsOf(f.agent)}
		}
	}
	cons, err := js.OrderedConsumer(ctx, stream, cfg)
	if err != nil {
		return broker.Missing("follow stream "+stream, err)
	}
	shown := 0
	var lastSeq uint64 // the stream sequence of the last message seen
	started, hinted := time.Now(), f.hint == ""
	caughtUp := false // the --since replay reached the stream's end
	for f.limit == 0 || shown < f.limit {
		// Wait a second at a time, to notice a long silence.
		wctx, cancel := context.WithTimeout(ctx, time.Second)
		m, err := cons.Next(jetstream.FetchContext(wctx))
		cancel()
		if err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			if errors.Is(err, nats.ErrTimeout) || errors.Is(err, jetstream.ErrNoMessages) || errors.Is(err, context.DeadlineExceeded) {
				if !hinted && shown == 0 && time.Since(started) >= f.quietAfter {
					hinted = true
					what := "scorecards"
					if f.alerts {
						what = "alerts"
					}
					fmt.Fprintln(f.hintOut, quietStatus(ctx, js, stream, what, f)+", "+f.hint)
				}
				if !caughtUp && !f.since.IsZero() && f.hintOut != nil {
					caughtUp = true
					fmt.Fprintf(f.hintOut, "tail: replayed %d since %s; following new ones\n", shown, f.since.Format(time.RFC3339))
				}
				continue // a quiet stream: keep following
			}
			// NATS went away (the daemon or its server restarting): follow
			// again from the message after the last one seen, once it is back.
			if cons, err = refollow(ctx, js, stream, cfg, lastSeq, err, f.hintOut); err != nil {
				return err
			}
			continue
		}
		if meta, err := m.Metadata(); err == nil {
			lastSeq = meta.Sequence.Stream
		}
		printed, err := printTailed(m, f, w)
		if err != nil {
			return err
		}
		if printed {
			shown++
		}
	}
	return nil
}

// printTailed prints a followed message if the filter keeps it.
func printTailed(m jetstream.Msg, f tailFilter, w io.Writer) (bool, error) {
	h := m.Headers()
	if len(f.verdicts) > 0 && !slices.Contains(f.verdicts, h.Get(wire.HeaderVerdict)) {
		return false, nil
	}
	if f.agent != "" && h.Get(wire.HeaderAgentName) != f.agent {
		return false, nil
	}
	var line string
	switch {
	case f.asJSON:
		line = string(m.Data())
	case f.alerts:
		var a wire.Alert
		if err := json.Unmarshal(m.Data(), &a); err != nil {
			return false, fmt.Errorf("alert: %w", err)
		}
		line = alertLine(a)
	default:
		var sc session.Scorecard
		if err := json.Unmarshal(m.Data(), &sc); err != nil {
			return false, fmt.Errorf("scorecard: %w", err)
		}
		at := time.Now()
		if meta, _ := m.Metadata(); meta != nil {
			at = meta.Timestamp
		}
		line = tailLine(at, sc)
	}
	_, err := fmt.Fprintln(w, line)
	return err == nil, err
}

// tailLine is one scorecard on one line.
func tailLine(at time.Time, sc session.Scorecard) string {
	agent := sc.Session.AgentName
	if agent == "" {
		agent = "-"
	}
	line := fmt.Sprintf("%s  %-4s %6.2f  %s (%s)  %s  %s", at.UTC().Format(time.RFC3339), sc.Overall.Verdict, sc.Overall.Score,
		sc.Completion.CloseReason, sc.Completion.CloseReasonSource, agent, sc.Session.Key)
	if sc.Overall.Verdict != session.Pass && len(sc.Overall.Reasons) > 0 {
		line += "  " + strings.Join(sc.Overall.Reasons, "; ")
	}
	return line
}

// alertLine is one alert on one line.
func alertLine(a wire.Alert) string {
	line := fmt.Sprintf("%s  %-8s %-10s %s@%s  %s: %g → %g (%+g; %s", a.At.UTC().Format(time.RFC3339), a.Status, a.Kind, a.Agent, a.Version,
		a.Metric, a.Baseline, a.Current, a.Effect, a.Test)
	if a.QValue > 0 {
		line += fmt.Sprintf(", q %.3g", a.QValue)
	} else if a.PValue > 0 {
		line += fmt.Sprintf(", p %.3g", a.PValue)
	}
	return line + fmt.Sprintf(", n %d vs %d)  against %s", a.NCurrent, a.NBaseline, a.BaselineOf)
}

// refollow waits for NATS to come back after lost (what the consumer
// said), saying so on out, and follows stream again from the message
// after lastSeq (or as cfg says, before any). A connection closed for good
// is an error.
func refollow(ctx context.Context, js jetstream.JetStream, stream string, cfg jetstream.OrderedConsumerConfig, lastSeq uint64,
	lost error, out io.Writer) (jetstream.Consumer, error) {
	if out == nil {
		out = io.Discard
	}
	fmt.Fprintf(out, "tail: lost NATS (%v); following again once it is back\n", lost)
	if lastSeq > 0 {
		cfg.DeliverPolicy, cfg.OptStartSeq, cfg.OptStartTime = jetstream.DeliverByStartSequencePolicy, lastSeq+1, nil
	}
	for {
		if js.Conn().IsClosed() {
			return nil, fmt.Errorf("tail: the NATS connection closed for good (%v)", lost)
		}
		actx, cancel := context.WithTimeout(ctx, 2*time.Second)
		cons, err := js.OrderedConsumer(actx, stream, cfg)
		cancel()
		if err == nil {
			fmt.Fprintln(out, "tail: NATS is back; following")
			return cons, nil
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(500 * time.Millisecond):
		}
	}
}
