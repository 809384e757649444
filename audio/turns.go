package audio

import (
	"math"
	"slices"
)

// turns pairs user utterances with the agent's answers and computes the
// call's metrics (docs/audio.md has the definitions).
func turns(user, agent []Segment, cfg Config, m Metrics) ([]Turn, []Segment, Metrics) {
	var out []Turn
	var latencies, yields []int64
	// A back-channel starts while the agent speaks and the agent keeps the
	// floor: the user's short utterance ends inside the agent's, or in a
	// pause of it (a sentence break) that the agent ends within
	// BackchannelMaxMs of the user's end.
	isBackchannel := func(u Segment) bool {
		if u.EndMs-u.StartMs > cfg.BackchannelMaxMs {
			return false
		}
		for i, a := range agent {
			if a.StartMs < u.StartMs && u.StartMs < a.EndMs {
				return u.EndMs < a.EndMs || i+1 < len(agent) && agent[i+1].StartMs-u.EndMs <= cfg.BackchannelMaxMs
			}
		}
		return false
	}
	var talkers []Segment // user utterances that are turns
	for _, u := range user {
		if isBackchannel(u) {
			m.BackchannelCount++
			continue
		}
		talkers = append(talkers, u)
	}
	for i, u := range talkers {
		t := Turn{UserStartMs: u.StartMs, UserEndMs: u.EndMs}
		// A barge-in: the user starts while the agent is speaking.
		for _, a := range agent {
			if a.StartMs < u.StartMs && u.StartMs < a.EndMs {
				t.BargeIn, t.YieldMs = true, a.EndMs-u.StartMs
				m.BargeInCount++
				yields = append(yields, t.YieldMs)
				break
			}
		}
		// The answer: the first agent utterance that starts after the user
		// started (and not the one the user barged into), before the user's
		// next turn.
		next := int64(math.MaxInt64)
		if i+1 < len(talkers) {
			next = talkers[i+1].StartMs
		}
		for _, a := range agent {
			if a.StartMs > u.StartMs && a.StartMs < next {
				t.AgentStartMs = a.StartMs
				t.HeardLatencyMs = a.StartMs - u.EndMs
				if t.HeardLatencyMs < 0 {
					m.TalkOverCount++
				}
				latencies = append(latencies, t.HeardLatencyMs)
				out = append(out, t)
				break
			}
		}
	}
	m.HeardLatencyP50Ms, m.HeardLatencyP95Ms, m.HeardLatencyP99Ms = pct(latencies, 0.5), pct(latencies, 0.95), pct(latencies, 0.99)
	m.YieldP50Ms = pct(yields, 0.5)
	silences := talkShares(user, agent, cfg, &m)
	return out, silences, m
}

// talkShares counts the awkward silences (gaps in which nobody speaks,
// between two utterances, longer than cfg.AwkwardSilenceMs) and returns
// them, and sets the overlap ratio and each side's share of the speech.
func talkShares(user, agent []Segment, cfg Config, m *Metrics) []Segment {
	all := append(slices.Clone(user), agent...)
	slices.SortFunc(all, func(a, b Segment) int { return int(a.StartMs - b.StartMs) })
	var end int64 = -1
	var union, overlap int64
	var silences []Segment
	for _, s := range all {
		if end >= 0 && s.StartMs-end > cfg.AwkwardSilenceMs {
			m.AwkwardSilenceCount++
			silences = append(silences, Segment{StartMs: end, EndMs: s.StartMs})
		}
		if s.EndMs > end {
			if s.StartMs > end {
				union += s.EndMs - s.StartMs
			} else {
				union += s.EndMs - end
			}
			end = s.EndMs
		}
	}
	for _, u := range user {
		for _, a := range agent {
			if lo, hi := max(u.StartMs, a.StartMs), min(u.EndMs, a.EndMs); hi > lo {
				overlap += hi - lo
			}
		}
	}
	us, as := total(user), total(agent)
	if union > 0 {
		m.OverlapRatio = math.Round(float64(overlap)/float64(union)*1000) / 1000
	}
	if us+as > 0 {
		m.UserSpeechShare = math.Round(float64(us)/float64(us+as)*1000) / 1000
		m.AgentSpeechShare = math.Round(float64(as)/float64(us+as)*1000) / 1000
	}
	return silences
}

func total(s []Segment) int64 {
	var t int64
	for _, x := range s {
		t += x.EndMs - x.StartMs
	}
	return t
}

// pct is the nearest-rank percentile; 0 without values.
func pct(v []int64, q float64) int64 {
	if len(v) == 0 {
		return 0
	}
	s := slices.Clone(v)
	slices.Sort(s)
	i := int(math.Ceil(q*float64(len(s)))) - 1
	return s[min(max(i, 0), len(s)-1)]
}
