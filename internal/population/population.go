// Package population generates populations of scored sessions with known
// parameters, seeded, for the regression detector's tests: sessions of an
// agent whose e2e latency, tool error rate, transcript confidence and
// interruptions follow given distributions, scored by the real scorer.
package population

import (
	"fmt"
	"math"
	"math/rand/v2"
	"strings"

	"github.com/lkscore/lkscore/scoring"
	"github.com/lkscore/lkscore/session"
)

// Params describe one population.
type Params struct {
	Agent, Version string
	// E2EMedianMs is the median per-turn e2e latency; per-turn latencies are
	// log-normal with sigma 0.35, and each session has its own speed (sigma 0.15).
	E2EMedianMs float64
	// ToolErrorRate is the probability that a tool call fails.
	ToolErrorRate float64
	// ErrorCloseRate is the probability that a session closes with CR_ERROR.
	ErrorCloseRate float64
	// ToolEvery: a tool call in every ToolEvery-th agent turn (1: every turn).
	ToolEvery int
	// InterruptRate is the probability that the user interrupts an agent turn.
	InterruptRate float64
	// InputTokensPerTurn and OutputTokensPerTurn are the LLM's median tokens
	// per agent turn (log-normal, sigma 0.3), reported as the SDK's usage
	// report does; 0: the session reports no usage. Their draws come from
	// a generator of their own, so the other measures of a seed do not
	// change with them.
	InputTokensPerTurn, OutputTokensPerTurn float64
}

// Baseline is a healthy tool-using agent: sessions of 8–14 turns with a tool
// call in every turn (about 11 calls a session), 1.1 s median e2e latency,
// 2% tool errors, 2% sessions closing in error.
func Baseline(agent, version string) Params {
	return Params{Agent: agent, Version: version, E2EMedianMs: 1100, ToolErrorRate: 0.02, ErrorCloseRate: 0.02, ToolEvery: 1, InterruptRate: 0.05,
		InputTokensPerTurn: 900, OutputTokensPerTurn: 60}
}

// Clean is an agent with nothing wrong: 0.9 s median e2e latency, no tool
// errors, no interruptions, no session closing in error.
func Clean(agent, version string) Params {
	return Params{Agent: agent, Version: version, E2EMedianMs: 900, ToolEvery: 1}
}

// Generate scores n sessions drawn from p with the given seed.
func Generate(scorer *scoring.Scorer, p Params, seed uint64, n int) []session.Scorecard {
	rng := rand.New(rand.NewPCG(seed, 0x6c6b73636f7265))
	tokens := rand.New(rand.NewPCG(seed, 0x746f6b656e73))
	out := make([]session.Scorecard, 0, n)
	for i := range n {
		s := sessionOf(rng, p, fmt.Sprintf("RM_%s_%d_%d/AJ_%d", strings.ReplaceAll(p.Version, ".", "_"), seed, i, i))
		withUsage(tokens, p, &s)
		out = append(out, scorer.Score(s))
	}
	return out
}

func f(v float64) *float64 { return &v }

func sessionOf(rng *rand.Rand, p Params, key string) scoring.Session {
	turns := 8 + rng.IntN(7)
	speed := math.Exp(rng.NormFloat64() * 0.15)
	t := 1764417600.0
	var items []scoring.Item
	id := 0
	next := func() string { id++; return fmt.Sprintf("item_%04d", id) }
	for i := range turns {
		stop := t + 1.5 + rng.Float64()*2
		items = append(items, scoring.Item{ID: next(), Type: scoring.TypeMessage, CreatedAt: t, Role: "user",
			Text: "I would like to change my booking, please.", TranscriptConfidence: f(math.Min(0.99, 0.9+rng.NormFloat64()*0.03)),
			HasMetrics: true, StartedSpeakingAt: f(t), StoppedSpeakingAt: f(stop), TranscriptionDelay: f(0.2), EndOfTurnDelay: f(0.5)})
		t = stop
		if p.ToolEvery > 0 && i%p.ToolEvery == 0 {
			call := fmt.Sprintf("call_%d", i)
			items = append(items,
				scoring.Item{ID: next(), Type: scoring.TypeFunctionCall, CreatedAt: t + 0.1, CallID: call, Name: "lookup_booking",
					Arguments: `{"day":"friday"}`},
				scoring.Item{ID: next(), Type: scoring.TypeFunctionCallOutput, CreatedAt: t + 0.4, CallID: call, Name: "lookup_booking",
					Output: `{"slots":["14:00"]}`, IsError: rng.Float64() < p.ToolErrorRate})
		}
		e2e := p.E2EMedianMs / 1000 * speed * math.Exp(rng.NormFloat64()*0.35)
		start := t + e2e
		end := start + 2 + rng.Float64()*2
		items = append(items, scoring.Item{ID: next(), Type: scoring.TypeMessage, CreatedAt: start, Role: "assistant",
			Text: "Friday afternoon has 14:00 free. Shall I book it?", Interrupted: rng.Float64() < p.InterruptRate,
			HasMetrics: true, StartedSpeakingAt: f(start), StoppedSpeakingAt: f(end), LLMNodeTTFT: f(e2e * 0.4), TTSNodeTTFB: f(e2e * 0.2),
			E2ELatency: f(e2e)})
		t = end + 0.5
	}
	reason := "CR_PARTICIPANT_DISCONNECTED"
	if rng.Float64() < p.ErrorCloseRate {
		reason = "CR_ERROR"
	}
	return scoring.Session{Identity: session.Identity{Key: key, AgentName: p.Agent},
		Close: session.Close{CloseReason: reason, CloseReasonSource: "summary"}, Items: items,
		Facts: &session.Facts{Tags: []string{"version:" + p.Version}}}
}

// withUsage gives s the SDK's usage report of p's token medians: one LLM,
// its input and output tokens summed over the agent turns.
func withUsage(rng *rand.Rand, p Params, s *scoring.Session) {
	if p.InputTokensPerTurn <= 0 && p.OutputTokensPerTurn <= 0 {
		return
	}
	var in, out float64
	for _, it := range s.Items {
		if it.Role == scoring.RoleAssistant {
			in += p.InputTokensPerTurn * math.Exp(rng.NormFloat64()*0.3)
			out += p.OutputTokensPerTurn * math.Exp(rng.NormFloat64()*0.3)
		}
	}
	s.Facts.UsageReported = true
	s.Facts.Usage = []session.ModelUsage{{Type: session.UsageLLM, Provider: "openai", Model: "gpt-4o-mini",
		InputTokens: session.Opt[int]{V: int(in), Set: true}, OutputTokens: session.Opt[int]{V: int(out), Set: true}}}
}
