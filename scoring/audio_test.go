package scoring

import (
	"reflect"
	"testing"

	"github.com/lkscore/lkscore/session"
)

func audioCodes(card Scorecard) map[string]int {
	out := map[string]int{}
	for _, c := range card.Components {
		for _, f := range c.Findings {
			out[f.Code]++
		}
	}
	return out
}

// TestAudioFindings: heard talk-over, a slow yield after a barge-in,
// awkward silences, slow heard answers and a heard latency far above the
// agent's own e2e figures are findings; a refused recording is an
// observation; no recording changes nothing.
func TestAudioFindings(t *testing.T) {
	cfg := DefaultConfig()
	e2e := 0.9
	s := Session{Identity: session.Identity{Key: "RM_a/AJ_b"}, Items: []Item{
		{ID: "u", Type: TypeMessage, Role: "user", Text: "hi", CreatedAt: 1, HasMetrics: true},
		{ID: "a", Type: TypeMessage, Role: "assistant", Text: "hello", CreatedAt: 2, HasMetrics: true, E2ELatency: &e2e},
	}}
	plain := Score(s, cfg)
	s.Audio = &Audio{
		Turns: []AudioTurn{
			{UserEndMs: 1000, AgentStartMs: 600, HeardLatencyMs: -400},
			{UserEndMs: 5000, AgentStartMs: 8000, HeardLatencyMs: 3000},
			{UserEndMs: 9000, AgentStartMs: 11600, HeardLatencyMs: 2600, BargeIn: true, YieldMs: 1500},
		},
		Silences: []AudioSegment{{StartMs: 5000, EndMs: 8000}, {StartMs: 20000, EndMs: 23000}},
		Metrics:  AudioMetrics{HeardLatencyP50Ms: 2600, AwkwardSilenceCount: 2},
	}
	card := Score(s, cfg)
	want := map[string]int{CodeHeardTalkOver: 1, CodeHeardSlowYield: 1, CodeHeardSilence: 2, CodeHeardSlowResponse: 2, CodeHeardLatencyDisagrees: 1}
	got := audioCodes(card)
	for code, n := range want {
		if got[code] != n {
			t.Errorf("%s: %d findings, want %d (all: %v)", code, got[code], n, got)
		}
	}
	// The silence inside heard turn 1 (user stopped at 5000, agent at 8000) names it.
	for _, c := range card.Components {
		for _, f := range c.Findings {
			if f.Code == CodeHeardSilence && f.Value.V == 3000 && f.Turn.Set != (f.Message[:10] == "heard turn") {
				t.Errorf("silence finding %+v", f)
			}
		}
	}
	if card.Audio == nil || card.Overall.Score >= plain.Overall.Score {
		t.Fatalf("audio block %v, score %v (without audio %v)", card.Audio, card.Overall.Score, plain.Overall.Score)
	}

	s.Audio = &Audio{Refused: "channels_leak", Reason: "the agent is only 3 dB quieter"}
	card = Score(s, cfg)
	if got := audioCodes(card); got[CodeAudioNotMeasured] != 1 || card.Overall.Score != plain.Overall.Score {
		t.Fatalf("refused: %v, score %v", got, card.Overall.Score)
	}
	s.Audio = nil
	if card := Score(s, cfg); !reflect.DeepEqual(card, plain) {
		t.Fatal("no recording changed the scorecard")
	}
}
