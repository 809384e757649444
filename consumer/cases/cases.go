// Package cases turns a scored session into a case: a directory that
// holds what lkscore scored (the recording's header and chat history as
// stored, the session's work item with its facts), the scorecard it got,
// the scoring config that judged it, and an expectation the team edits to
// say what a fixed agent must get. `lkscore check --cases` scores a case's
// recording again and compares the card with the expectation;
// `lkscore case export --format pytest|vitest` writes a test for the agents
// SDKs' own testing frameworks (docs/cases.md).
package cases

import (
	"archive/tar"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/lkscore/lkscore/consumer/internal/work"
	"github.com/lkscore/lkscore/recording"
	"github.com/lkscore/lkscore/scoring"
	"github.com/lkscore/lkscore/session"
)

// The files of a case directory.
const (
	FileCase      = "case.yaml"      // the session, and the expectation the team edits
	FileScorecard = "scorecard.json" // the scorecard the session got, as published
	FilePolicy    = "policy.json"    // the scoring config that judged it (as the scoring bucket keeps one)
	FileWork      = "work.json"      // the session's work item: its recording's place and its facts
	DirRecording  = "recording/"     // header.binpb and chat_history.json as stored
)

// maxCaseFile bounds one file of a case read back (a chat history is at
// most limits.chat_bytes, 16 MiB by default).
const maxCaseFile = 64 << 20

// Case is case.yaml.
type Case struct {
	// Session is the session's key, room_id/job_id.
	Session string `yaml:"session"`
	// ScoringVersion is the scoring version of the card the case keeps.
	ScoringVersion string `yaml:"scoring_version"`
	// Redacted: the session was redacted, and the case carries no
	// transcript (no chat_history.json); check needs a new recording.
	Redacted bool `yaml:"redacted"`
	// Notes say what the case does not hold, and why.
	Notes []string `yaml:"notes,omitempty"`
	// Expect is what check compares a new card with: as exported, what the
	// call got; edit it to what a fixed agent must get.
	Expect Expect `yaml:"expect"`
}

// Expect is a card's outcome, as a case expects it.
type Expect struct {
	Verdict string `yaml:"verdict" json:"verdict"`
	// Findings are the findings' codes, sorted, one per finding.
	Findings []string `yaml:"findings" json:"findings"`
	// Rules are the status of each rule the card evaluated (violated,
	// passed, not_evaluated), by name.
	Rules map[string]string `yaml:"rules,omitempty" json:"rules,omitempty"`
}

// ExpectOf is what card got.
func ExpectOf(card *session.Scorecard) Expect {
	e := Expect{Verdict: card.Overall.Verdict, Findings: []string{}}
	for _, c := range card.Components {
		for _, f := range c.Findings {
			e.Findings = append(e.Findings, f.Code)
		}
	}
	slices.Sort(e.Findings)
	for _, r := range card.Rules {
		if e.Rules == nil {
			e.Rules = map[string]string{}
		}
		e.Rules[r.Name] = r.Status
	}
	return e
}

// Files are a case's files by name (slash-separated, relative to the case
// directory).
type Files map[string][]byte

// Inputs are what a case is built from.
type Inputs struct {
	Card     []byte // the scorecard as published
	Item     work.Item
	Header   []byte // nil when the session uploaded none
	Chat     []byte // nil when none, or redacted
	Policy   scoring.Config
	Redacted bool
	Notes    []string
}

