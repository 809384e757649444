package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"

	"github.com/lkscore/lkscore/cmd/lkscore/offline"
	"github.com/lkscore/lkscore/consumer/cases"
)

// checkCases is `lkscore check --cases DIR`: every case scored again and
// compared with its expectation; exit 3 when one differs, 1 when one
// cannot be scored. It lives here, not in package offline: scoring a case
// takes the worker's input code (consumer/cases), which offline does not
// link.
func checkCases(ctx context.Context, w io.Writer, dir string, asJSON bool) error {
	dirs, err := cases.Dirs(dir)
	if err != nil {
		return offline.ExitError{Code: 2, Err: fmt.Errorf("check: %w", err)}
	}
	var results []cases.Result
	failed, broken := 0, 0
	for _, d := range dirs {
		r := cases.Check(ctx, d)
		results = append(results, r)
		switch {
		case r.Err != nil:
			broken++
		case !r.OK():
			failed++
		}
	}
	if asJSON {
		if err := printCasesJSON(w, results); err != nil {
			return offline.ExitError{Code: 1, Err: err}
		}
	} else {
		for _, r := range results {
			printCase(w, r)
		}
		fmt.Fprintf(w, "%d cases: %d as expected, %d differ, %d could not be scored\n", len(results), len(results)-failed-broken, failed, broken)
	}
	switch {
	case broken > 0:
		return offline.ExitError{Code: 1, Err: fmt.Errorf("check: %d of %d cases could not be scored", broken, len(results))}
	case failed > 0:
		return offline.ExitError{Code: offline.ExitGate, Err: fmt.Errorf("check: %d of %d cases did not get what they expect", failed, len(results))}
	}
	return nil
}

func printCase(w io.Writer, r cases.Result) {
	switch {
	case r.Err != nil:
		fmt.Fprintf(w, "case %s (%s): NOT SCORED: %v\n", r.Session, r.Dir, r.Err)
	case r.OK():
		fmt.Fprintf(w, "case %s (%s): ok: %s, %d findings\n", r.Session, r.Dir, r.Got.Verdict, len(r.Got.Findings))
	default:
		fmt.Fprintf(w, "case %s (%s): DIFFERS\n", r.Session, r.Dir)
		for _, d := range r.Diff {
			fmt.Fprintf(w, "  %s\n", d)
		}
	}
}

func printCasesJSON(w io.Writer, results []cases.Result) error {
	type out struct {
		Dir     string        `json:"dir"`
		Session string        `json:"session"`
		OK      bool          `json:"ok"`
		Error   string        `json:"error,omitempty"`
		Want    cases.Expect  `json:"want"`
		Got     *cases.Expect `json:"got,omitempty"`
		Diff    []string      `json:"diff,omitempty"`
	}
	var all []out
	for _, r := range results {
		o := out{Dir: r.Dir, Session: r.Session, OK: r.OK(), Want: r.Want, Diff: r.Diff}
		if r.Err != nil {
			o.Error = r.Err.Error()
		} else {
			got := r.Got
			o.Got = &got
		}
		all = append(all, o)
	}
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(all)
}
