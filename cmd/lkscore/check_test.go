package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/lkscore/lkscore/internal/population"
	"github.com/lkscore/lkscore/regress"
	"github.com/lkscore/lkscore/scoring"
)

// scenarioDirs are the acceptance scenarios scored from their recording
// alone (not 8_room_deleted_no_logs, whose facts come from its webhooks):
// the six with a chat history and 7_header_only, which is unscored.
func scenarioDirs(t *testing.T) []string {
	t.Helper()
	all, err := filepath.Glob("../../scenarios/data/*")
	var dirs []string
	for _, d := range all {
		if _, err := os.Stat(filepath.Join(d, "webhooks.jsonl")); err != nil {
			dirs = append(dirs, d)
		}
	}
	if err != nil || len(dirs) != 7 {
		t.Fatalf("scenarios: %v %v", dirs, err)
	}
	return dirs
}

func runCLI(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	var out, errb bytes.Buffer
	code := run(context.Background(), append([]string{"lkscore"}, args...), func(string) string { return "" }, &out, &errb)
	return code, out.String(), errb.String()
}

// cleanBaseline writes a baseline of 30 clean generated sessions.
func cleanBaseline(t *testing.T) string {
	t.Helper()
	scorer, err := scoring.NewScorer(scoring.DefaultConfig())
	if err != nil {
		t.Fatal(err)
	}
	var samples []regress.Sample
	for i, card := range population.Generate(scorer, population.Clean("booking-agent", "1.0"), 1, 30) {
		samples = append(samples, regress.SampleOf(&card, uint64(i+1)))
	}
	data, _ := json.Marshal(regress.NewBaseline("booking-agent", "1.0", scorer.Version(), samples))
	path := filepath.Join(t.TempDir(), "clean.json")
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestCheckGate: the six acceptance scenarios pass against a baseline built
// from themselves, and fail (exit 3, saying which metrics moved) against a
// baseline of clean sessions.
func TestCheckGate(t *testing.T) {
	dirs := scenarioDirs(t)
	self := filepath.Join(t.TempDir(), "self.json")
	if code, out, errs := runCLI(t, append([]string{"baseline", "build", "--agent", "booking-agent", "--version", "1.0", "-o", self}, dirs...)...); code != 0 || !strings.Contains(out, "6 sessions") {
		t.Fatalf("build: exit %d\n%s%s", code, out, errs)
	}
	code, out, errs := runCLI(t, append([]string{"check", "--baseline", self}, dirs...)...)
	if code != 0 || !strings.Contains(out, "no regression") {
		t.Fatalf("check against itself: exit %d\n%s%s", code, out, errs)
	}
	code, out, errs = runCLI(t, append([]string{"check", "--baseline", cleanBaseline(t)}, dirs...)...)
	if code != 3 || !strings.Contains(out, "regressed: ") || !strings.Contains(out, "overall") || !strings.Contains(errs, "regressed against baseline sha256:") {
		t.Fatalf("check against clean sessions: exit %d\n%s%s", code, out, errs)
	}
	t.Logf("\n%s", out)

	// A tampered baseline is refused.
	data, _ := os.ReadFile(self)
	tampered := filepath.Join(t.TempDir(), "tampered.json")
	_ = os.WriteFile(tampered, bytes.Replace(data, []byte(`"version": "1.0"`), []byte(`"version": "2.0"`), 1), 0o644)
	if code, _, errs := runCLI(t, append([]string{"check", "--baseline", tampered}, dirs...)...); code != 2 || !strings.Contains(errs, "does not match its id") {
		t.Fatalf("tampered baseline: exit %d: %s", code, errs)
	}
}
