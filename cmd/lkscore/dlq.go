package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/urfave/cli/v3"

	"github.com/lkscore/lkscore/cmd/lkscore/offline"
	"github.com/lkscore/lkscore/config"
	"github.com/lkscore/lkscore/consumer/broker"
	"github.com/lkscore/lkscore/wire"
)

func dlqCommand(getenv func(string) string, stdout io.Writer) *cli.Command {
	flags := append(toolFlags(), &cli.StringFlag{Name: "stage", Usage: "only dead letters of this stage (" + strings.Join(dlqStages, ", ") + ")",
		Validator: func(s string) error {
			if s != "" && !slices.Contains(dlqStages, s) {
				return fmt.Errorf("--stage %q is not one of %s", s, strings.Join(dlqStages, ", "))
			}
			return nil
		}})
	return &cli.Command{
		Name:  "dlq",
		Usage: "inspect and re-drive dead letters",
		Commands: []*cli.Command{
			{
				Name: "list", Usage: "list dead letters, oldest first",
				Flags: append(append(flags, &cli.IntFlag{Name: "limit", Value: 100}), offline.FormatFlags("one JSON object per line")...),
				Action: func(ctx context.Context, c *cli.Command) error {
					asJSON, err := offline.WantJSON(c)
					if err != nil {
						return err
					}
					admin, closeFn, err := dlqAdmin(ctx, c, getenv)
					if err != nil {
						return err
					}
					defer closeFn()
					dls, err := admin.List(ctx, c.String("stage"), int(c.Int("limit")))
					if err != nil {
						return exitError{code: 1, err: err}
					}
					return printDeadLetters(stdout, dls, asJSON)
				},
			},
			{
				Name: "replay", Usage: "re-publish dead letters to their original subject (after a fix), then delete them",
				Flags: append(flags, &cli.Uint64SliceFlag{Name: "seq", Usage: "dead letter sequence numbers"}, &cli.BoolFlag{Name: "all",
					Usage: "every dead letter (of --stage)"}),
				Action: func(ctx context.Context, c *cli.Command) error {
					admin, closeFn, err := dlqAdmin(ctx, c, getenv)
					if err != nil {
						return err
					}
					defer closeFn()
					seqs := c.Uint64Slice("seq")
					if c.Bool("all") == (len(seqs) > 0) {
						return exitError{code: 2, err: errors.New("dlq replay: give --seq N… or --all")}
					}
					if c.Bool("all") {
						dls, err := admin.List(ctx, c.String("stage"), 1<<30)
						if err != nil {
							return exitError{code: 1, err: err}
						}
						for _, dl := range dls {
							seqs = append(seqs, dl.Seq)
						}
					}
					for _, seq := range seqs {
						if err := admin.Replay(ctx, seq); err != nil {
							return exitError{code: 1, err: err}
						}
						fmt.Fprintf(stdout, "replayed %d\n", seq)
					}
					return nil
				},
			},
		},
	}
}

// dlqStages are the stages that dead-letter (wire.Stage*).
var dlqStages = []string{wire.StageLocate, wire.StageScore, wire.StageRegress, wire.StageNotify, wire.StageForward}

// dlqAdmin connects to NATS as the daemon's config says.
func dlqAdmin(ctx context.Context, c *cli.Command, getenv func(string) string) (*broker.DeadLetterAdmin, func(), error) {
	js, subj, _, closeFn, err := toolNATS(c, getenv)
	if err != nil {
		return nil, nil, err
	}
	return broker.NewDeadLetterAdmin(js, subj), closeFn, nil
}

// toolFlags are the flags of every operator command that talks to the
// daemon's NATS (dlq, tail, forget); toolNATS reads them.
func toolFlags() []cli.Flag {
	return []cli.Flag{
		&cli.StringFlag{Name: "config", Usage: "config file (env LKSCORE_CONFIG)"},
		&cli.StringFlag{Name: "nats-url", Usage: "NATS URL (env LKSCORE_NATS_URL; empty: the embedded server on 127.0.0.1:<nats.embedded_port>, " +
			"with the token in <data_dir>/nats.token)"},
		&cli.StringFlag{Name: "data-dir", Usage: "the daemon's data directory: the embedded NATS server's token, the local store (env LKSCORE_DATA_DIR)"},
	}
}

// toolNATS connects an operator command (dlq, tail) to the daemon's NATS:
// --config and --nats-url, else the embedded server's loopback port.
func toolNATS(c *cli.Command, getenv func(string) string) (jetstream.JetStream, wire.Subjects, config.Config, func(), error) {
	path := c.String("config")
	if path == "" {
		path = getenv("LKSCORE_CONFIG")
	}
	cfg, err := config.LoadForTools(path, getenv, func(cfg *config.Config) {
		if c.IsSet("nats-url") {
			cfg.NATS.URL = c.String("nats-url")
		}
	})
	if err != nil {
		return nil, wire.Subjects{}, cfg, nil, exitError{code: 2, err: err}
	}
	if c.IsSet("data-dir") {
		cfg.DataDir = c.String("data-dir")
	}
	url := cfg.NATS.URL
	if url == "" {
		// The embedded server: its port, and the token serve wrote into the data dir.
		url = fmt.Sprintf("nats://127.0.0.1:%d", cfg.NATS.EmbeddedPort)
		if cfg.NATS.Token == "" {
			tok, err := broker.ReadEmbeddedToken(cfg.DataDir)
			if err != nil {
				return nil, wire.Subjects{}, cfg, nil, exitError{code: 1, err: fmt.Errorf("%w (run this where lkscore serve runs, "+
					"with its data_dir: --data-dir, LKSCORE_DATA_DIR or --config; or give --nats-url)", err)}
			}
			cfg.NATS.Token = tok
		}
	}
	nc, err := broker.Connect(url, cfg.NATS, discardLogger(), nil)
	if err != nil {
		return nil, wire.Subjects{}, cfg, nil, exitError{code: 1, err: fmt.Errorf("%w (is lkscore serve running?)", err)}
	}
	js, err := jetstream.New(nc)
	if err != nil {
		nc.Close()
		return nil, wire.Subjects{}, cfg, nil, exitError{code: 1, err: err}
	}
	return broker.Guard(js), wire.NewSubjects(cfg.NATS.SubjectPrefix, cfg.NATS.StreamPrefix), cfg, nc.Close, nil
}

func printDeadLetters(w io.Writer, dls []wire.DeadLetter, asJSON bool) error {
	if asJSON {
		enc := json.NewEncoder(w)
		for _, dl := range dls {
			if err := enc.Encode(dl); err != nil {
				return err
			}
		}
		return nil
	}
	if len(dls) == 0 {
		_, err := fmt.Fprintln(w, "no dead letters: every stored message was processed or is still being retried")
		return err
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "SEQ\tSTAGE\tAT\tDELIVERIES\tSUBJECT\tSESSION\tERROR")
	for _, dl := range dls {
		fmt.Fprintf(tw, "%d\t%s\t%s\t%d\t%s\t%s\t%s\n", dl.Seq, dl.Stage, dl.At.Format(time.RFC3339), dl.Deliveries,
			dl.Subject, dl.SessionKey, dl.Error)
	}
	return tw.Flush()
}
