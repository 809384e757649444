package session_test

import (
	"bytes"
	"encoding/json"
	"testing"

	"github.com/livekit/protocol/livekit"
	"google.golang.org/protobuf/proto"

	"github.com/lkscore/lkscore/recording"
	"github.com/lkscore/lkscore/scenarios"
	"github.com/lkscore/lkscore/scoring"
	"github.com/lkscore/lkscore/session"
)

// TestScorecardJSONOnFieldCards: the cards scoring makes of the field mix
// (chat histories as the real SDKs write them, full-precision numbers: the
// agents-js ones written by the SDK itself), with a usage report and a price
// table, encode to encoding/json's bytes; data the random cards of
// TestScorecardJSONMatchesEncodingJSON were not built from.
func TestScorecardJSONOnFieldCards(t *testing.T) {
	scorer, err := scoring.NewScorer(scoring.DefaultConfig())
	if err != nil {
		t.Fatal(err)
	}
	mix := scenarios.FieldMix()
	if len(mix) < 10 {
		t.Fatalf("field mix has %d histories", len(mix))
	}
	findings := 0
	for _, f := range mix {
		header, _ := proto.Marshal(&livekit.MetricsRecordingHeader{RoomId: "RM_field", JobId: "AJ_" + f.SDK,
			SessionSummary: `{"close_reason":"CR_USER_INITIATED"}`})
		s, err := recording.NewSession(header, recording.DefaultLimits())
		if err != nil {
			t.Fatal(err)
		}
		chat, err := recording.ParseChatHistoryBytes(f.Chat, recording.DefaultLimits().Chat)
		if err != nil {
			t.Fatalf("%s: %v", f.Name, err)
		}
		s.AttachChat(chat)
		in := s.ScoringInput("field://"+f.Name, "field-agent")
		in.Facts = &session.Facts{SDKLanguage: f.SDK, UsageReported: true, Usage: []session.ModelUsage{
			{Type: session.UsageLLM, Provider: "openai", Model: "gpt-4.1-mini", InputTokens: session.Opt[int]{V: 10431, Set: true},
				OutputTokens: session.Opt[int]{V: 977, Set: true}},
			{Type: session.UsageSTT, Provider: "deepgram", Model: "nova-3", AudioDurationS: session.Opt[float64]{V: 184.31999999999996, Set: true}}}}
		card := scorer.Score(in)
		if card.Usage == nil || !card.Usage.Reported || len(card.Components) != 4 {
			t.Fatalf("%s: the card lacks what it should carry: usage %+v, %d components", f.Name, card.Usage, len(card.Components))
		}
		findings += len(card.Components[0].Findings) + len(card.Components[1].Findings) + len(card.Components[3].Findings)
		want, err := json.Marshal(&card)
		if err != nil {
			t.Fatal(err)
		}
		got, err := card.AppendJSON(nil)
		if err != nil || !bytes.Equal(got, want) {
			t.Fatalf("%s: AppendJSON differs from encoding/json (%v)\n%s\n%s", f.Name, err, got, want)
		}
	}
	if findings == 0 {
		t.Fatal("no finding in any field card: the findings' encoding went untried")
	}
	t.Logf("%d field cards, %d findings", len(mix), findings)
}
