package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/urfave/cli/v3"

	"github.com/lkscore/lkscore/cmd/lkscore/offline"
	"github.com/lkscore/lkscore/consumer/rescore"
	"github.com/lkscore/lkscore/store"
)

func rescoreCommand(getenv func(string) string, stdout, stderr io.Writer) *cli.Command {
	return &cli.Command{
		Name:  "rescore",
		Usage: "score stored sessions again under a config's scoring model and show what changes (--dry-run), or publish it",
		Description: "Reads the sessions the streams hold since --since (their work items, recordings and facts as\n" +
			"retention keeps them), scores them under the scoring section of --config (or LKSCORE_CONFIG), and prints\n" +
			"verdict changes by agent and the sessions that moved most. Without --dry-run the workers publish the new\n" +
			"scorecards under the new scoring version, one per session; run it again after an interruption and it goes\n" +
			"on where it stopped. Sessions whose data retention removed are listed. See docs/policies.md.",
		Flags: append(append(toolFlags(), offline.FormatFlags("print the report as JSON, every changed session included")...),
			&cli.StringFlag{Name: "since", Value: "7d", Usage: "sessions stored since: a duration (7d, 36h) or an RFC 3339 time"},
			&cli.StringFlag{Name: "agent", Usage: "only this agent's sessions"},
			&cli.BoolFlag{Name: "dry-run", Usage: "print the diff; publish nothing"},
			&cli.StringFlag{Name: "audio", Value: "reuse", Usage: "reuse (a session's audio measurement from its scorecard when this " +
				"scoring model made it) or measure (every recording again: after changing scoring.audio.awkward_silence_ms or audio.max_duration)"},
			&cli.IntFlag{Name: "in-flight", Value: 256, Usage: "rescore items enqueued ahead of what the workers published"},
			&cli.DurationFlag{Name: "wait", Value: 10 * time.Minute, Usage: "how long to wait for the workers once everything is enqueued"},
		),
		Action: func(ctx context.Context, c *cli.Command) error {
			asJSON, err := offline.WantJSON(c)
			if err != nil {
				return err
			}
			since, err := parseSince(c.String("since"), time.Now())
			if err != nil {
				return exitError{code: 2, err: fmt.Errorf("rescore: --since: %w", err)}
			}
			audio := c.String("audio")
			if audio != "reuse" && audio != "measure" {
				return exitError{code: 2, err: fmt.Errorf("rescore: --audio %q is not reuse or measure", audio)}
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
			rep, err := rescore.Run(ctx, js, subj, cfg, st, rescore.Options{Since: since, Agent: c.String("agent"),
				DryRun: c.Bool("dry-run"), MeasureAudio: audio == "measure", InFlight: int(c.Int("in-flight")), Wait: c.Duration("wait"),
				Progress: stderr})
			if err != nil {
				return exitError{code: 1, err: fmt.Errorf("rescore: %w", err)}
			}
			if asJSON {
				err = json.NewEncoder(stdout).Encode(rep)
			} else {
				err = rescore.WriteReport(stdout, rep)
			}
			if err != nil {
				return exitError{code: 1, err: err}
			}
			if !rep.DryRun && len(rep.NotYetPublished) > 0 {
				return exitError{code: 1, err: fmt.Errorf("rescore: %d sessions not published yet: run it again", len(rep.NotYetPublished))}
			}
			return nil
		},
	}
}

// parseSince reads a point in time: a duration back from now (with d for
// days), or an RFC 3339 time.
func parseSince(s string, now time.Time) (time.Time, error) {
	if days, ok := strings.CutSuffix(s, "d"); ok {
		n, err := strconv.ParseFloat(days, 64)
		if err == nil && n > 0 {
			return now.Add(-time.Duration(n * 24 * float64(time.Hour))), nil
		}
	}
	if d, err := time.ParseDuration(s); err == nil && d > 0 {
		return now.Add(-d), nil
	}
	if t, err := time.Parse(time.RFC3339, s); err == nil {
		return t, nil
	}
	return time.Time{}, fmt.Errorf("%q is neither a duration (7d, 36h) nor an RFC 3339 time", s)
}
