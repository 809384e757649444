// Command testsummary reads `go test -json` from stdin and prints what `go
// test` prints (a line per package, the output of failing tests), then the
// tests that were skipped with the reason each gave, which names what to
// install to run it. tools/test.sh, the README's test command, uses it:
//
//	go test -json ./... | go run ./tools/testsummary
//
// It exits 1 when a test or a build failed.
package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"sort"
	"strings"
)

// event is one line of test2json's output (go doc test2json).
type event struct {
	Action      string
	Package     string
	Test        string
	Elapsed     float64
	Output      string
	ImportPath  string
	FailedBuild string
}

type key struct{ pkg, test string }

func main() {
	failed, err := summarize(os.Stdin, os.Stdout)
	if err != nil {
		fmt.Fprintln(os.Stderr, "testsummary:", err)
		os.Exit(2)
	}
	if failed {
		os.Exit(1)
	}
}

func summarize(r io.Reader, w io.Writer) (failed bool, err error) {
	output := map[key][]string{} // a test's (or package's) output, until it ends
	var skips []string
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<20), 16<<20)
	for sc.Scan() {
		var e event
		if json.Unmarshal(sc.Bytes(), &e) != nil {
			fmt.Fprintln(w, sc.Text()) // not test2json: pass it through
			continue
		}
		k := key{e.Package, e.Test}
		switch e.Action {
		case "output", "build-output":
			output[k] = append(output[k], e.Output)
		case "skip":
			if e.Test != "" {
				skips = append(skips, fmt.Sprintf("%s %s: %s", e.Package, e.Test, reason(output[k])))
			} else if e.Package != "" {
				fmt.Fprint(w, strings.Join(output[k], ""))
			}
			delete(output, k)
		case "fail", "build-fail":
			failed = true
			fmt.Fprint(w, strings.Join(output[k], ""))
			delete(output, k)
		case "pass":
			if e.Test == "" {
				// the package's own line, "ok  pkg 1.2s", as go test prints it
				for _, l := range output[k] {
					if l != "PASS\n" && l != "testing: warning: no tests to run\n" {
						fmt.Fprint(w, l)
					}
				}
			}
			delete(output, k)
		}
	}
	if err := sc.Err(); err != nil {
		return failed, err
	}
	sort.Strings(skips)
	if len(skips) > 0 {
		fmt.Fprintf(w, "\n%d tests skipped, each with its reason (CI installs the tools the others need, so only generators skip there):\n", len(skips))
		for _, s := range skips {
			fmt.Fprintln(w, "  "+s)
		}
	}
	return failed, nil
}

// reason is the skip message among a test's output lines.
func reason(lines []string) string {
	for _, l := range lines {
		l = strings.TrimSpace(l)
		if l == "" || strings.HasPrefix(l, "=== ") || strings.HasPrefix(l, "--- SKIP") {
			continue
		}
		if i := strings.Index(l, ": "); i > 0 && strings.Contains(l[:i], ".go:") {
			l = l[i+2:]
		}
		return l
	}
	return "(no reason given)"
}
