// Package scenarios holds lkscore's six acceptance scenarios, embedded: a
// recording upload each (header.binpb, chat_history.json) and the scorecard
// it must get (scorecard.golden.json). The scoring golden tests, the
// pipeline tests and `lkscore demo` use them; tools/genscenarios writes the
// uploads (go generate ./scenarios).
package scenarios

//go:generate go run ../tools/genscenarios -out data

import (
	"embed"
	"fmt"
	"io/fs"
	"path"
)

//go:embed data
var files embed.FS

// Scenario is one acceptance scenario.
type Scenario struct {
	Name   string // e.g. 1_clean_call
	Header []byte // header.binpb
	Chat   []byte // chat_history.json
	Golden []byte // scorecard.golden.json
}

// All returns the scenarios in name order.
func All() ([]Scenario, error) {
	dirs, err := fs.ReadDir(files, "data")
	if err != nil {
		return nil, fmt.Errorf("scenarios: %w", err)
	}
	var out []Scenario
	for _, d := range dirs {
		if !d.IsDir() {
			continue
		}
		s := Scenario{Name: d.Name()}
		for name, dst := range map[string]*[]byte{"header.binpb": &s.Header, "chat_history.json": &s.Chat, "scorecard.golden.json": &s.Golden} {
			if *dst, err = files.ReadFile(path.Join("data", d.Name(), name)); err != nil {
				return nil, fmt.Errorf("scenario %s: %w", d.Name(), err)
			}
		}
		out = append(out, s)
	}
	return out, nil
}
