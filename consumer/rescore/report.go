package rescore

import (
	"fmt"
	"io"
	"sort"
	"strings"
)

// WriteReport prints a rescore's report for people.
func WriteReport(w io.Writer, rep Report) error {
	var b strings.Builder
	mode := "dry run: nothing published"
	if !rep.DryRun {
		mode = "published through the workers"
	}
	fmt.Fprintf(&b, "rescore under scoring %s (was %s), since %s: %d sessions, %d rescored (%s)\n", rep.ScoringVersion,
		orNone(strings.Join(rep.OldVersions, ", ")), rep.Since, rep.Sessions, rep.Rescored, mode)
	if rep.AudioReused > 0 {
		fmt.Fprintf(&b, "audio: %d measurements reused from scorecards of this model, %d measured (--audio measure measures all)\n",
			rep.AudioReused, rep.AudioMeasured)
	}
	b.WriteString("\nverdicts by agent\n")
	for _, a := range rep.Agents {
		var moves []string
		for k, n := range a.Transitions {
			moves = append(moves, fmt.Sprintf("%s %d", k, n))
		}
		sort.Strings(moves)
		if len(moves) == 0 {
			moves = []string{"no verdict changed"}
		}
		name := a.Agent
		if name == "" {
			name = "(no agent)"
		}
		fmt.Fprintf(&b, "  %-20s %5d sessions  mean score %+.2f  %s", name, a.Sessions, a.MeanDelta, strings.Join(moves, ", "))
		if a.New > 0 {
			fmt.Fprintf(&b, ", %d without an earlier scorecard", a.New)
		}
		if len(a.Violations) > 0 {
			var vs []string
			for r, n := range a.Violations {
				vs = append(vs, fmt.Sprintf("%s %d", r, n))
			}
			sort.Strings(vs)
			fmt.Fprintf(&b, "; rules violated: %s", strings.Join(vs, ", "))
		}
		b.WriteString("\n")
	}
	if len(rep.Movers) > 0 {
		b.WriteString("\nsessions that moved most\n")
		for _, m := range rep.Movers {
			fmt.Fprintf(&b, "  %s (%s): %s %.2f → %s %.2f\n", m.Session, orNone(m.Agent), m.Old.Verdict, m.Old.Score, m.New.Verdict, m.New.Score)
			fmt.Fprintf(&b, "      old findings: %s\n      new findings: %s\n", orNone(strings.Join(m.Old.Findings, " ")),
				orNone(strings.Join(m.New.Findings, " ")))
			if len(m.New.RulesViolated) > 0 {
				fmt.Fprintf(&b, "      rules violated: %s\n", strings.Join(m.New.RulesViolated, " "))
			}
		}
	}
	fmt.Fprintf(&b, "\n%d sessions changed (verdict, score, findings or rules); --json lists each\n", len(rep.Changed))
	if len(rep.Removed) > 0 {
		fmt.Fprintf(&b, "\n%d sessions could not be rescored, their data removed:\n", len(rep.Removed))
		for _, m := range rep.Removed {
			fmt.Fprintf(&b, "  %s (%s): %s\n", m.Session, orNone(m.Agent), m.Why)
		}
	}
	if len(rep.Failed) > 0 {
		fmt.Fprintf(&b, "\n%d sessions failed:\n", len(rep.Failed))
		for _, m := range rep.Failed {
			fmt.Fprintf(&b, "  %s (%s): %s\n", m.Session, orNone(m.Agent), m.Why)
		}
	}
	if !rep.DryRun {
		fmt.Fprintf(&b, "\npublished under %s: %d already before this run, %d enqueued now, %d published by the workers\n",
			rep.ScoringVersion, rep.AlreadyPublished, rep.Enqueued, rep.Published)
		if n := len(rep.NotYetPublished); n > 0 {
			fmt.Fprintf(&b, "%d not published yet (the workers are behind, or dead-lettered them: lkscore dlq list --stage score); "+
				"run the same command again: nothing is enqueued twice\n", n)
		}
		if n := len(rep.Mismatched); n > 0 {
			fmt.Fprintf(&b, "%d published scorecards differ from this run's (the workers' audio settings differ, or the audio was reused: "+
				"--audio measure): %s\n", n, strings.Join(rep.Mismatched[:min(n, 10)], " "))
		}
	}
	_, err := io.WriteString(w, b.String())
	return err
}

func orNone(s string) string {
	if s == "" {
		return "none"
	}
	return s
}
