package regress

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
)

// BaselineSchema names the baseline file format.
const BaselineSchema = "lkscore.baseline/v1"

// Baseline is a sealed set of sessions a version is compared with: an
// immutable snapshot, identified by the hash of its content.
type Baseline struct {
	Schema         string   `json:"schema"`
	ID             string   `json:"id"` // sha256:<hex> of the content below
	Agent          string   `json:"agent"`
	Version        string   `json:"version"`
	ScoringVersion string   `json:"scoring_version"`
	Samples        []Sample `json:"samples"`
}

// NewBaseline seals samples (sorted by Seq) into a Baseline.
func NewBaseline(agent, version, scoringVersion string, samples []Sample) Baseline {
	s := slices.Clone(samples)
	slices.SortStableFunc(s, func(a, b Sample) int {
		switch {
		case a.Seq < b.Seq:
			return -1
		case a.Seq > b.Seq:
			return 1
		}
		return 0
	})
	b := Baseline{Schema: BaselineSchema, Agent: agent, Version: version, ScoringVersion: scoringVersion, Samples: s}
	b.ID = b.hash()
	return b
}

// Remove takes the session's samples out of a sealed baseline and seals
// it again: its statistics are computed from the samples left, and its ID
// changes with its content (lkscore forget; docs/security.md).
func (b *Baseline) Remove(session string) bool {
	n := len(b.Samples)
	b.Samples = slices.DeleteFunc(b.Samples, func(s Sample) bool { return s.Session == session })
	if len(b.Samples) == n {
		return false
	}
	b.ID = b.hash()
	return true
}

func (b Baseline) hash() string {
	c := b
	c.ID = ""
	data, _ := json.Marshal(c) // struct fields and sorted map keys: canonical
	sum := sha256.Sum256(data)
	return "sha256:" + hex.EncodeToString(sum[:])
}

// ParseBaseline decodes and checks a baseline file: its schema, and that
// its content still matches its ID.
func ParseBaseline(data []byte) (Baseline, error) {
	var b Baseline
	if err := json.Unmarshal(data, &b); err != nil {
		return Baseline{}, fmt.Errorf("baseline: %w", err)
	}
	if b.Schema != BaselineSchema {
		return Baseline{}, fmt.Errorf("baseline: schema %q, want %q", b.Schema, BaselineSchema)
	}
	if b.ID != b.hash() {
		return Baseline{}, errors.New("baseline: content does not match its id (edited after sealing?)")
	}
	return b, nil
}
