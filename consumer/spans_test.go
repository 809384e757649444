package consumer

import (
	"context"
	"encoding/json"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/lkscore/lkscore/config"
	"github.com/lkscore/lkscore/internal/testenv"
	"github.com/lkscore/lkscore/recording"
	"github.com/lkscore/lkscore/scoring"
	"github.com/lkscore/lkscore/session"
	"github.com/lkscore/lkscore/store"
)

// TestAgentsJSMetadataOnly: the real agents-js SDK sends a session with the
// transcript and audio recording off (testdata/agents-js/spans-session.mjs:
// its cloud tracer's spans, its session report, its close and tool-error
// logs, and no upload). lkscore scores it exactly once from those signals:
// the close reason from the SDK's log, latency from the agent_turn spans,
// the interruption, the tool error, and inputs naming traces and logs. The
// same call with the transcript on is scored from its recording and gains
// the span-only facts without any deduction from them.
func TestAgentsJSMetadataOnly(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: runs the real agents-js SDK in Node")
	}
	dir, node := agentsJS(t)
	ns := startNATS(t)
	d, _ := startDaemon(t, pipelineConfig(t, ns.URL()))
	run := func(room, job, record string) {
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		cmd := exec.CommandContext(ctx, node, "spans-session.mjs")
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), "LKSCORE_URL=http://"+d.IngestAddr(), "ROOM_ID="+room, "JOB_ID="+job, "RECORD="+record,
			"LIVEKIT_API_KEY="+testenv.Key, "LIVEKIT_API_SECRET="+testenv.Secret)
		out, err := cmd.CombinedOutput()
		if err != nil || !strings.Contains(string(out), "session sent") || strings.Contains(string(out), "Failed") {
			t.Fatalf("agents-js: %v\n%s", err, out)
		}
	}
	run("RM_MetaOnly", "AJ_MetaOnly", "off")
	run("RM_MetaRec", "AJ_MetaRec", "on")
	cards := oneCardEach(t, ns.URL(), "RM_MetaOnly", "RM_MetaRec")
	byRoom := func(room string) session.Scorecard { return cards[room] }
	meta := byRoom("RM_MetaOnly")
	if got := strings.Join(meta.Inputs, ","); got != "logs,traces" {
		t.Errorf("metadata-only inputs %q, want logs,traces", got)
	}
	if c := meta.Completion; c.CloseReason != "CR_USER_INITIATED" || c.CloseReasonSource != "otlp_log" {
		t.Errorf("metadata-only close reason %s from %s", c.CloseReason, c.CloseReasonSource)
	}
	m := meta.Metrics
	if !m.E2ELatencyP50Ms.Set || m.E2ELatencyP50Ms.V < 781 || m.E2ELatencyP50Ms.V > 988 || m.E2ELatencyMaxMs.V != 988 {
		t.Errorf("e2e latency p50 %+v max %+v, want within the agent_turn spans' 781..988 ms", m.E2ELatencyP50Ms, m.E2ELatencyMaxMs)
	}
	if m.Interruptions != 1 || m.AgentTurns != 6 || m.UserTurns != 4 || m.ToolCalls != 1 || m.ToolErrors != 1 {
		t.Errorf("metrics: interruptions %d, agent turns %d, user turns %d, tool calls %d, errors %d",
			m.Interruptions, m.AgentTurns, m.UserTurns, m.ToolCalls, m.ToolErrors)
	}
	// agents-js writes the user turn's delays in milliseconds: 502 ms, not 502 s.
	if !m.EndOfTurnDelayMaxMs.Set || m.EndOfTurnDelayMaxMs.V != 502 || m.STTDelayMaxMs.V != 120 {
		t.Errorf("end of turn delay max %+v, stt delay max %+v, want 502 and 120 ms", m.EndOfTurnDelayMaxMs, m.STTDelayMaxMs)
	}
	if !hasFinding(meta, session.ToolReliability, scoring.CodeToolError) || !hasFinding(meta, session.TurnHandling, scoring.CodeAgentInterrupted) {
		t.Errorf("metadata-only findings: %+v", meta.Components)
	}
	for _, c := range meta.Components {
		if c.Verdict == session.NotMeasured && c.Name != session.TranscriptIntegrity {
			t.Errorf("%s not measured: %s", c.Name, c.NotMeasured)
		}
	}
	if meta.Spans == nil || !meta.Spans.TTFTP50Ms.Set || meta.Spans.TTFTP50Ms.V != 180 || meta.Spans.TTFBP50Ms.V != 100 {
		t.Errorf("span metrics %+v", meta.Spans)
	}

	rec := byRoom("RM_MetaRec")
	if got := strings.Join(rec.Inputs, ","); got != "recording,logs,traces" {
		t.Errorf("recorded inputs %q, want recording,logs,traces", got)
	}
	if !hasFinding(rec, session.TurnHandling, scoring.CodeSpanToolError) || rec.Spans == nil || rec.Spans.ToolErrors != 1 {
		t.Errorf("recorded session lacks the span-only facts: %+v %+v", rec.Components[0].Findings, rec.Spans)
	}
	for _, c := range rec.Components {
		for _, f := range c.Findings {
			if (f.Code == scoring.CodeSpanToolError || f.Code == scoring.CodeProviderError) && f.Deduction != 0 {
				t.Errorf("span-only finding %s deducts %v", f.Code, f.Deduction)
			}
		}
	}
	if rec.Metrics.UserTurns != 4 || rec.Metrics.Interruptions != 1 {
		t.Errorf("recorded session scored from its spans, not its chat history: %+v", rec.Metrics)
	}
}

