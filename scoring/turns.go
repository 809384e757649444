package scoring

import (
	"fmt"
	"math"

	"github.com/lkscore/lkscore/session"
)

// Turn handling finding codes.
const (
	CodeUnansweredUserTurn = "unanswered_user_turn"
	CodeAgentInterrupted   = "agent_interrupted"
	CodeInterruptionRate   = "interruption_rate"
	CodeTalkOverUser       = "talk_over_user"
	CodeLongSilence        = "long_silence"
	CodeSlowEndOfTurn      = "slow_end_of_turn"
	CodeHandoffLoop        = "handoff_loop"
	// CodeNoUserTurn: the agent spoke and the chat history has no user
	// turn: the caller said nothing the agent transcribed. Not a clean call:
	// the verdict is at most warn.
	CodeNoUserTurn = session.CodeNoUserTurn
)

func turnFindings(a *analysis, cfg Config) []Finding {
	var out []Finding
	items := a.s.Items
	if len(a.users) == 0 && len(a.agents) > 0 && a.s.hasRecording() {
		out = append(out, Finding{Code: CodeNoUserTurn, Severity: Warning,
			Message: "the agent spoke and the chat history has no user turn: the caller said nothing the agent transcribed"})
	}
	unanswered := budget{per: 15, cap: 45}
	for _, i := range a.users {
		if !a.answered[i] {
			out = append(out, Finding{Code: CodeUnansweredUserTurn, Severity: Critical, ItemID: items[i].ID, Turn: some(i),
				Deduction: unanswered.take(), Message: "the user spoke and the agent never answered"})
		}
	}

	interrupted := budget{per: 3, cap: 15}
	over := budget{per: 5, cap: 25}
	silence := budget{per: 4, cap: 20}
	var interruptions int
	for _, i := range a.agents {
		it := &items[i]
		if it.Interrupted {
			interruptions++
			out = append(out, Finding{Code: CodeAgentInterrupted, Severity: Warning, ItemID: it.ID, Turn: some(i),
				Deduction: interrupted.take(), Message: "the user interrupted the agent"})
		}
		u := a.prevUser[i]
		if u < 0 || it.StartedSpeakingAt == nil || items[u].StoppedSpeakingAt == nil {
			continue
		}
		gap := ms(*it.StartedSpeakingAt - *items[u].StoppedSpeakingAt)
		switch {
		case -gap > cfg.Turns.OverlapMs:
			out = append(out, Finding{Code: CodeTalkOverUser, Severity: Warning, ItemID: it.ID, Turn: some(i),
				Value: some(round(-gap)), Threshold: some(cfg.Turns.OverlapMs), Deduction: over.take(),
				Message: "the agent started " + num(-gap) + " ms before the user stopped speaking"})
		case gap > cfg.Turns.LongSilenceMs:
			out = append(out, Finding{Code: CodeLongSilence, Severity: Warning, ItemID: it.ID, Turn: some(i),
				Value: some(round(gap)), Threshold: some(cfg.Turns.LongSilenceMs), Deduction: silence.take(),
				Message: num(gap) + " ms of silence between the user's turn and the agent's answer"})
		}
	}
	if rate := perMinute(interruptions, a.duration); interruptions > 0 && rate > cfg.Turns.InterruptionsPerMin {
		out = append(out, Finding{Code: CodeInterruptionRate, Severity: Warning, Value: some(round(rate)),
			Threshold: some(cfg.Turns.InterruptionsPerMin), Deduction: 10,
			Message: fmt.Sprintf("the agent was interrupted %s times a minute", num(rate))})
	}

	eot := budget{per: 2, cap: 10}
	for _, i := range a.users {
		it := &items[i]
		if it.EndOfTurnDelay != nil && ms(*it.EndOfTurnDelay) > cfg.Turns.EndOfTurnDelayMs {
			v := ms(*it.EndOfTurnDelay)
			out = append(out, Finding{Code: CodeSlowEndOfTurn, Severity: Warning, ItemID: it.ID, Turn: some(i),
				Value: some(round(v)), Threshold: some(cfg.Turns.EndOfTurnDelayMs), Deduction: eot.take(),
				Message: "end of turn detected " + num(v) + " ms after the user stopped"})
		}
	}
	return append(out, handoffLoops(items)...)
}

// perMinute is count per minute of session, with sessions under a minute
// counted as a minute so one early barge-in is not a high rate.
func perMinute(count int, seconds float64) float64 {
	return float64(count) / math.Max(seconds, 60) * 60
}

// handoffLoops finds handoffs back to the agent that handed off just before
// (A→B→A): agents bouncing a user between them.
func handoffLoops(items []Item) []Finding {
	var out []Finding
	loops := budget{per: 10, cap: 20}
	var prev *Item
	for i := range items {
		it := &items[i]
		if it.Type != TypeAgentHandoff {
			continue
		}
		if prev != nil && prev.OldAgentID != "" && it.NewAgentID == prev.OldAgentID && it.OldAgentID == prev.NewAgentID {
			out = append(out, Finding{Code: CodeHandoffLoop, Severity: Warning, ItemID: it.ID, Turn: some(i), Deduction: loops.take(),
				Message: fmt.Sprintf("handed back from %s to %s right after the opposite handoff", it.OldAgentID, it.NewAgentID)})
		}
		prev = it
	}
	return out
}
