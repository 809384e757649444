package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"mime/multipart"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/lkscore/lkscore/cmd/lkscore/offline"
	"github.com/lkscore/lkscore/internal/testenv"
	"github.com/lkscore/lkscore/scoring"
	"github.com/lkscore/lkscore/session"
)

func runScore(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	var stdout, stderr bytes.Buffer
	code := run(context.Background(), append([]string{"lkscore", "score"}, args...), func(string) string { return "" }, &stdout, &stderr)
	return code, stdout.String(), stderr.String()
}

const scenarioDir = "../../scenarios/data/"

// TestScoreMatchesGoldens: the CLI prints the same scorecards as the
// scoring goldens (one parser, one scorer), apart from where it read them.
func TestScoreMatchesGoldens(t *testing.T) {
	dirs := scenarioDirs(t)
	code, out, stderr := runScore(t, append([]string{"--agent-name", "booking-agent"}, dirs...)...)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	dec := json.NewDecoder(strings.NewReader(out))
	for _, dir := range dirs {
		var got session.Scorecard
		if err := dec.Decode(&got); err != nil {
			t.Fatalf("%s: %v", dir, err)
		}
		var want session.Scorecard
		b, _ := os.ReadFile(filepath.Join(dir, "scorecard.golden.json"))
		if err := json.Unmarshal(b, &want); err != nil {
			t.Fatal(err)
		}
		got.Session.Source, want.Session.Source = "", ""
		g, _ := json.Marshal(got)
		w, _ := json.Marshal(want)
		if !bytes.Equal(g, w) {
			t.Errorf("%s: CLI scorecard differs from the golden", filepath.Base(dir))
		}
	}
}

// TestScoreBatchMatchesOneByOne: a batch decodes each session into the
// memory the one before used (recording.ChatDecoder); every card it prints,
// in either order, is byte for byte the card of that session scored alone.
// The sessions: the acceptance scenarios and the uploads a real agents-js
// worker sent (consumer/testdata/field).
func TestScoreBatchMatchesOneByOne(t *testing.T) {
	dirs := append(scenarioDirs(t), fieldSessionDirs(t)...)
	alone := map[string]string{}
	for _, dir := range dirs {
		code, out, stderr := runScore(t, dir)
		if code != 0 {
			t.Fatalf("%s: exit %d: %s", dir, code, stderr)
		}
		alone[dir] = out
	}
	batch := append([]string{}, dirs...)
	for i := len(dirs) - 1; i >= 0; i-- {
		batch = append(batch, dirs[i])
	}
	code, out, stderr := runScore(t, batch...)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	lines := strings.SplitAfter(out, "\n")
	if len(lines) != len(batch)+1 || lines[len(batch)] != "" {
		t.Fatalf("%d lines for %d sessions", len(lines), len(batch))
	}
	for i, dir := range batch {
		if lines[i] != alone[dir] {
			t.Errorf("%s, %d. in the batch: its card differs from the card it gets alone:\n%s\n%s", filepath.Base(dir), i+1, lines[i], alone[dir])
		}
	}
}

func TestScoreTableAndGate(t *testing.T) {
	clean, errorClose, slow := scenarioDir+"1_clean_call", scenarioDir+"6_error_close", scenarioDir+"2_slow_agent"
	code, out, _ := runScore(t, "--format", "table", clean, errorClose)
	if code != 0 || !strings.Contains(out, "RM_CleanCall01/AJ_CleanCall01    pass") || !strings.Contains(out, "unanswered_user_turn") {
		t.Fatalf("exit %d, table:\n%s", code, out)
	}
	for _, tc := range []struct {
		failOn string
		paths  []string
		code   int
	}{
		{"fail", []string{clean, slow}, 0},
		{"warn", []string{clean, slow}, offline.ExitGate},
		{"fail", []string{clean, errorClose}, offline.ExitGate},
		{"warn", []string{clean}, 0},
	} {
		code, _, stderr := runScore(t, append([]string{"--fail-on", tc.failOn}, tc.paths...)...)
		if code != tc.code {
			t.Errorf("--fail-on %s %v: exit %d, want %d (%s)", tc.failOn, tc.paths, code, tc.code, stderr)
		}
	}
	if code, _, _ := runScore(t, "--format", "xml", clean); code != 2 {
		t.Errorf("bad format: exit %d", code)
	}
	if code, _, stderr := runScore(t, "/nope"); code != 1 || !strings.Contains(stderr, "score /nope") {
		t.Errorf("missing path: exit %d %q", code, stderr)
	}
}

