package dashboard

import (
	"testing"
	"time"

	"github.com/lkscore/lkscore/scoring"
	"github.com/lkscore/lkscore/session"
)

// TestNoEvidenceLeftOutOfTrends: a header-only upload, an empty chat
// history and a chat history with no user turn are scored by the real
// scorer; none is a pass, and the overview's score trend, the versions'
// medians and the worst list take only the session with evidence, while the
// unscored ones are counted apart.
func TestNoEvidenceLeftOutOfTrends(t *testing.T) {
	f := func(v float64) *float64 { return &v }
	at := 1764417600.0
	talk := []scoring.Item{
		{ID: "u", Type: scoring.TypeMessage, Role: scoring.RoleUser, Text: "hi", CreatedAt: at, TranscriptConfidence: f(0.5), HasMetrics: true,
			StartedSpeakingAt: f(at), StoppedSpeakingAt: f(at + 1), TranscriptionDelay: f(0.2), EndOfTurnDelay: f(0.5)},
		{ID: "a", Type: scoring.TypeMessage, Role: scoring.RoleAssistant, Text: "hello", CreatedAt: at + 2, HasMetrics: true,
			StartedSpeakingAt: f(at + 2), StoppedSpeakingAt: f(at + 3), E2ELatency: f(1)},
	}
	sessions := map[string][]scoring.Item{"RM_talk": talk, "RM_header": nil, "RM_empty": {}, "RM_silent": talk[1:]}
	now := time.Now()
	var entries []Entry
	for room, items := range sessions {
		sc := scoring.Score(scoring.Session{Identity: session.Identity{Key: room + "/AJ"}, Close: session.Close{CloseReason: "CR_PARTICIPANT_DISCONNECTED"}, Items: items}, scoring.DefaultConfig())
		if room != "RM_talk" && sc.Overall.Verdict == session.Pass {
			t.Errorf("%s: pass without evidence (%v)", room, sc.Overall.Reasons)
		}
		entries = append(entries, entryOf(uint64(len(entries)+1), now, &sc, "version:"))
	}
	talkScore := scoring.Score(scoring.Session{Identity: session.Identity{Key: "RM_talk/AJ"}, Close: session.Close{CloseReason: "CR_PARTICIPANT_DISCONNECTED"}, Items: talk}, scoring.DefaultConfig()).Overall.Score
	tr := trend(entries, now.Add(-time.Minute), now.Add(time.Minute), []series{{"overall", func(e *Entry) float64 { return e.Score }, 0.5}}, 100, "")
	if got := tr.Lines[0].Last; got != talkScore {
		t.Errorf("score trend's median %v, want %v: the sessions without evidence moved it", got, talkScore)
	}
	rows := versions(entries)
	if len(rows) != 1 || rows[0].Sessions != 2 || rows[0].Unscored != 2 || rows[0].ScoreP50 != talkScore {
		t.Errorf("versions: %+v", rows)
	}
	if w := worst(entries, 10); len(w) != 1 || w[0].Key != "RM_talk/AJ" {
		t.Errorf("worst: %+v", w)
	}
	if mix := verdictMix(entries); len(mix.Bars) != 4 || mix.Bars[3].Label != session.Unscored {
		t.Errorf("verdict mix: %+v", mix.Bars)
	}
}
