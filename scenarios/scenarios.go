// Package scenarios holds lkscore's eight acceptance scenarios, embedded: a
// recording upload each (header.binpb, chat_history.json unless the upload
// had none), the room's webhooks and the SDK's logs where the session's
// facts come from them, and the scorecard it must get
// (scorecard.golden.json). The scoring golden tests, the
// pipeline tests and `lkscore demo` use them; tools/genscenarios writes the
// uploads (go generate ./scenarios).
package scenarios

//go:generate go run ../tools/genscenarios -out data

import (
	"bytes"
	"embed"
	"errors"
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
	Chat   []byte // chat_history.json; nil when the upload has none
	Golden []byte // scorecard.golden.json
	// Webhooks are the room's webhooks as livekit-server sent them (one
	// protojson event per line of webhooks.jsonl), and Logs the SDK's OTLP
	// logs request (logs.otlp.json), for a scenario whose facts come from
	// those signals rather than the header's summary; nil otherwise. Such a
	// scenario's golden is the daemon's scorecard, not the recording's alone.
	Webhooks [][]byte
	Logs     []byte
}

// FromSignals reports whether the scenario's facts come from its webhooks
// and logs: it is scored through the daemon, not from the recording alone.
func (s Scenario) FromSignals() bool { return len(s.Webhooks) > 0 || s.Logs != nil }

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
		read := func(name string, required bool) ([]byte, error) {
			b, err := files.ReadFile(path.Join("data", d.Name(), name))
			if errors.Is(err, fs.ErrNotExist) && !required {
				return nil, nil
			}
			if err != nil {
				return nil, fmt.Errorf("scenario %s: %w", d.Name(), err)
			}
			return b, nil
		}
		if s.Header, err = read("header.binpb", true); err != nil {
			return nil, err
		}
		if s.Golden, err = read("scorecard.golden.json", true); err != nil {
			return nil, err
		}
		if s.Chat, err = read("chat_history.json", false); err != nil {
			return nil, err
		}
		if s.Logs, err = read("logs.otlp.json", false); err != nil {
			return nil, err
		}
		hooks, err := read("webhooks.jsonl", false)
		if err != nil {
			return nil, err
		}
		for _, line := range bytes.Split(bytes.TrimSpace(hooks), []byte("\n")) {
			if len(line) > 0 {
				s.Webhooks = append(s.Webhooks, line)
			}
		}
		out = append(out, s)
	}
	return out, nil
}
