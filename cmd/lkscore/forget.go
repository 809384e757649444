package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"text/tabwriter"

	"github.com/urfave/cli/v3"

	"github.com/lkscore/lkscore/cmd/lkscore/offline"
	"github.com/lkscore/lkscore/consumer/forget"
	"github.com/lkscore/lkscore/store"
	"github.com/lkscore/lkscore/wire"
)

func forgetCommand(getenv func(string) string, stdout io.Writer) *cli.Command {
	return &cli.Command{
		Name:  "forget",
		Usage: "remove one session everywhere lkscore keeps it, and report what could not be removed",
		Description: "Removes the session's stored objects (local directory or S3, as the config says), its facts,\n" +
			"and its scorecards, work items, upload notices, dead letters and agent_job_ended webhooks from the\n" +
			"streams. Exit 1 when something could not be removed.",
		Flags: append(append(toolFlags(), offline.FormatFlags("print the report as JSON")...),
			&cli.StringFlag{Name: "session", Usage: "the session key, room_id/job_id", Required: true},
		),
		Action: func(ctx context.Context, c *cli.Command) error {
			if _, _, err := wire.ParseSessionKey(c.String("session")); err != nil {
				return exitError{code: 2, err: fmt.Errorf("forget: --session: %w", err)}
			}
			asJSON, err := offline.WantJSON(c)
			if err != nil {
				return err
			}
			js, subj, cfg, closeFn, err := toolNATS(c, getenv)
			if err != nil {
				return err
			}
			defer closeFn()
			if c.IsSet("data-dir") {
				cfg.DataDir = c.String("data-dir")
			}
			st, err := store.Open(ctx, cfg)
			if err != nil {
				return exitError{code: 1, err: err}
			}
			layout, err := cfg.Layout()
			if err != nil {
				return exitError{code: 2, err: err}
			}
			steps := forget.Run(ctx, js, subj, st, layout, cfg.NATS.RequestTimeout, c.String("session"))
			if err := printForget(stdout, steps, asJSON); err != nil {
				return exitError{code: 1, err: err}
			}
			for _, s := range steps {
				if s.Err != "" {
					return exitError{code: 1, err: errors.New("forget: some places could not be cleared (see the report)")}
				}
			}
			return nil
		},
	}
}

func printForget(w io.Writer, steps []forget.Step, asJSON bool) error {
	if asJSON {
		return json.NewEncoder(w).Encode(steps)
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "PLACE\tREMOVED\tNOTE")
	for _, s := range steps {
		note := s.Note
		if s.Err != "" {
			note = "ERROR: " + s.Err
		}
		fmt.Fprintf(tw, "%s\t%d\t%s\n", s.Place, s.Removed, note)
	}
	return tw.Flush()
}
