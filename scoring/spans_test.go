package scoring_test

import (
	"bytes"
	"math/rand/v2"
	"path/filepath"
	"testing"

	"github.com/lkscore/lkscore/scoring"
	"github.com/lkscore/lkscore/session"
)

func f64(v float64) *float64 { return &v }

// callSpans is a metadata-only call as the SDKs' spans have it (seconds;
// the consumer converts agents-js's milliseconds).
func callSpans() []scoring.Span {
	return []scoring.Span{
		{ID: "01", Name: scoring.SpanAgentSession, Start: 100, End: 130},
		{ID: "02", Parent: "01", Name: scoring.SpanAgentTurn, Start: 100.5, End: 103},
		{ID: "03", Parent: "02", Name: scoring.SpanLLMNode, Start: 100.5, End: 101, TTFT: f64(0.2)},
		{ID: "04", Parent: "01", Name: scoring.SpanUserTurn, Start: 103.5, End: 106, TranscriptionDelay: f64(0.1), EndOfTurnDelay: f64(0.5)},
		{ID: "05", Parent: "01", Name: scoring.SpanAgentTurn, Start: 106.2, End: 110, E2ELatency: f64(0.9)},
		{ID: "06", Parent: "05", Name: scoring.SpanTTSNode, Start: 106.4, End: 110, TTFB: f64(0.12)},
		{ID: "07", Parent: "01", Name: scoring.SpanUserTurn, Start: 111, End: 113},
		{ID: "08", Parent: "01", Name: scoring.SpanAgentTurn, Start: 113.5, End: 115, E2ELatency: f64(3.5), Interrupted: true},
		{ID: "09", Parent: "08", Name: "tts_request", Start: 113.6, End: 113.9, Error: "503 from the TTS provider"},
	}
}

func metaSession(spans []scoring.Span) scoring.Session {
	return scoring.Session{Identity: session.Identity{Key: "RM_a/AJ_b", RoomID: "RM_a", JobID: "AJ_b"}, Close: session.Close{CloseReason: "CR_USER_INITIATED"}, Spans: spans, Inputs: []string{scoring.InputLogs, scoring.InputTraces}}
}

// TestSpansOnlyScorecard: a session without a recording is scored from its
// spans; what the spans cannot measure (no function_tool span, no
// transcript confidence) is not measured, never 100, and left out of the
// overall score.
func TestSpansOnlyScorecard(t *testing.T) {
	sc := scoring.Score(metaSession(callSpans()), scoring.DefaultConfig())
	byName := map[string]scoring.Component{}
	for _, c := range sc.Components {
		byName[c.Name] = c
	}
	for _, name := range []string{scoring.TranscriptIntegrity, scoring.ToolReliability} {
		if c := byName[name]; c.Verdict != scoring.NotMeasured || c.Score != 0 || c.NotMeasured == "" {
			t.Errorf("%s: %+v, want not measured with a reason", name, c)
		}
	}
	th, rl := byName[scoring.TurnHandling], byName[scoring.ResponseLatency]
	if th.Verdict == scoring.NotMeasured || rl.Verdict == scoring.NotMeasured {
		t.Fatalf("turn handling %s, response latency %s: both have spans", th.Verdict, rl.Verdict)
	}
	if want := (th.Score*th.Weight + rl.Score*rl.Weight) / (th.Weight + rl.Weight); sc.Overall.Score != float64(int(want*100+0.5))/100 {
		t.Errorf("overall %v, want %v over the measured components only", sc.Overall.Score, want)
	}
	if rl.Score == 100 {
		t.Errorf("a 3.5 s reply must cost response latency something: %+v", rl)
	}
	m := sc.Metrics
	if m.UserTurns != 2 || m.AgentTurns != 3 || m.Interruptions != 1 || !m.E2ELatencyMaxMs.Set || m.E2ELatencyMaxMs.V != 3500 ||
		m.TTFTP50Ms.V != 200 || m.TTFBP50Ms.V != 120 || m.EndOfTurnDelayMaxMs.V != 500 {
		t.Errorf("metrics %+v", m)
	}
	if sc.Spans == nil || sc.Spans.ProviderErrors != 1 || !hasCode(th, scoring.CodeProviderError) {
		t.Errorf("the TTS provider's error: spans %+v, turn handling %+v", sc.Spans, th.Findings)
	}
	if got := sc.Inputs; len(got) != 2 || got[0] != scoring.InputLogs {
		t.Errorf("inputs %v", got)
	}
}

func hasCode(c scoring.Component, code string) bool {
	for _, f := range c.Findings {
		if f.Code == code {
			return true
		}
	}
	return false
}

// TestSpansAnyOrder: the same spans in any order give the same bytes.
func TestSpansAnyOrder(t *testing.T) {
	want := marshal(t, scoring.Score(metaSession(callSpans()), scoring.DefaultConfig()))
	r := rand.New(rand.NewPCG(1, 2))
	for range 20 {
		ss := callSpans()
		r.Shuffle(len(ss), func(i, j int) { ss[i], ss[j] = ss[j], ss[i] })
		if got := marshal(t, scoring.Score(metaSession(ss), scoring.DefaultConfig())); !bytes.Equal(got, want) {
			t.Fatalf("shuffled spans gave other bytes:\n%s", got)
		}
	}
}

