package offline

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	"github.com/urfave/cli/v3"

	"github.com/lkscore/lkscore/config"
	"github.com/lkscore/lkscore/recording"
	"github.com/lkscore/lkscore/scoring"
	"github.com/lkscore/lkscore/session"
)

// ExitGate is the exit code when --fail-on trips.
const ExitGate = 3

// Score is `lkscore score`.
func Score(getenv func(string) string, stdout io.Writer) *cli.Command {
	return &cli.Command{
		Name:      "score",
		Usage:     "score recording uploads and print their scorecards",
		ArgsUsage: "PATH… (session directories, header.binpb files, multipart upload files, s3:// URLs)",
		Description: "Exit codes: 0 scored (and the gate passed), 1 a recording could not be read,\n" +
			"2 bad usage or config, 3 a scorecard tripped --fail-on.",
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "format", Value: "json", Usage: "json (one scorecard per line) or table"},
			&cli.BoolFlag{Name: "json", Usage: "one scorecard per line as JSON (the same as --format json, the default)"},
			&cli.StringFlag{Name: "fail-on", Usage: "warn or fail: exit 3 when any verdict is at least this bad"},
			&cli.StringFlag{Name: "config", Usage: "config file whose scoring section sets weights and thresholds (env LKSCORE_CONFIG)"},
			&cli.StringFlag{Name: "agent", Aliases: []string{"agent-name"}, Usage: "agent name to put in the scorecards (--agent-name is the same)"},
		},
		Action: func(ctx context.Context, c *cli.Command) error { return score(ctx, c, getenv, stdout) },
	}
}

// verdict is what the gate keeps of a scorecard.
type verdict struct{ key, verdict string }

// gate returns why --fail-on trips, or "".
func gate(cards []verdict, failOn string) string {
	if failOn == "" {
		return ""
	}
	var bad []string
	for _, sc := range cards {
		if sc.verdict == session.Fail || (failOn == session.Warn && sc.verdict == session.Warn) {
			bad = append(bad, sc.key+" "+sc.verdict)
		}
	}
	if len(bad) == 0 {
		return ""
	}
	return fmt.Sprintf("--fail-on %s: %d of %d sessions: %s", failOn, len(bad), len(cards), strings.Join(bad, ", "))
}

// cardEncoder writes scorecards as `lkscore score` prints them: JSON
// Lines, one scorecard per line, the bytes the daemon publishes (for jq,
// `jq .` indents them), through one reused buffer.
type cardEncoder struct {
	w   io.Writer
	buf []byte
}

func newCardEncoder(w io.Writer) *cardEncoder {
	return &cardEncoder{w: w, buf: make([]byte, 0, 16<<10)}
}

// Encode writes sc and a newline, as json.Encoder's Encode does.
func (e *cardEncoder) Encode(sc *session.Scorecard) error {
	b, err := sc.AppendJSON(e.buf[:0])
	if err != nil {
		return err
	}
	e.buf = append(b, '\n')
	_, err = e.w.Write(e.buf)
	return err
}