// oneCardEach waits for the rooms' scorecards and checks that each room has
// exactly one, valid against the schema; LKSCORE_SHOW_CARD logs them.
func oneCardEach(t *testing.T, url string, rooms ...string) map[string]session.Scorecard {
	t.Helper()
	testenv.WaitFor(t, settleWait, "the scorecards", func() bool { return len(streamMsgs(t, url, "LKSCORE_RESULTS")) >= len(rooms) })
	quiesce(t, url, defaultConsumers)
	time.Sleep(1500 * time.Millisecond) // a second scorecard of any would be here by now
	cards := results(t, url)
	if len(cards) != len(rooms) {
		t.Fatalf("%d scorecards for %d sessions", len(cards), len(rooms))
	}
	checkSchema(t, url)
	if os.Getenv("LKSCORE_SHOW_CARD") != "" {
		b, _ := json.MarshalIndent(cards, "", " ")
		t.Logf("%s", b)
	}
	out := map[string]session.Scorecard{}
	for _, room := range rooms {
		i := slices.IndexFunc(cards, func(c session.Scorecard) bool { return c.Session.RoomID == room })
		if i < 0 {
			t.Fatalf("%s: no scorecard", room)
		}
		out[room] = cards[i]
	}
	return out
}

func hasFinding(c session.Scorecard, component, code string) bool {
	for _, comp := range c.Components {
		if comp.Name != component {
			continue
		}
		for _, f := range comp.Findings {
			if f.Code == code {
				return true
			}
		}
	}
	return false
}

// voiceCall is what the SDK measured in testdata/agents-js/voice-session.mjs,
// from its own chat items (seconds).
type voiceCall struct {
	Sent        bool      `json:"sent"`
	E2E         []float64 `json:"e2e"`
	TTFT        []float64 `json:"ttft"`
	TTFB        []float64 `json:"ttfb"`
	AgentTurns  int       `json:"agentTurns"`
	Interrupted int       `json:"interrupted"`
	UserTurns   int       `json:"userTurns"`
}

