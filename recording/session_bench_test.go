package recording

import (
	"bytes"
	"encoding/json"
	"testing"

	"github.com/lkscore/lkscore/scoring"
	"github.com/lkscore/lkscore/session"
)

// BenchmarkSessionCPU is one worker's CPU for one session, step by step and
// whole: parse the 200-turn chat history, score it, encode the scorecard.
// tools/perf-vs-python.sh compares "all" with Python's json.loads alone on
// the same bytes.
func BenchmarkSessionCPU(b *testing.B) {
	data := mustRead(b, historyFixture)
	scorer, err := scoring.NewScorer(scoring.DefaultConfig())
	if err != nil {
		b.Fatal(err)
	}
	parse := func(b *testing.B) *Session {
		h, err := ParseChatHistory(bytes.NewReader(data), ChatLimits{})
		if err != nil {
			b.Fatal(err)
		}
		s := &Session{Key: "RM_x/AJ_y", RoomID: "RM_x", JobID: "AJ_y"}
		s.AttachChat(h)
		return s
	}
	score := func(s *Session) session.Scorecard { return scorer.Score(s.ScoringInput("file:///x", "agent")) }
	encode := func(b *testing.B, card session.Scorecard) {
		out, err := json.Marshal(card)
		if err != nil || len(out) < 1000 {
			b.Fatal(err)
		}
	}
	b.Run("parse", func(b *testing.B) {
		b.ReportAllocs()
		for i := 0; i < b.N; i++ {
			parse(b)
		}
	})
	s := parse(b)
	b.Run("score", func(b *testing.B) {
		b.ReportAllocs()
		for i := 0; i < b.N; i++ {
			score(s)
		}
	})
	card := score(s)
	b.Run("encode", func(b *testing.B) {
		b.ReportAllocs()
		for i := 0; i < b.N; i++ {
			encode(b, card)
		}
	})
	b.Run("all", func(b *testing.B) {
		b.ReportAllocs()
		for i := 0; i < b.N; i++ {
			encode(b, score(parse(b)))
		}
	})
}
