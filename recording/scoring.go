package recording

import (
	"strings"

	"github.com/lkscore/lkscore/scoring"
	"github.com/lkscore/lkscore/session"
)

// ScoringInput maps a parsed session to the scoring package's input.
// source points back at the recording (s3://…, file://…); agentName comes
// from the job when known (the header does not carry it).
func (s *Session) ScoringInput(source, agentName string) scoring.Session {
	return s.ScoringInputInto(nil, source, agentName)
}

// ScoringInputInto is ScoringInput with the items written into dst's
// memory when it has room (a batch scoring one session after another).
func (s *Session) ScoringInputInto(dst []scoring.Item, source, agentName string) scoring.Session {
	in := scoring.Session{
		Identity: session.Identity{Key: s.Key, RoomID: s.RoomID, RoomName: s.RoomName, JobID: s.JobID, AgentName: agentName},
		Close:    s.Close, Source: source,
		Redacted: s.RedactionEnabled, // the header asked for redaction
	}
	in.SummaryError = s.Summary.Error
	if s.Chat == nil {
		return in
	}
	if cap(dst) >= len(s.Chat.Items) {
		in.Items = dst[:len(s.Chat.Items)]
	} else {
		in.Items = make([]scoring.Item, len(s.Chat.Items))
	}
	for i := range s.Chat.Items {
		it := &s.Chat.Items[i]
		out := scoring.Item{
			ID: it.ID, Type: it.Type, CreatedAt: it.CreatedAt, Role: it.Role, Text: strings.Join(it.Content, " "),
			Interrupted: it.Interrupted, TranscriptConfidence: it.TranscriptConfidence,
			CallID: it.CallID, Name: it.Name, Arguments: it.Arguments, Output: it.Output, IsError: it.IsError,
			OldAgentID: it.OldAgentID, NewAgentID: it.NewAgentID,
		}
		if it.Role == scoring.RoleAssistant {
			// What was said, for the transcript measures: the SDK's
			// expressive markup is for the TTS, not words.
			out.Text = StripExprMarkup(out.Text)
		}
		if m := it.Metrics; m != nil {
			out.HasMetrics = true
			out.StartedSpeakingAt, out.StoppedSpeakingAt = m.StartedSpeakingAt, m.StoppedSpeakingAt
			out.TranscriptionDelay, out.EndOfTurnDelay = m.TranscriptionDelay, m.EndOfTurnDelay
			out.LLMNodeTTFT, out.TTSNodeTTFB, out.E2ELatency = m.LLMNodeTTFT, m.TTSNodeTTFB, m.E2ELatency
		}
		in.Items[i] = out
	}
	return in
}