func TestScoreConfig(t *testing.T) {
	cfg := filepath.Join(t.TempDir(), "c.yml")
	testenv.WriteFile(t, cfg, "scoring:\n  verdict:\n    pass: 99.5\n    warn: 99\n")
	code, out, stderr := runScore(t, "--config", cfg, scenarioDir+"4_tool_trouble")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	var sc session.Scorecard
	_ = json.Unmarshal([]byte(out), &sc)
	if sc.Overall.Verdict != session.Fail || sc.ScoringVersion == scoring.DefaultConfig().Version() {
		t.Fatalf("config not applied: %s %s", sc.Overall.Verdict, sc.ScoringVersion)
	}
	testenv.WriteFile(t, cfg, "scoring:\n  wieghts: {}\n")
	if code, _, stderr := runScore(t, "--config", cfg, scenarioDir+"4_tool_trouble"); code != 2 || !strings.Contains(stderr, "wieghts") {
		t.Fatalf("unknown key: exit %d %q", code, stderr)
	}
}

// TestScoreNotASessionDir: a folder above the sessions is answered with
// what it lacks and the session directories below it.
func TestScoreNotASessionDir(t *testing.T) {
	var stdout, stderr bytes.Buffer
	code := run(context.Background(), []string{"lkscore", "score", "../../scenarios"}, func(string) string { return "" }, &stdout, &stderr)
	if code != 1 || !strings.Contains(stderr.String(), "is not a session directory: it has no header.binpb") ||
		!strings.Contains(stderr.String(), "8 session directories are below it") || !strings.Contains(stderr.String(), "../../scenarios/*/*") {
		t.Errorf("exit %d, stderr %q", code, stderr.String())
	}
}

// TestScoreNotAnUpload: a file that is not an upload at all is answered
// with what lkscore reads, not with a multipart parser's detail alone.
func TestScoreNotAnUpload(t *testing.T) {
	path := filepath.Join(t.TempDir(), "garbage.bin")
	if err := os.WriteFile(path, []byte("\x00\x01 not an upload"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, cmd := range []string{"score", "inspect"} {
		var stdout, stderr bytes.Buffer
		code := run(context.Background(), []string{"lkscore", cmd, path}, func(string) string { return "" }, &stdout, &stderr)
		if code != 1 || !strings.Contains(stderr.String(), "is not something lkscore reads: pass a session directory") {
			t.Errorf("%s: exit %d, stderr %q", cmd, code, stderr.String())
		}
	}
}

// fieldSessionDirs writes the real agents-js uploads of
// consumer/testdata/field as session directories: each multipart body's
// header and chat_history parts, byte for byte.
func fieldSessionDirs(t *testing.T) []string {
	t.Helper()
	bodies, _ := filepath.Glob("../../consumer/testdata/field/*/bodies/*_observability_recordings_v0.bin")
	if len(bodies) == 0 {
		t.Fatal("no recorded uploads in consumer/testdata/field")
	}
	var dirs []string
	for _, body := range bodies {
		b, err := os.ReadFile(body)
		if err != nil {
			t.Fatal(err)
		}
		first, _, _ := bytes.Cut(b, []byte("\r\n"))
		mr := multipart.NewReader(bytes.NewReader(b), strings.TrimPrefix(string(first), "--"))
		dir := t.TempDir()
		for {
			part, err := mr.NextPart()
			if err != nil {
				break
			}
			name := map[string]string{"header": "header.binpb", "chat_history": "chat_history.json"}[part.FormName()]
			if name == "" {
				continue
			}
			data, err := io.ReadAll(part)
			if err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(dir, name), data, 0o644); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := os.Stat(filepath.Join(dir, "chat_history.json")); err != nil {
			t.Fatalf("%s: no chat_history part", body)
		}
		dirs = append(dirs, dir)
	}
	return dirs
}