// Build makes a case's files. A redacted session's case carries no chat
// history, and says so.
func Build(in Inputs) (Files, error) {
	var card session.Scorecard
	if err := json.Unmarshal(in.Card, &card); err != nil {
		return nil, fmt.Errorf("case: the scorecard: %w", err)
	}
	c := Case{Session: card.Session.Key, ScoringVersion: card.ScoringVersion, Redacted: in.Redacted, Notes: in.Notes,
		Expect: ExpectOf(&card)}
	f := Files{FileScorecard: in.Card}
	item := in.Item
	if item.Object != "" {
		return nil, fmt.Errorf("case %s: its recording is an egress file (%s), not an upload: not exportable", c.Session, item.Object)
	}
	item.Dir, item.Location, item.Bucket = "", "", ""
	if !item.MetadataOnly {
		item.Dir, item.Location = DirRecording, "case:"+DirRecording
		if in.Header != nil {
			f[DirRecording+recording.ObjectHeader] = in.Header
		}
		if in.Redacted {
			c.Notes = append(c.Notes, "the session is redacted: its chat history is not exported; "+
				"put a new recording's chat_history.json in recording/ for lkscore check --cases")
		} else if in.Chat != nil {
			f[DirRecording+recording.ObjectChatHistory] = in.Chat
		}
	}
	var err error
	if f[FileWork], err = json.MarshalIndent(item, "", "  "); err != nil {
		return nil, err
	}
	if f[FilePolicy], err = json.MarshalIndent(in.Policy, "", "  "); err != nil {
		return nil, err
	}
	y, err := yaml.Marshal(c)
	if err != nil {
		return nil, err
	}
	f[FileCase] = append([]byte(caseHeader), y...)
	return f, nil
}

// caseHeader opens case.yaml.
const caseHeader = `# An lkscore case (docs/cases.md): a scored session kept as a test.
# expect is what the call got when it was exported. Edit it to what a fixed
# agent must get, then run: lkscore check --cases <dir>
`

// Name is a case directory's name for a session key.
func Name(sessionKey string) string {
	return strings.Map(func(r rune) rune {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9', r == '_', r == '-', r == '.':
			return r
		}
		return '-'
	}, sessionKey)
}

// Archive is the case as a tar file, byte for byte the same for the same
// files: names sorted, no times, no owners (what the dashboard's export
// button serves and `lkscore case export --archive` writes).
func (f Files) Archive(dir string) ([]byte, error) {
	var b bytes.Buffer
	tw := tar.NewWriter(&b)
	names := make([]string, 0, len(f))
	for n := range f {
		names = append(names, n)
	}
	slices.Sort(names)
	for _, n := range names {
		h := &tar.Header{Name: dir + "/" + n, Mode: 0o644, Size: int64(len(f[n])), Format: tar.FormatPAX, Typeflag: tar.TypeReg}
		if err := tw.WriteHeader(h); err != nil {
			return nil, err
		}
		if _, err := tw.Write(f[n]); err != nil {
			return nil, err
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}

// WriteDir writes the case into dir (created; files in it are replaced).
func (f Files) WriteDir(dir string) error {
	for n, data := range f {
		p := filepath.Join(dir, filepath.FromSlash(n))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return err
		}
		if err := os.WriteFile(p, data, 0o644); err != nil {
			return err
		}
	}
	return nil
}

// ReadDir reads a case directory back: every regular file, each within
// maxCaseFile.
func ReadDir(dir string) (Files, error) {
	f := Files{}
	err := filepath.WalkDir(dir, func(path string, e fs.DirEntry, err error) error {
		if err != nil || e.IsDir() {
			return err
		}
		if !e.Type().IsRegular() {
			return nil
		}
		info, err := e.Info()
		if err != nil {
			return err
		}
		if info.Size() > maxCaseFile {
			return fmt.Errorf("%s: %d bytes, over the %d a case file may have", path, info.Size(), maxCaseFile)
		}
		data, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, path)
		f[filepath.ToSlash(rel)] = data
		return nil
	})
	if err != nil {
		return nil, err
	}
	if _, ok := f[FileCase]; !ok {
		return nil, fmt.Errorf("%s: no %s: not a case directory", dir, FileCase)
	}
	return f, nil
}

// Case parses case.yaml.
func (f Files) Case() (Case, error) {
	var c Case
	dec := yaml.NewDecoder(bytes.NewReader(f[FileCase]))
	dec.KnownFields(true)
	if err := dec.Decode(&c); err != nil {
		return c, fmt.Errorf("%s: %w", FileCase, err)
	}
	if c.Session == "" || c.Expect.Verdict == "" {
		return c, errors.New(FileCase + ": session and expect.verdict are required")
	}
	return c, nil
}