// PrintScorecards prints scorecards as JSON Lines (one per line) or as a table
// followed by the findings that cost points.
func PrintScorecards(w io.Writer, format string, cards []session.Scorecard) error {
	if format == "json" {
		enc := newCardEncoder(w)
		for i := range cards {
			if err := enc.Encode(&cards[i]); err != nil {
				return err
			}
		}
		return nil
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "SESSION\tVERDICT\tOVERALL\tTURNS\tTRANSCRIPT\tTOOLS\tLATENCY\tE2E P95 MS\tCLOSE REASON")
	for _, sc := range cards {
		p95 := "-"
		if v := sc.Metrics.E2ELatencyP95Ms; v.Set {
			p95 = fmt.Sprintf("%g", v.V)
		}
		// "-" for what was not measured: a score of 0 would be a claim.
		overall := fmt.Sprintf("%g", sc.Overall.Score)
		if sc.Overall.Verdict == session.Unscored {
			overall = "-"
		}
		comp := func(c session.Component) string {
			if c.Verdict == session.NotMeasured {
				return "-"
			}
			return fmt.Sprintf("%g", c.Score)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", sc.Session.Key, sc.Overall.Verdict, overall,
			comp(sc.Components[0]), comp(sc.Components[1]), comp(sc.Components[2]), comp(sc.Components[3]), p95, sc.Completion.CloseReason)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	for _, sc := range cards {
		var lines []string
		for _, comp := range sc.Components {
			for _, f := range comp.Findings {
				if f.Deduction > 0 {
					lines = append(lines, fmt.Sprintf("  -%g %s %s: %s", f.Deduction, comp.Name, f.Code, f.Message))
				}
			}
		}
		if len(lines) > 0 {
			fmt.Fprintf(w, "\n%s (%s):\n%s\n", sc.Session.Key, strings.Join(sc.Overall.Reasons, "; "), strings.Join(lines, "\n"))
		}
	}
	return nil
}

// score is `lkscore score`.
func score(ctx context.Context, c *cli.Command, getenv func(string) string, stdout io.Writer) error {
	if c.Args().Len() == 0 {
		return ExitError{Code: 2, Err: errors.New("score: want at least one PATH")}
	}
	format, failOn := c.String("format"), c.String("fail-on")
	if format != "json" && format != "table" {
		return ExitError{Code: 2, Err: fmt.Errorf("score: --format %q is not json or table", format)}
	}
	if c.Bool("json") && format != "json" {
		return ExitError{Code: 2, Err: fmt.Errorf("score: --json and --format %s disagree", format)}
	}
	if failOn != "" && failOn != session.Warn && failOn != session.Fail {
		return ExitError{Code: 2, Err: fmt.Errorf("score: --fail-on %q is not warn or fail", failOn)}
	}
	path := c.String("config")
	if path == "" {
		path = getenv("LKSCORE_CONFIG")
	}
	scorer, err := config.LoadScorer(path)
	if err != nil {
		return ExitError{Code: 2, Err: err}
	}
	// JSON is written as each session is scored (nothing kept but
	// the verdicts); the table needs every row first. One session
	// after another is decoded into the same memory (dec, items): a
	// JSON card is written before the next session reuses it, the
	// table's cards are copied (docs/performance.md, "lkscore score").
	var cards []session.Scorecard
	var verdicts []verdict
	var dec *recording.ChatDecoder
	var items []scoring.Item
	if format == "json" {
		dec = new(recording.ChatDecoder)
	}
	w := bufio.NewWriterSize(stdout, 64<<10)
	enc := newCardEncoder(w)
	for _, src := range c.Args().Slice() {
		out, err := loadSession(ctx, src, getenv, dec)
		if err != nil {
			_ = w.Flush()
			return ExitError{Code: 1, Err: fmt.Errorf("score %s: %w", src, err)}
		}
		in := out.Session.ScoringInputInto(items, src, c.String("agent"))
		if dec != nil {
			items = in.Items
		}
		if in.Audio, err = localAudio(src, scorer.Audio()); err != nil {
			_ = w.Flush()
			return ExitError{Code: 1, Err: fmt.Errorf("score %s: %w", src, err)}
		}
		card := scorer.Score(in)
		verdicts = append(verdicts, verdict{card.Session.Key, card.Overall.Verdict})
		if format == "table" {
			cards = append(cards, card)
		} else if err := enc.Encode(&card); err != nil {
			return ExitError{Code: 1, Err: err}
		}
	}
	if format == "table" {
		if err := PrintScorecards(w, format, cards); err != nil {
			return ExitError{Code: 1, Err: err}
		}
	}
	if err := w.Flush(); err != nil {
		return ExitError{Code: 1, Err: err}
	}
	if tripped := gate(verdicts, failOn); tripped != "" {
		return ExitError{Code: ExitGate, Err: errors.New(tripped)}
	}
	return nil
}
