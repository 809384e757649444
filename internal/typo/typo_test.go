package typo

import "testing"

func TestClosest(t *testing.T) {
	keys := []string{"e2e_latency_ms", "e2e_latency_p95_ms", "listen", "log_level"}
	for _, c := range []struct {
		s    string
		max  int
		want string
	}{
		{"e2e_latency_p95", 3, "e2e_latency_p95_ms"}, // a tie at 3 edits: the longer shared beginning
		{"lisen", 1, "listen"},
		{"lisen", 0, ""},
		{"nothing_like_it", 3, ""},
	} {
		if got := Closest(c.s, keys, c.max); got != c.want {
			t.Errorf("Closest(%q, %d) = %q, want %q", c.s, c.max, got, c.want)
		}
	}
	if d := EditDistance("kitten", "sitting"); d != 3 {
		t.Errorf("EditDistance = %d", d)
	}
}
