// Command scorecards is an example consumer of lkscore's scorecards, built
// on the wire contract alone: the subject and stream names and headers of
// package wire, the scorecard type of package scoring, and nats.go's
// jetstream. It imports nothing of the daemon.
//
//	go run ./examples/scorecards --nats-url nats://127.0.0.1:4222                  # every new scorecard
//	go run ./examples/scorecards --agent support-bot                               # one agent's (pipeline.agent_results)
//	go run ./examples/scorecards --close-reason CR_ERROR --all --durable triage    # replay, and remember where it was
//
// Each scorecard is printed as one line: session key, agent, verdict,
// overall score, close reason, scoring version. It acknowledges a
// scorecard after printing it, so a durable consumer that stops resumes
// where it was.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/lkscore/lkscore/session"
	"github.com/lkscore/lkscore/wire"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "scorecards:", err)
		if errors.Is(err, errUsage) {
			os.Exit(2)
		}
		os.Exit(1)
	}
}

var errUsage = errors.New("usage")

type options struct {
	natsURL, agent, closeReason, durable string
	subjectPrefix, streamPrefix          string
	all                                  bool
	limit                                int
}

func parse(args []string) (options, error) {
	var o options
	fs := flag.NewFlagSet("scorecards", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.StringVar(&o.natsURL, "nats-url", nats.DefaultURL, "NATS server")
	fs.StringVar(&o.agent, "agent", "", "only this agent's scorecards, filtered by the server (needs pipeline.agent_results)")
	fs.StringVar(&o.closeReason, "close-reason", "", "only sessions with this close reason (CR_USER_INITIATED, CR_ERROR, …)")
	fs.StringVar(&o.durable, "durable", "", "a durable consumer name: resume where it stopped (default: a new consumer each run)")
	fs.StringVar(&o.subjectPrefix, "subject-prefix", wire.DefaultSubjectPrefix, "lkscore's nats.subject_prefix")
	fs.StringVar(&o.streamPrefix, "stream-prefix", wire.DefaultStreamPrefix, "lkscore's nats.stream_prefix")
	fs.BoolVar(&o.all, "all", false, "start with the oldest scorecard kept, not the next new one")
	fs.IntVar(&o.limit, "limit", 0, "stop after this many scorecards (0: run until interrupted)")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			fs.SetOutput(os.Stderr)
			fmt.Fprintln(os.Stderr, "usage: scorecards [flags]: print lkscore's scorecards as they are published")
			fs.PrintDefaults()
		}
		return o, fmt.Errorf("%w: %v", errUsage, err)
	}
	if fs.NArg() > 0 {
		return o, fmt.Errorf("%w: unexpected argument %q", errUsage, fs.Arg(0))
	}
	return o, nil
}

// source is the stream and filter a set of options reads.
func (o options) source() (stream, filter string) {
	s := wire.NewSubjects(o.subjectPrefix, o.streamPrefix)
	switch {
	case o.agent != "" && o.closeReason != "":
		return s.AgentResultStream(), s.AgentResult(o.agent, o.closeReason)
	case o.agent != "":
		return s.AgentResultStream(), s.AgentResultsOf(o.agent)
	case o.closeReason != "":
		return s.ResultStream(), s.Result(o.closeReason)
	}
	return s.ResultStream(), s.ResultAll()
}

func run(ctx context.Context, args []string, out io.Writer) error {
	o, err := parse(args)
	if err != nil {
		return err
	}
	nc, err := nats.Connect(o.natsURL, nats.Name("lkscore example consumer"))
	if err != nil {
		return fmt.Errorf("connect to %s: %w", o.natsURL, err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		return err
	}
	stream, filter := o.source()
	cfg := jetstream.ConsumerConfig{Durable: o.durable, FilterSubject: filter, AckPolicy: jetstream.AckExplicitPolicy,
		DeliverPolicy: jetstream.DeliverNewPolicy, InactiveThreshold: time.Hour}
	if o.all {
		cfg.DeliverPolicy = jetstream.DeliverAllPolicy
	}
	if o.durable != "" {
		cfg.InactiveThreshold = 0 // a durable stays
	}
	cons, err := js.CreateOrUpdateConsumer(ctx, stream, cfg)
	if errors.Is(err, jetstream.ErrStreamNotFound) {
		hint := ""
		if o.agent != "" {
			hint = " with pipeline.agent_results: true"
		}
		return fmt.Errorf("stream %s not found: is lkscore running on %s%s?", stream, o.natsURL, hint)
	}
	if err != nil {
		return fmt.Errorf("consumer on %s: %w", stream, err)
	}
	it, err := cons.Messages()
	if err != nil {
		return err
	}
	go func() { <-ctx.Done(); it.Stop() }()
	for n := 0; o.limit == 0 || n < o.limit; n++ {
		m, err := it.Next()
		if errors.Is(err, jetstream.ErrMsgIteratorClosed) {
			return nil // interrupted
		}
		if err != nil {
			return err
		}
		if err := printCard(out, m, o.agent); err != nil {
			return err
		}
		if err := m.Ack(); err != nil {
			return fmt.Errorf("ack: %w", err)
		}
	}
	it.Stop()
	return nil
}

// printCard writes one scorecard as a line. Unknown fields are ignored, as the
// contract asks of consumers (new fields appear within v1).
func printCard(out io.Writer, m jetstream.Msg, agent string) error {
	var card session.Scorecard
	if err := json.Unmarshal(m.Data(), &card); err != nil {
		return fmt.Errorf("%s: not a scorecard: %w", m.Subject(), err)
	}
	name := m.Headers().Get(wire.HeaderAgentName)
	if agent != "" && name != agent { // cannot happen: the agent token is one-to-one
		return fmt.Errorf("%s carries agent %q, asked for %q", m.Subject(), name, agent)
	}
	_, err := fmt.Fprintf(out, "%s\t%s\t%s\t%.1f\t%s\t%s\n", card.Session.Key, name, card.Overall.Verdict, card.Overall.Score,
		m.Headers().Get(wire.HeaderCloseReason), card.ScoringVersion)
	return err
}