// TestSpansKeepRecordedScores: spans added to a session with a recording
// (a provider error, a failed tool) change no component score or verdict
// the chat history decides, and add their findings and metrics.
func TestSpansKeepRecordedScores(t *testing.T) {
	dirs, _ := filepath.Glob("../scenarios/data/*")
	extra := append(callSpans(), scoring.Span{ID: "10", Name: scoring.SpanFunctionTool, Start: 120, End: 121, Tool: "lookup", ToolError: true})
	for _, dir := range dirs {
		plain := scoreDir(t, dir)
		in := sessionOf(t, dir)
		in.Spans, in.Inputs = extra, []string{scoring.InputRecording, scoring.InputLogs, scoring.InputTraces}
		with := scoring.Score(in, scoring.DefaultConfig())
		if with.Overall.Score != plain.Overall.Score || with.Overall.Verdict != plain.Overall.Verdict || len(with.Overall.Reasons) != len(plain.Overall.Reasons) {
			t.Errorf("%s: overall %+v with spans, %+v without", dir, with.Overall, plain.Overall)
		}
		for i, c := range with.Components {
			p := plain.Components[i]
			if c.Score != p.Score || c.Verdict != p.Verdict || c.Deducted != p.Deducted {
				t.Errorf("%s: %s %v/%s with spans, %v/%s without", dir, c.Name, c.Score, c.Verdict, p.Score, p.Verdict)
			}
		}
		if with.Metrics != plain.Metrics {
			t.Errorf("%s: the chat history's metrics changed with spans", dir)
		}
		if !hasCode(with.Components[0], scoring.CodeSpanToolError) || !hasCode(with.Components[0], scoring.CodeProviderError) || with.Spans == nil {
			t.Errorf("%s: span-only facts missing: %+v", dir, with.Components[0].Findings)
		}
	}
}

// silentTurn is an agent turn whose text to speech failed before its first
// frame, as agents-js 1.9.0's spans have it (voice-session.mjs with
// TTS_FAIL): a tts_node without a TTFB and, under a tts_request span that
// is not kept, a tts_request_run with the error.
func silentTurn(errAt float64) []scoring.Span {
	return []scoring.Span{
		{ID: "20", Parent: "01", Name: scoring.SpanUserTurn, Start: 120, End: 121},
		{ID: "21", Parent: "01", Name: scoring.SpanAgentTurn, Start: 121.6, End: 121.9},
		{ID: "22", Parent: "21", Name: scoring.SpanLLMNode, Start: 121.6, End: 121.8, TTFT: f64(0.18)},
		{ID: "23", Parent: "21", Name: scoring.SpanTTSNode, Start: 121.8, End: 121.9},
		{ID: "24", Parent: "zz", Name: "tts_request_run", Start: errAt, End: errAt + 0.1, Error: "scripted-tts: quota exceeded"},
	}
}

// TestSilentReply: a reply the text to speech never voiced costs turn
// handling, with or without a recording, and nothing else changes; a turn
// without audio but without a TTS error in it (interrupted before its
// first frame), or a TTS error outside the turn, costs nothing.
func TestSilentReply(t *testing.T) {
	cfg := scoring.DefaultConfig()
	count := func(c scoring.Component) (n int, ded float64) {
		for _, f := range c.Findings {
			if f.Code == scoring.CodeSilentReply {
				n++
				ded += f.Deduction
			}
		}
		return n, ded
	}
	meta := scoring.Score(metaSession(append(callSpans(), silentTurn(121.81)...)), cfg)
	n, ded := count(meta.Components[0])
	if n != 1 || ded != 15 {
		t.Fatalf("metadata-only: %d silent replies costing %v, want 1 costing 15: %+v", n, ded, meta.Components[0].Findings)
	}
	for _, f := range meta.Components[0].Findings {
		if f.Code == scoring.CodeSilentReply && (f.ItemID != "span:21" || !f.Turn.Set || f.Severity != scoring.Critical) {
			t.Errorf("silent reply finding %+v, want item span:21 with its turn, critical", f)
		}
	}
	for name, spans := range map[string][]scoring.Span{
		"no TTS error":               append(callSpans(), silentTurn(121.81)[:4]...),
		"a TTS error after the turn": append(callSpans(), silentTurn(125)...),
	} {
		sc := scoring.Score(metaSession(spans), cfg)
		if n, _ := count(sc.Components[0]); n != 0 {
			t.Errorf("%s: %d silent replies", name, n)
		}
	}

	dirs, _ := filepath.Glob("../scenarios/data/*")
	for _, dir := range dirs {
		plain := scoreDir(t, dir)
		in := sessionOf(t, dir)
		in.Spans, in.Inputs = append(callSpans(), silentTurn(121.81)...), []string{scoring.InputRecording, scoring.InputLogs, scoring.InputTraces}
		with := scoring.Score(in, cfg)
		for i, c := range with.Components {
			p, want := plain.Components[i], plain.Components[i].Deducted
			if c.Name == scoring.TurnHandling {
				want += 15
			}
			if c.Deducted != want {
				t.Errorf("%s: %s deducted %v with the silent reply, %v without", dir, c.Name, c.Deducted, p.Deducted)
			}
		}
		if n, _ := count(with.Components[0]); n != 1 {
			t.Errorf("%s: %d silent replies with a recording", dir, n)
		}
	}
}
