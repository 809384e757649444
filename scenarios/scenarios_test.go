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
	if len(all) != 8 {
		t.Fatalf("%d scenarios, want 8", len(all))
	}
	for _, s := range all {
		var golden struct {
			Overall struct{ Verdict string } `json:"overall"`
		}
		if len(s.Header) == 0 || (s.Chat != nil && !json.Valid(s.Chat)) || json.Unmarshal(s.Golden, &golden) != nil || golden.Overall.Verdict == "" {
			t.Errorf("%s: incomplete", s.Name)
		}
		if (s.Chat == nil) != (s.Name == "7_header_only") || s.FromSignals() != (s.Name == "8_room_deleted_no_logs") {
			t.Errorf("%s: chat history %v, from signals %v", s.Name, s.Chat != nil, s.FromSignals())
		}
	}
}
