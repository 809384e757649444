package offline

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"text/tabwriter"

	"github.com/urfave/cli/v3"

	"github.com/lkscore/lkscore/config"
	"github.com/lkscore/lkscore/regress"
	"github.com/lkscore/lkscore/session"
)

// ScoreSamples scores recordings (as `lkscore score` reads them) with the
// scoring section of the config file at configPath, and returns the
// regression samples, in argument order, and the scoring version.
func ScoreSamples(ctx context.Context, paths []string, configPath, agentName string, getenv func(string) string) ([]regress.Sample, string, error) {
	scorer, err := config.LoadScorer(configPath)
	if err != nil {
		return nil, "", ExitError{Code: 2, Err: err}
	}
	var out []regress.Sample
	for i, src := range paths {
		s, err := loadSession(ctx, src, getenv, nil)
		if err != nil {
			return nil, "", ExitError{Code: 1, Err: fmt.Errorf("score %s: %w", src, err)}
		}
		in := s.Session.ScoringInput(src, agentName)
		if in.Audio, err = localAudio(src, scorer.Audio()); err != nil {
			return nil, "", ExitError{Code: 1, Err: fmt.Errorf("score %s: %w", src, err)}
		}
		card := scorer.Score(in)
		if !card.Comparable() && card.Overall.Verdict != session.Fail {
			continue // no evidence, or a silent caller: not a sample
		}
		out = append(out, regress.SampleOf(&card, uint64(i+1)))
	}
	return out, scorer.VersionFor(agentName), nil
}

// CasesChecker checks the cases under dir (lkscore check --cases).
type CasesChecker func(ctx context.Context, w io.Writer, dir string, asJSON bool) error

// Check is `lkscore check`: the CI gate for agent changes; checkCases
// serves --cases.
func Check(getenv func(string) string, stdout io.Writer, checkCases CasesChecker) *cli.Command {
	return &cli.Command{
		Name:      "check",
		Usage:     "score recordings and compare them with a baseline file, or score cases against their expectations; exit 3 when they regress",
		ArgsUsage: "PATH… (session directories, header.binpb files, multipart upload files, s3:// URLs; none with --cases)",
		Description: "Scores the recordings (e.g. a simulation run of a changed agent) and compares them with the\n" +
			"baseline, metric by metric, as the daemon compares a new version with the previous one\n" +
			"(docs/regression.md). Prints what moved and by how much. With --cases, scores every case\n" +
			"(lkscore case export) again and compares each card with the case's expectation (docs/cases.md).\n" +
			"Exit codes: 0 no regression, 1 a recording or case could not be read, 2 bad usage, baseline or\n" +
			"config, 3 a metric regressed or a case did not get what it expects.",
		Flags: append([]cli.Flag{
			&cli.StringFlag{Name: "baseline", Usage: "baseline file (lkscore baseline build or export)"},
			&cli.StringFlag{Name: "cases", Usage: "a case directory, or a directory of them (lkscore case export): check each against its expectation"},
			&cli.StringFlag{Name: "config", Usage: "config file: its scoring section, and regression.min_effect and fdr (env LKSCORE_CONFIG)"},
			&cli.StringFlag{Name: "agent", Aliases: []string{"agent-name"}, Usage: "agent name to put in the scorecards (--agent-name is the same)"},
			&cli.IntFlag{Name: "min-sessions", Value: 5, Usage: "judge only with at least this many sessions on each side"},
		}, FormatFlags("print the comparison as JSON")...),
		Action: func(ctx context.Context, c *cli.Command) error {
			asJSON, err := WantJSON(c)
			if err != nil {
				return err
			}
			switch {
			case c.IsSet("cases") && (c.IsSet("baseline") || c.Args().Len() > 0):
				return ExitError{Code: 2, Err: errors.New("check: --cases takes no --baseline and no PATH: each case holds its recording and expectation")}
			case c.IsSet("cases"):
				return checkCases(ctx, stdout, c.String("cases"), asJSON)
			case !c.IsSet("baseline"):
				return ExitError{Code: 2, Err: errors.New("check: want --baseline FILE and PATH…, or --cases DIR")}
			case c.Args().Len() == 0:
				return ExitError{Code: 2, Err: errors.New("check: want at least one PATH")}
			}
			data, err := os.ReadFile(c.String("baseline"))
			if err != nil {
				return ExitError{Code: 2, Err: fmt.Errorf("check: %w", err)}
			}
			base, err := regress.ParseBaseline(data)
			if err != nil {
				return ExitError{Code: 2, Err: fmt.Errorf("check: %s: %w", c.String("baseline"), err)}
			}
			path := c.String("config")
			if path == "" {
				path = getenv("LKSCORE_CONFIG")
			}
			det := regress.DefaultConfig()
			if path != "" {
				full, err := config.LoadForTools(path, func(string) string { return "" }, nil)
				if err != nil {
					return ExitError{Code: 2, Err: err}
				}
				det = full.Regression.Detect
			}
			det.MinSessions = int(c.Int("min-sessions"))
			samples, version, err := ScoreSamples(ctx, c.Args().Slice(), path, c.String("agent"), getenv)
			if err != nil {
				return err
			}
			if version != base.ScoringVersion {
				return ExitError{Code: 2, Err: fmt.Errorf("check: the baseline was scored with scoring version %s, these recordings with %s: "+
					"scores of different scoring versions are never compared; rebuild the baseline with this config", base.ScoringVersion, version)}
			}
			cmp := regress.Compare(base.Samples, samples, det)
			if err := printComparison(stdout, base, len(samples), cmp, asJSON); err != nil {
				return ExitError{Code: 1, Err: err}
			}
			if !cmp.Judged {
				return ExitError{Code: 2, Err: fmt.Errorf("check: not judged: %s", cmp.Why)}
			}
			if len(cmp.Regressed) > 0 {
				return ExitError{Code: ExitGate, Err: fmt.Errorf("check: regressed against baseline %s: %s", base.ID, strings.Join(cmp.Regressed, ", "))}
			}
			return nil
		},
	}
}

