package cases

import (
	"archive/tar"
	"bytes"
	"io"
	"reflect"
	"strings"
	"testing"
)

// TestCompare: verdict, findings as a multiset, rules by name.
func TestCompare(t *testing.T) {
	want := Expect{Verdict: "pass", Findings: []string{"slow_tool", "tool_error", "tool_error"}, Rules: map[string]string{"r": "passed"}}
	got := Expect{Verdict: "warn", Findings: []string{"slow_tool", "tool_error", "unanswered_user_turn"}, Rules: map[string]string{"r": "violated"}}
	d := Compare(want, got)
	exp := []string{"verdict: want pass, got warn", "findings expected, not found: tool_error", "findings found, not expected: unanswered_user_turn",
		"rule r: want passed, got violated"}
	if !reflect.DeepEqual(d, exp) {
		t.Fatalf("diff %q", d)
	}
	if d := Compare(want, want); len(d) != 0 {
		t.Fatalf("the same: %q", d)
	}
	if d := Compare(Expect{Verdict: "pass", Findings: []string{"a", "a"}}, Expect{Verdict: "pass"}); !reflect.DeepEqual(d, []string{"findings expected, not found: a ×2"}) {
		t.Fatalf("%q", d)
	}
}

// TestArchiveDeterministic: the same files give the same bytes, whatever
// the map's order; the archive holds each file under the case's name.
func TestArchiveDeterministic(t *testing.T) {
	f := Files{FileCase: []byte("session: a/b\n"), FileScorecard: []byte("{}"), DirRecording + "header.binpb": {1, 2}}
	a, err := f.Archive("a-b")
	if err != nil {
		t.Fatal(err)
	}
	for range 20 {
		if b, _ := f.Archive("a-b"); !bytes.Equal(a, b) {
			t.Fatal("two archives of the same files differ")
		}
	}
	tr := tar.NewReader(bytes.NewReader(a))
	var names []string
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		if !h.ModTime.IsZero() && h.ModTime.Unix() != 0 {
			t.Errorf("%s has a time %v", h.Name, h.ModTime)
		}
		names = append(names, h.Name)
	}
	if strings.Join(names, ",") != "a-b/case.yaml,a-b/recording/header.binpb,a-b/scorecard.json" {
		t.Fatalf("names %v", names)
	}
}

// FuzzCaseFile: any case.yaml is parsed or refused with an error naming
// the file; none panics, and a parsed one has a session and a verdict.
func FuzzCaseFile(f *testing.F) {
	f.Add([]byte("session: RM_a/AJ_b\nscoring_version: 1.4.0\nredacted: false\nexpect:\n  verdict: warn\n  findings: [tool_error]\n"))
	f.Add([]byte("session: x\nexpect: {verdict: pass, findings: [], rules: {r: passed}}\n"))
	f.Add([]byte("unknown: 1\n"))
	f.Add([]byte("- [\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		c, err := Files{FileCase: data}.Case()
		if err != nil {
			if !strings.Contains(err.Error(), FileCase) {
				t.Fatalf("error %q does not name %s", err, FileCase)
			}
			return
		}
		if c.Session == "" || c.Expect.Verdict == "" {
			t.Fatalf("parsed without a session or verdict: %+v", c)
		}
	})
}
