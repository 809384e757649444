package main

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestReadmeConsumerSnippet: the README's consumer program, pasted as it is
// into main.go of a new module (go mod init, go mod tidy, with lkscore
// replaced by this checkout), builds and prints the sessions lkscore bench
// sent to a daemon, one line each, then stops.
func TestReadmeConsumerSnippet(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: builds a module")
	}
	readme, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	_, rest, ok := strings.Cut(string(readme), "### Consume scorecards")
	if !ok {
		t.Fatal(`README has no "### Consume scorecards"`)
	}
	_, rest, ok1 := strings.Cut(rest, "```go\n")
	code, _, ok2 := strings.Cut(rest, "```")
	if !ok1 || !ok2 || !strings.HasPrefix(code, "package main") {
		t.Fatalf("the section's Go block is not a program: %.80q", code)
	}
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "main.go"), []byte(code), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{{"mod", "init", "example.com/scorecards"}, {"mod", "edit", "-replace", "github.com/lkscore/lkscore=" + root},
		{"mod", "tidy"}, {"build", "-o", "scorecards", "."}} {
		cmd := exec.Command("go", args...)
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), "GOFLAGS=-mod=mod")
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("go %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}

	d, _ := startTestDaemon(t)
	rep, exit, stderr := benchRun(t, d.NATSURL(), d.IngestAddr(), "--sessions", "5", "--concurrency", "2")
	if exit != 0 || rep["scored"] != 5.0 {
		t.Fatalf("bench: exit %d, %v: %s", exit, rep, stderr)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, filepath.Join(dir, "scorecards"))
	cmd.Env = append(os.Environ(), "LKSCORE_NATS_URL="+d.NATSURL())
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("the snippet: %v\n%s", err, out)
	}
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	if len(lines) != 5 {
		t.Fatalf("the snippet printed %d lines for 5 sessions:\n%s", len(lines), out)
	}
	for _, l := range lines {
		if f := strings.Fields(l); len(f) != 4 || !strings.Contains(f[0], "/") {
			t.Errorf("line %q: want session key, agent, verdict, score", l)
		}
	}
}
