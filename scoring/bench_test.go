package scoring

import (
	"testing"

	"github.com/lkscore/lkscore/session"
)

// session200 is a 200-turn session with a tool call every fourth turn, an
// interruption every seventh and a handoff every fiftieth.
func session200() Session {
	items := conversation(200)
	var out []Item
	for i, it := range items {
		out = append(out, it)
		k := i / 2
		if it.Role == RoleUser && k%4 == 0 {
			out = append(out, toolCall(id("c", k), "lookup", `{"day": "friday"}`, it.CreatedAt+2.1), toolOutput(id("c", k), "lookup", k%20 == 0, it.CreatedAt+2.4))
		}
		if it.Role == RoleAssistant && k%7 == 0 {
			out[len(out)-1].Interrupted = true
		}
		if it.Role == RoleAssistant && k%50 == 49 {
			out = append(out, Item{ID: id("h", k), Type: TypeAgentHandoff, OldAgentID: "greeter", NewAgentID: "booking", CreatedAt: it.CreatedAt + 2.9})
		}
	}
	return Session{Identity: session.Identity{Key: "RM_b/AJ_b"}, Close: session.Close{CloseReason: "CR_PARTICIPANT_DISCONNECTED"}, Items: out}
}

// BenchmarkScore200Turns scores one 200-turn session (parsing excluded).
// Run it on one core: go test ./scoring -run '^$' -bench Score200 -benchmem -cpu 1
func BenchmarkScore200Turns(b *testing.B) {
	s := session200()
	sc, err := NewScorer(DefaultConfig())
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		_ = sc.Score(s)
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "sessions/s")
}