// TestAgentsJSVoicePipeline: a call through the real agents-js SDK's voice
// pipeline (its AgentSession, AudioRecognition, generation, tool execution
// and interruption) on deterministic providers written on its base classes
// (testdata/agents-js/voice-session.mjs), its spans and logs sent by its own
// exporters. With the transcript and audio off lkscore scores it exactly
// once, from those signals, with the values the SDK measured; with the
// transcript on every component scores as the recording alone scores it,
// and the span-only facts are added; when the TTS refuses the goodbye, the
// reply nobody heard costs turn handling and nothing else.
func TestAgentsJSVoicePipeline(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: runs the real agents-js SDK in Node")
	}
	dir, node := agentsJS(t)
	ns := startNATS(t)
	cfg := pipelineConfig(t, ns.URL())
	d, _ := startDaemon(t, cfg)
	calls := map[string]voiceCall{}
	var mu sync.Mutex
	var wg sync.WaitGroup
	for room, env := range map[string][]string{
		"RM_VoiceMeta":   {"RECORD=off"},
		"RM_VoiceRec":    {"RECORD=on"},
		"RM_VoiceSilent": {"RECORD=on", "TTS_FAIL=Goodbye!"}, // the TTS refuses the goodbye
	} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
			defer cancel()
			cmd := exec.CommandContext(ctx, node, "voice-session.mjs")
			cmd.Dir = dir
			cmd.Env = append(append(os.Environ(), env...), "LKSCORE_URL=http://"+d.IngestAddr(), "ROOM_ID="+room, "JOB_ID=AJ_"+room[3:],
				"LOG_LEVEL=info", "LIVEKIT_API_KEY="+testenv.Key, "LIVEKIT_API_SECRET="+testenv.Secret)
			out, err := cmd.Output()
			var call voiceCall
			lines := strings.Split(strings.TrimSpace(string(out)), "\n")
			if jerr := json.Unmarshal([]byte(lines[len(lines)-1]), &call); err != nil || jerr != nil || !call.Sent ||
				strings.Contains(string(out), "Failed") {
				t.Errorf("agents-js %s: %v %v\n%s", room, err, jerr, out)
				return
			}
			mu.Lock()
			calls[room] = call
			mu.Unlock()
		}()
	}
	wg.Wait()
	if t.Failed() {
		t.FailNow()
	}
	cards := oneCardEach(t, ns.URL(), "RM_VoiceMeta", "RM_VoiceRec", "RM_VoiceSilent")
	byRoom := func(room string) session.Scorecard { return cards[room] }
	if os.Getenv("LKSCORE_SHOW_CARD") != "" {
		t.Logf("%+v", calls)
	}
	ms := func(s []float64) (lo, hi float64) {
		return slices.Min(s) * 1000, slices.Max(s) * 1000
	}
	for _, room := range []string{"RM_VoiceMeta", "RM_VoiceRec"} {
		c, call := byRoom(room), calls[room]
		if c.Completion.CloseReason != "CR_USER_INITIATED" || c.Completion.CloseReasonSource != "otlp_log" {
			t.Errorf("%s: close reason %s from %s, want the SDK's log's user_initiated", room, c.Completion.CloseReason, c.Completion.CloseReasonSource)
		}
		if c.Spans == nil || c.Spans.ToolErrors != 1 {
			t.Fatalf("%s: span facts %+v, want the failed lookup_order", room, c.Spans)
		}
		if lo, hi := ms(call.TTFT); !c.Spans.TTFTP50Ms.Set || c.Spans.TTFTP50Ms.V < lo-0.5 || c.Spans.TTFTP50Ms.V > hi+0.5 {
			t.Errorf("%s: TTFT p50 %+v, want within the SDK's %.1f..%.1f ms", room, c.Spans.TTFTP50Ms, lo, hi)
		}
		if lo, hi := ms(call.TTFB); !c.Spans.TTFBP50Ms.Set || c.Spans.TTFBP50Ms.V < lo-0.5 || c.Spans.TTFBP50Ms.V > hi+0.5 {
			t.Errorf("%s: TTFB p50 %+v, want within the SDK's %.1f..%.1f ms", room, c.Spans.TTFBP50Ms, lo, hi)
		}
	}

	meta, call := byRoom("RM_VoiceMeta"), calls["RM_VoiceMeta"]
	if got := strings.Join(meta.Inputs, ","); got != "logs,traces" {
		t.Errorf("metadata-only inputs %q, want logs,traces", got)
	}
	m := meta.Metrics
	// lkscore reports latencies in whole milliseconds: half a millisecond either way is rounding.
	if lo, hi := ms(call.E2E); !m.E2ELatencyP50Ms.Set || m.E2ELatencyP50Ms.V < lo-0.5 || m.E2ELatencyP50Ms.V > hi+0.5 ||
		math.Abs(m.E2ELatencyMaxMs.V-hi) > 0.5 {
		t.Errorf("e2e latency p50 %+v max %+v, want within the SDK's %.1f..%.1f ms", m.E2ELatencyP50Ms, m.E2ELatencyMaxMs, lo, hi)
	}
	if m.Interruptions != call.Interrupted || m.UserTurns != call.UserTurns || m.ToolCalls != 1 || m.ToolErrors != 1 || m.AgentTurns < call.AgentTurns {
		t.Errorf("metrics: interruptions %d, user turns %d, tool calls %d, errors %d, agent turns %d; the SDK: %+v",
			m.Interruptions, m.UserTurns, m.ToolCalls, m.ToolErrors, m.AgentTurns, call)
	}
	if !hasFinding(meta, session.ToolReliability, scoring.CodeToolError) || !hasFinding(meta, session.TurnHandling, scoring.CodeAgentInterrupted) {
		t.Errorf("metadata-only findings: %+v", meta.Components)
	}
	for _, c := range meta.Components {
		if c.Verdict == session.NotMeasured && c.Name != session.TranscriptIntegrity {
			t.Errorf("%s not measured: %s", c.Name, c.NotMeasured)
		}
	}

	// The recorded call: every component as its recording alone scores it.
	rec := byRoom("RM_VoiceRec")
	if got := strings.Join(rec.Inputs, ","); got != "recording,logs,traces" {
		t.Errorf("recorded inputs %q, want recording,logs,traces", got)
	}
	alone := scoreRecordingAlone(t, cfg, rec)
	for i, c := range rec.Components {
		if a := alone.Components[i]; c.Name != a.Name || c.Score != a.Score || c.Verdict != a.Verdict {
			t.Errorf("%s: %v %s with the spans, %v %s from the recording alone", c.Name, c.Score, c.Verdict, a.Score, a.Verdict)
		}
	}
	if rec.Overall.Score != alone.Overall.Score || rec.Overall.Verdict != alone.Overall.Verdict || alone.Spans != nil {
		t.Errorf("overall %v with the spans, %v alone (alone spans %+v)", rec.Overall, alone.Overall, alone.Spans)
	}
	if !hasFinding(rec, session.TurnHandling, scoring.CodeSpanToolError) {
		t.Errorf("recorded session lacks the span-only tool error: %+v", rec.Components[0].Findings)
	}

	// The TTS refused the goodbye: the SDK's chat history has it as said,
	// only the spans know nobody heard it. Turn handling pays for it, and
	// nothing else changes.
	silent := byRoom("RM_VoiceSilent")
	alone = scoreRecordingAlone(t, cfg, silent)
	for i, c := range silent.Components {
		want := alone.Components[i].Deducted
		if c.Name == session.TurnHandling {
			want += 15
		}
		if c.Deducted != want {
			t.Errorf("silent goodbye: %s deducted %v, %v from the recording alone", c.Name, c.Deducted, alone.Components[i].Deducted)
		}
	}
	if !hasFinding(silent, session.TurnHandling, scoring.CodeSilentReply) || !hasFinding(silent, session.TurnHandling, scoring.CodeProviderError) ||
		hasFinding(rec, session.TurnHandling, scoring.CodeSilentReply) {
		t.Errorf("silent reply: %+v; heard call: %+v", silent.Components[0].Findings, rec.Components[0].Findings)
	}
}

// scoreRecordingAlone scores a scorecard's recording from the local store as
// the worker would with no span facts: the same close reason, no spans.
func scoreRecordingAlone(t *testing.T, cfg config.Config, card session.Scorecard) session.Scorecard {
	t.Helper()
	ctx := context.Background()
	st, err := store.OpenLocalDir(filepath.Join(cfg.DataDir, "recordings"))
	if err != nil {
		t.Fatal(err)
	}
	dir, ok := strings.CutPrefix(card.Session.Source, st.Location(""))
	if !ok {
		t.Fatalf("source %q is not in the local store %q", card.Session.Source, st.Location(""))
	}
	s, err := recording.Load(ctx, st, dir, cfg.Limits.Parser())
	if err != nil {
		t.Fatalf("load %s: %v", dir, err)
	}
	in := s.ScoringInput(card.Session.Source, card.Session.AgentName)
	in.Inputs = []string{session.InputRecording}
	in.CloseReason, in.CloseReasonSource = card.Completion.CloseReason, card.Completion.CloseReasonSource
	return scoring.Score(in, cfg.Scoring)
}
