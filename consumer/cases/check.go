package cases

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/lkscore/lkscore/config"
	"github.com/lkscore/lkscore/consumer/internal/score"
	"github.com/lkscore/lkscore/consumer/internal/work"
	"github.com/lkscore/lkscore/recording"
	"github.com/lkscore/lkscore/rules"
	"github.com/lkscore/lkscore/scoring"
	"github.com/lkscore/lkscore/session"
	"github.com/lkscore/lkscore/store"
)

// Result is one case checked.
type Result struct {
	Dir     string
	Session string
	// Err: the case could not be scored (unreadable, no transcript).
	Err error
	// Want is the case's expectation, Got what the card got; Diff says
	// how they differ, one line each (empty: as expected).
	Want, Got Expect
	Diff      []string
	Card      *session.Scorecard
}

// OK reports whether the case scored as it expects.
func (r Result) OK() bool { return r.Err == nil && len(r.Diff) == 0 }

// Dirs are the case directories under dir: dir itself when it holds a
// case.yaml, else each directory below it that does, sorted.
func Dirs(dir string) ([]string, error) {
	if _, err := os.Stat(filepath.Join(dir, FileCase)); err == nil {
		return []string{dir}, nil
	}
	var out []string
	err := filepath.WalkDir(dir, func(path string, e os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !e.IsDir() && e.Name() == FileCase {
			out = append(out, filepath.Dir(path))
		}
		return nil
	})
	if err == nil && len(out) == 0 {
		err = fmt.Errorf("%s: no case (a directory with %s) in it", dir, FileCase)
	}
	slices.Sort(out)
	return out, err
}

// Check scores the case in dir again, from its recording (or a new
// recording put in its recording/ directory), its work item's facts and
// its policy, the way the daemon's worker scores a session, and compares
// the card with the case's expectation. Its audio measurement is the
// card's, unless recording/ holds a recording.ogg.
func Check(ctx context.Context, dir string) Result {
	r := Result{Dir: dir}
	f, err := ReadDir(dir)
	if err != nil {
		r.Err = err
		return r
	}
	c, err := f.Case()
	if err != nil {
		r.Err = err
		return r
	}
	r.Session, r.Want = c.Session, c.Expect
	card, err := f.score(ctx, c)
	if err != nil {
		r.Err = err
		return r
	}
	r.Card, r.Got = card, ExpectOf(card)
	r.Diff = Compare(r.Want, r.Got)
	return r
}

// score scores the case's recording with its policy.
func (f Files) score(ctx context.Context, c Case) (*session.Scorecard, error) {
	var cfg scoring.Config
	if err := json.Unmarshal(f[FilePolicy], &cfg); err != nil {
		return nil, fmt.Errorf("%s: %w", FilePolicy, err)
	}
	scorer, err := rules.NewScorer(cfg)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", FilePolicy, err)
	}
	var item work.Item
	if err := json.Unmarshal(f[FileWork], &item); err != nil {
		return nil, fmt.Errorf("%s: %w", FileWork, err)
	}
	if !item.MetadataOnly {
		item.Dir = DirRecording // wherever it was exported from
		if _, ok := f[DirRecording+recording.ObjectChatHistory]; !ok && c.Redacted {
			return nil, fmt.Errorf("%s: the session was redacted, so its chat history was not exported: "+
				"put a recording's chat_history.json (and header.binpb) in %s", FileCase, DirRecording)
		}
	}
	privacy := config.Default().Privacy
	if c.Redacted {
		privacy.Redaction = "always"
	}
	d := config.Default()
	in, err := score.NewInputs(files(f), privacy, d.Limits, d.Audio, scorer.Audio()).Input(ctx, item)
	if err != nil {
		return nil, fmt.Errorf("score %s: %w", DirRecording, err)
	}
	if in.Audio == nil { // no recording.ogg here: the card's measurement
		var old struct {
			Audio *session.Audio `json:"audio"`
		}
		if err := json.Unmarshal(f[FileScorecard], &old); err == nil {
			in.Audio = old.Audio
		}
	}
	card := scorer.Score(in)
	return &card, nil
}

// Compare says how got differs from want, one line each.
func Compare(want, got Expect) []string {
	var diff []string
	if want.Verdict != got.Verdict {
		diff = append(diff, fmt.Sprintf("verdict: want %s, got %s", want.Verdict, got.Verdict))
	}
	count := func(codes []string) map[string]int {
		m := map[string]int{}
		for _, c := range codes {
			m[c]++
		}
		return m
	}
	w, g := count(want.Findings), count(got.Findings)
	var missing, extra []string
	for _, code := range slices.Sorted(maps.Keys(w)) {
		if n := w[code] - g[code]; n > 0 {
			missing = append(missing, times(code, n))
		}
	}
	for _, code := range slices.Sorted(maps.Keys(g)) {
		if n := g[code] - w[code]; n > 0 {
			extra = append(extra, times(code, n))
		}
	}
	if len(missing) > 0 {
		diff = append(diff, "findings expected, not found: "+strings.Join(missing, ", "))
	}
	if len(extra) > 0 {
		diff = append(diff, "findings found, not expected: "+strings.Join(extra, ", "))
	}
	for _, name := range slices.Sorted(maps.Keys(want.Rules)) {
		if got.Rules[name] != want.Rules[name] {
			diff = append(diff, fmt.Sprintf("rule %s: want %s, got %s", name, want.Rules[name], orNone(got.Rules[name])))
		}
	}
	return diff
}

func times(code string, n int) string {
	if n == 1 {
		return code
	}
	return fmt.Sprintf("%s ×%d", code, n)
}

func orNone(s string) string {
	if s == "" {
		return "none (the rule did not run)"
	}
	return s
}

// files reads a case's recording from its files, as the worker reads the
// store.
type files Files

func (f files) Open(_ context.Context, key string, maxBytes int64) (io.ReadCloser, error) {
	data, ok := f[key]
	if !ok {
		return nil, fmt.Errorf("%s: %w", key, recording.ErrNotFound)
	}
	if int64(len(data)) > maxBytes {
		return nil, fmt.Errorf("%s: %w", key, recording.ErrLimit)
	}
	return io.NopCloser(bytes.NewReader(data)), nil
}

func (f files) OpenBucket(context.Context, string, string, int64) (io.ReadCloser, error) {
	return nil, fmt.Errorf("a case holds no egress file: %w", store.ErrPermanent)
}

func (f files) Delete(context.Context, string) error {
	return fmt.Errorf("a case is not deleted from: %w", store.ErrPermanent)
}
