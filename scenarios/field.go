package scenarios

import (
	"embed"
	"fmt"
	"io/fs"
	"sort"
)

// The field mix: chat histories in the forms the SDKs write them, with the
// numbers they write (every float at full precision, as Python's
// json.dumps and JavaScript's JSON.stringify print it), in a realistic mix
// of sizes (20 to 200 turns, tool calls, handoffs). The Python-form files
// are written by fieldgen_test.go (Python's repr of each float, its ", "
// and ": " separators), the JS-form files by the real agents-js SDK
// (consumer/testdata/agents-js/gen-history.mjs: its ChatContext and
// sessionReportToJSON, as its upload writes chat_history.json). Both are
// seeded; TestFieldFixturesCurrent checks they are current.
//
//go:embed load/field/*.json
var fieldFS embed.FS

// Fixture is one chat history of the field mix.
type Fixture struct {
	Name  string // file name, e.g. py_200.json
	SDK   string // python or js
	Turns int
	Chat  []byte
}

// FieldMix returns the mix `lkscore bench` sends by default and the
// benchmarks decode, in a fixed order (by name). Short calls are more
// common than long ones: of its ten histories four have 20 turns, two 50,
// two 100 and two 200, one of each pair per SDK. The caller must not
// modify the bytes.
func FieldMix() []Fixture {
	names, err := fs.Glob(fieldFS, "load/field/*.json")
	if err != nil {
		panic(err) // a constant pattern
	}
	sort.Strings(names)
	out := make([]Fixture, 0, len(names))
	for _, n := range names {
		b, err := fieldFS.ReadFile(n)
		if err != nil {
			panic(err) // embedded
		}
		f := Fixture{Name: n[len("load/field/"):], Chat: b}
		if _, err := fmt.Sscanf(f.Name, "py_%d", &f.Turns); err == nil {
			f.SDK = "python"
		} else if _, err := fmt.Sscanf(f.Name, "js_%d", &f.Turns); err == nil {
			f.SDK = "js"
		}
		out = append(out, f)
	}
	return out
}

// FieldFixture returns one history of the mix by name (py_200.json, …).
func FieldFixture(name string) (Fixture, bool) {
	for _, f := range FieldMix() {
		if f.Name == name {
			return f, true
		}
	}
	return Fixture{}, false
}
