package scoring

import (
	"bytes"
	"encoding/json"
	"math"
	"testing"

	"github.com/lkscore/lkscore/session"
)

// byteSource turns fuzz input into choices; it yields zeros when exhausted.
type byteSource struct {
	b []byte
	i int
}

func (s *byteSource) next() byte {
	if s.i >= len(s.b) {
		return 0
	}
	s.i++
	return s.b[s.i-1]
}

func (s *byteSource) maybe(p byte) bool { return s.next() < p }

func (s *byteSource) float(scale float64) *float64 {
	if s.maybe(30) {
		return nil // not reported
	}
	v := float64(s.next()) / 255 * scale
	return &v
}

// randomSession builds a session of up to 60 items of every type, with
// timestamps, metrics and tool ids drawn from data.
func randomSession(data []byte) Session {
	src := &byteSource{b: data}
	n := int(src.next()) % 60
	t := 1764417600.0
	var items []Item
	for k := 0; k < n; k++ {
		t += float64(src.next()) / 50
		it := Item{ID: string(rune('a' + src.next()%40)), CreatedAt: t}
		switch src.next() % 6 {
		case 0, 1:
			it.Type, it.Role, it.Text = TypeMessage, RoleUser, []string{"", " ", "hi", "yes please"}[src.next()%4]
			it.TranscriptConfidence = src.float(1)
			it.HasMetrics = !src.maybe(40)
			start := t + float64(src.next())/100
			it.StartedSpeakingAt, it.StoppedSpeakingAt = &start, f(start+float64(src.next())/40)
			it.TranscriptionDelay, it.EndOfTurnDelay = src.float(2), src.float(3)
		case 2, 3:
			it.Type, it.Role, it.Text, it.Interrupted = TypeMessage, RoleAssistant, "answer", src.maybe(60)
			it.HasMetrics = true
			start := t + float64(src.next())/100 - 1
			it.StartedSpeakingAt, it.StoppedSpeakingAt = &start, f(start+2)
			it.E2ELatency, it.LLMNodeTTFT, it.TTSNodeTTFB = src.float(6), src.float(3), src.float(1.5)
		case 4:
			it.Type, it.CallID, it.Name, it.Arguments = TypeFunctionCall, string(rune('A'+src.next()%6)), "tool", []string{"{}", `{"a":1}`}[src.next()%2]
		case 5:
			it.Type, it.CallID, it.Name, it.IsError = TypeFunctionCallOutput, string(rune('A'+src.next()%6)), "tool", src.maybe(80)
		}
		if src.maybe(10) {
			it = Item{ID: "h", Type: TypeAgentHandoff, OldAgentID: []string{"a", "b"}[src.next()%2], NewAgentID: []string{"a", "b"}[src.next()%2], CreatedAt: t}
		}
		items = append(items, it)
	}
	return Session{Identity: session.Identity{Key: "RM_f/AJ_f"}, Close: session.Close{CloseReason: []string{"CR_ERROR", "CR_COMPLETED", "CR_UNKNOWN"}[src.next()%3]}, Items: items}
}

func scoreJSON(t *testing.T, s Session) (Scorecard, []byte) {
	t.Helper()
	sc := Score(s, DefaultConfig())
	b, err := json.Marshal(sc) // fails on NaN or Inf
	if err != nil {
		t.Fatalf("marshal: %v", err)
	}
	return sc, b
}

func componentScore(sc Scorecard, name string) float64 {
	for _, c := range sc.Components {
		if c.Name == name {
			return c.Score
		}
	}
	return math.NaN()
}

// measured reports whether the component measured anything.
func measured(sc Scorecard, name string) bool {
	for _, c := range sc.Components {
		if c.Name == name {
			return c.Verdict != NotMeasured
		}
	}
	return false
}

// FuzzScore checks the scoring invariants on random sessions: every score
// in 0–100, deterministic bytes, deductions that add up, and monotonicity.
func FuzzScore(fz *testing.F) {
	fz.Add([]byte{})
	fz.Add(bytes.Repeat([]byte{3, 7, 200, 1, 90, 45, 12, 250, 33}, 30))
	fz.Add(bytes.Repeat([]byte{50, 2, 4, 5, 0, 255, 128}, 40))
	// One Scorer across all inputs: its pooled scratch must never leak one
	// session into the next.
	shared, err := NewScorer(DefaultConfig())
	if err != nil {
		fz.Fatal(err)
	}
	fz.Fuzz(func(t *testing.T, data []byte) {
		s := randomSession(data)
		sc, b := scoreJSON(t, s)
		if pooled, _ := json.Marshal(shared.Score(s)); !bytes.Equal(pooled, b) {
			t.Fatal("a reused Scorer scored differently from a fresh one")
		}
		if _, again := scoreJSON(t, randomSession(data)); !bytes.Equal(b, again) {
			t.Fatal("same session, different bytes")
		}
		if sc.Overall.Score < 0 || sc.Overall.Score > 100 {
			t.Fatalf("overall %v", sc.Overall.Score)
		}
		for _, c := range sc.Components {
			var sum float64
			for _, fd := range c.Findings {
				if fd.Deduction < 0 {
					t.Fatalf("negative deduction %+v", fd)
				}
				sum += fd.Deduction
			}
			if c.Score < 0 || c.Score > 100 || math.Abs(round(sum)-c.Deducted) > 0.011 {
				t.Fatalf("%s: score %v, deducted %v, findings sum %v", c.Name, c.Score, c.Deducted, sum)
			}
			if c.Score > 0 && math.Abs(100-c.Deducted-c.Score) > 0.011 {
				t.Fatalf("%s: %v points unexplained", c.Name, 100-c.Deducted-c.Score)
			}
		}

		// Adding an error output never raises the tool score.
		// (A tool component that measured nothing has no score to raise.)
		if len(s.Items) > 0 && measured(sc, ToolReliability) {
			callID := string(rune('A' + len(data)%7))
			more := append(append([]Item{}, s.Items...), Item{ID: "x", Type: TypeFunctionCallOutput, CallID: callID, IsError: true, CreatedAt: s.Items[len(s.Items)-1].CreatedAt + 1})
			worse, _ := scoreJSON(t, Session{Identity: session.Identity{Key: s.Key}, Close: session.Close{CloseReason: s.CloseReason}, Items: more})
			if componentScore(worse, ToolReliability) > componentScore(sc, ToolReliability) {
				t.Fatalf("an error output raised the tool score %v → %v", componentScore(sc, ToolReliability), componentScore(worse, ToolReliability))
			}
		}
		// Raising a latency never raises the latency score.
		for i := range s.Items {
			if s.Items[i].Role != RoleAssistant && s.Items[i].Role != RoleUser {
				continue
			}
			slower := append([]Item{}, s.Items...)
			it := slower[i]
			bump := func(p *float64) *float64 {
				if p == nil {
					return nil
				}
				return f(*p + 0.7)
			}
			it.E2ELatency, it.LLMNodeTTFT, it.TTSNodeTTFB, it.TranscriptionDelay = bump(it.E2ELatency), bump(it.LLMNodeTTFT), bump(it.TTSNodeTTFB), bump(it.TranscriptionDelay)
			slower[i] = it
			worse, _ := scoreJSON(t, Session{Identity: session.Identity{Key: s.Key}, Close: session.Close{CloseReason: s.CloseReason}, Items: slower})
			if componentScore(worse, ResponseLatency) > componentScore(sc, ResponseLatency) {
				t.Fatalf("raising item %d's latency raised the latency score %v → %v", i, componentScore(sc, ResponseLatency), componentScore(worse, ResponseLatency))
			}
			break
		}
	})
}
