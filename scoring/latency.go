package scoring

import "fmt"

// Response latency finding codes.
const (
	CodeE2ELatencyP95     = "e2e_latency_p95"
	CodeSlowResponse      = "slow_response"
	CodeE2ELatencyMissing = "e2e_latency_missing"
	CodeTTFTP95           = "ttft_p95"
	CodeTTFBP95           = "ttfb_p95"
	CodeSTTDelayP95       = "stt_delay_p95"
)

// percentileRule costs nothing at or under good, a linear share of half the
// full deduction between good and bad, and the full deduction over bad. It
// never decreases as the value grows.
func percentileRule(code, what string, d dist, good, bad, full float64) []Finding {
	p95 := d.stat(95)
	if !p95.Set || p95.V <= good {
		return nil
	}
	v := p95.V
	ded, sev, thr := full, Critical, bad
	if v <= bad {
		ded, sev, thr = round(full/2*(v-good)/(bad-good)), Warning, good
	}
	return []Finding{{Code: code, Severity: sev, Value: some(v), Threshold: some(thr), Deduction: ded,
		Message: fmt.Sprintf("%s p95 is %s ms (good <= %s ms, bad > %s ms)", what, num(v), num(good), num(bad))}}
}

func latencyFindings(a *analysis, cfg Config) []Finding {
	l := cfg.Latency
	// Sized first: a slow agent answers most turns, and growing the slice
	// finding by finding was a third of a session's garbage (issue 58).
	n := 4
	for _, i := range a.agents {
		if it := &a.s.Items[i]; it.E2ELatency == nil || *it.E2ELatency < 0 || ms(*it.E2ELatency) > l.E2ETurnMs {
			n++
		}
	}
	out := make([]Finding, 0, n)
	out = append(out, percentileRule(CodeE2ELatencyP95, "end-to-end latency", a.e2e, l.E2EGoodMs, l.E2EBadMs, 50)...)
	out = append(out, percentileRule(CodeTTFTP95, "LLM time to first token", a.ttft, l.TTFTGoodMs, l.TTFTBadMs, 15)...)
	out = append(out, percentileRule(CodeTTFBP95, "TTS time to first byte", a.ttfb, l.TTFBGoodMs, l.TTFBBadMs, 15)...)
	out = append(out, percentileRule(CodeSTTDelayP95, "transcription delay", a.stt, l.STTDelayGoodMs, l.STTDelayBadMs, 10)...)

	slow := budget{per: 2, cap: 20}
	var missing []int
	for _, i := range a.agents {
		it := &a.s.Items[i]
		if it.E2ELatency == nil || *it.E2ELatency < 0 {
			if a.prevUser[i] >= 0 { // only replies have an e2e latency
				missing = append(missing, i)
			}
			continue
		}
		if v := ms(*it.E2ELatency); v > l.E2ETurnMs {
			out = append(out, Finding{Code: CodeSlowResponse, Severity: Warning, ItemID: it.ID, Turn: some(i),
				Value: some(round(v)), Threshold: some(l.E2ETurnMs), Deduction: slow.take(),
				Message: "answered " + num(v) + " ms after the user stopped"})
		}
	}
	for _, i := range missing {
		out = append(out, Finding{Code: CodeE2ELatencyMissing, Severity: Info, ItemID: a.s.Items[i].ID, Turn: some(i),
			Message: "reply without e2e_latency (e.g. the first after a handoff): reported, not counted as zero"})
	}
	return out
}
