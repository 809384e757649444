package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/urfave/cli/v3"

	"github.com/lkscore/lkscore/consumer/cases"
	"github.com/lkscore/lkscore/store"
	"github.com/lkscore/lkscore/wire"
)

// caseCommand is `lkscore case`: a scored session kept as a test.
func caseCommand(getenv func(string) string, stdout io.Writer) *cli.Command {
	return &cli.Command{
		Name:  "case",
		Usage: "turn a scored session into a case for lkscore check --cases, or a test for the agents SDKs' testing frameworks",
		Commands: []*cli.Command{{
			Name:  "export",
			Usage: "export a scored session: a case directory (or its archive), a pytest test or a vitest test",
			Description: "Reads the session's scorecard and work item from the streams and its recording from the store\n" +
				"(as lkscore serve's config says) and writes a case (docs/cases.md): the recording's header and\n" +
				"chat history as stored (none for a redacted session), the scorecard, the scoring config that\n" +
				"judged it, and the expectation to edit. --format pytest|vitest writes a test that replays the\n" +
				"caller's turns against your agent with the SDK's testing API and asserts what the call got wrong.",
			Flags: append(toolFlags(),
				&cli.StringFlag{Name: "session", Usage: "the session key, room_id/job_id", Required: true},
				&cli.StringFlag{Name: "format", Value: "case", Usage: "case (a directory), pytest or vitest"},
				&cli.StringFlag{Name: "out", Usage: "where to write: the case directory (default ./<room_id>-<job_id>), " +
					"or the test file (a test goes to stdout unless --out names a file)"},
				&cli.StringFlag{Name: "archive", Usage: "write the case as one tar file instead (what the dashboard's export button serves); - for stdout"},
			),
			Action: func(ctx context.Context, c *cli.Command) error { return exportCase(ctx, c, getenv, stdout) },
		}},
	}
}

func exportCase(ctx context.Context, c *cli.Command, getenv func(string) string, stdout io.Writer) error {
	key, format := c.String("session"), c.String("format")
	if _, _, err := wire.ParseSessionKey(key); err != nil {
		return exitError{code: 2, err: fmt.Errorf("case export: --session: %w", err)}
	}
	if format != "case" && format != "pytest" && format != "vitest" {
		return exitError{code: 2, err: fmt.Errorf("case export: --format %q: want case, pytest or vitest", format)}
	}
	if c.IsSet("archive") && format != "case" {
		return exitError{code: 2, err: errors.New("case export: --archive writes a case; a test is one file (--out)")}
	}
	js, subj, cfg, closeFn, err := toolNATS(c, getenv)
	if err != nil {
		return err
	}
	defer closeFn()
	st, err := store.Open(ctx, cfg)
	if err != nil {
		return exitError{code: 1, err: err}
	}
	scorer, err := cfg.Scorer()
	if err != nil {
		return exitError{code: 2, err: err}
	}
	files, err := cases.Exporter{JS: js, Subjects: subj, Store: st, Config: cfg, Scorer: scorer, Wait: cfg.NATS.RequestTimeout}.Export(ctx, key)
	if err != nil {
		return exitError{code: 1, err: err}
	}
	name := cases.Name(key)
	var data []byte
	out := c.String("out")
	switch {
	case format == "pytest": // stdout unless --out: `> test_x.py` holds the test alone
		data, err = files.Pytest()
		out = orDefault(out, "-")
	case format == "vitest":
		data, err = files.Vitest()
		out = orDefault(out, "-")
	case c.IsSet("archive"):
		data, err = files.Archive(name)
		out = c.String("archive")
	default:
		dir := orDefault(out, name)
		if err := files.WriteDir(dir); err != nil {
			return exitError{code: 1, err: fmt.Errorf("case export: %w", err)}
		}
		_, err = fmt.Fprintf(stdout, "case %s written to %s; edit %s/%s, then: lkscore check --cases %s\n", key, dir, dir, cases.FileCase, dir)
		return err
	}
	if err != nil {
		return exitError{code: 1, err: fmt.Errorf("case export: %w", err)}
	}
	if out == "-" {
		_, err = stdout.Write(data)
		return err
	}
	if err := os.WriteFile(out, data, 0o644); err != nil {
		return exitError{code: 1, err: fmt.Errorf("case export: %w", err)}
	}
	_, err = fmt.Fprintf(stdout, "%s of %s written to %s\n", format, key, out)
	return err
}

// orDefault is s, or def when s is empty.
func orDefault(s, def string) string {
	if s == "" {
		return def
	}
	return s
}