func printComparison(w io.Writer, base regress.Baseline, n int, c regress.Comparison, asJSON bool) error {
	if asJSON {
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		return enc.Encode(struct {
			Baseline string             `json:"baseline"`
			Result   regress.Comparison `json:"result"`
		}{base.ID, c})
	}
	fmt.Fprintf(w, "baseline %s: agent %s, version %s, %d sessions; current: %d sessions\n", base.ID, base.Agent, base.Version, len(base.Samples), n)
	if !c.Judged {
		_, err := fmt.Fprintf(w, "not judged: %s\n", c.Why)
		return err
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "METRIC\tBASELINE\tCURRENT\tEFFECT\tMIN EFFECT\tQ\tTEST\t")
	for _, m := range c.Metrics {
		mark := ""
		if m.Regressed {
			mark = "REGRESSED"
		}
		fmt.Fprintf(tw, "%s\t%g\t%g\t%+g\t%g\t%.3g\t%s\t%s\n", m.Metric, m.Baseline, m.Current, m.Effect, m.MinEffect, m.Q, m.Test, mark)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if len(c.Regressed) == 0 {
		_, err := fmt.Fprintln(w, "no regression")
		return err
	}
	fmt.Fprintf(w, "regressed: %s\n", strings.Join(c.Regressed, ", "))
	if len(c.CodesGrown) > 0 {
		fmt.Fprintln(w, "finding codes that grew (share of sessions, baseline → current):")
		for _, cg := range c.CodesGrown {
			fmt.Fprintf(w, "  %s: %.0f%% → %.0f%%\n", cg.Code, 100*cg.Baseline, 100*cg.Current)
		}
	}
	fmt.Fprintln(w, "worst sessions:")
	for _, s := range c.WorstSessions {
		fmt.Fprintf(w, "  %s (overall %g)\n", s.Session, s.Overall)
	}
	return nil
}
