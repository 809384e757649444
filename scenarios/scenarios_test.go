package scenarios

import (
	"encoding/json"
	"testing"
)

func TestAll(t *testing.T) {
	all, err := All()
	if err != nil {
		t.Fatal(err)
	}
	if len(all) != 6 {
		t.Fatalf("%d scenarios, want 6", len(all))
	}
	for _, s := range all {
		var golden struct {
			Overall struct{ Verdict string } `json:"overall"`
		}
		if len(s.Header) == 0 || !json.Valid(s.Chat) || json.Unmarshal(s.Golden, &golden) != nil || golden.Overall.Verdict == "" {
			t.Errorf("%s: incomplete", s.Name)
		}
	}
}
