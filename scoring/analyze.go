package scoring

import (
	"math"
	"sort"
	"strings"
)

// analysis holds what several rules and the metrics share, computed once.
type analysis struct {
	s        Session
	users    []int  // indices of user messages
	agents   []int  // indices of assistant messages
	answered []bool // by item index: a user message some assistant message follows
	// prevUser[i] is the user message an assistant message i answers, or -1.
	prevUser []int
	duration float64 // seconds spanned by the items' timestamps

	// Latency series, computed once for the rules and the metrics.
	e2e, ttft, ttfb, stt, eot dist

	// Tool calls by call_id: the index of the first call and of the first output.
	firstCall, firstOutput map[string]int
}

func analyze(s Session) *analysis {
	n := len(s.Items)
	a := &analysis{s: s, answered: make([]bool, n), prevUser: make([]int, n),
		users: make([]int, 0, n/2+1), agents: make([]int, 0, n/2+1),
		firstCall: make(map[string]int, 8), firstOutput: make(map[string]int, 8)}
	lastUser := -1
	first, last := math.Inf(1), math.Inf(-1)
	for i := range s.Items {
		it := &s.Items[i]
		for _, t := range [3]float64{it.CreatedAt, deref(it.StartedSpeakingAt), deref(it.StoppedSpeakingAt)} {
			if t > 0 && t < first { // not math.Min: NaN handling costs here, and NaN > 0 is false
				first = t
			}
			if t > last {
				last = t
			}
		}
		switch it.Type {
		case TypeFunctionCall:
			if _, ok := a.firstCall[it.CallID]; !ok {
				a.firstCall[it.CallID] = i
			}
			continue
		case TypeFunctionCallOutput:
			if _, ok := a.firstOutput[it.CallID]; !ok {
				a.firstOutput[it.CallID] = i
			}
			continue
		case TypeMessage:
		default:
			continue
		}
		switch it.Role {
		case RoleUser:
			a.users = append(a.users, i)
			lastUser = i
		case RoleAssistant:
			a.agents = append(a.agents, i)
			a.prevUser[i] = lastUser
			if lastUser >= 0 {
				a.answered[lastUser] = true
			}
			lastUser = -1 // a later assistant message answers nothing new
		}
	}
	if last > first && !math.IsInf(first, 0) {
		a.duration = last - first
	}
	a.e2e = a.series(a.agents, func(it *Item) *float64 { return it.E2ELatency })
	a.ttft = a.series(a.agents, func(it *Item) *float64 { return it.LLMNodeTTFT })
	a.ttfb = a.series(a.agents, func(it *Item) *float64 { return it.TTSNodeTTFB })
	a.stt = a.series(a.users, func(it *Item) *float64 { return it.TranscriptionDelay })
	a.eot = a.series(a.users, func(it *Item) *float64 { return it.EndOfTurnDelay })
	return a
}

func deref(p *float64) float64 {
	if p == nil {
		return 0
	}
	return *p
}

// budget spreads a rule's deductions over its findings: each costs per
// point until the rule's cap is used up; later findings cost nothing but are
// still reported.
type budget struct{ per, cap, used float64 }

func (b *budget) take() float64 {
	d := math.Min(b.per, b.cap-b.used)
	if d < 0 {
		d = 0
	}
	b.used += d
	return d
}

// ms converts seconds to milliseconds.
func ms(sec float64) float64 { return sec * 1000 }

// percentile is the nearest-rank percentile of sorted values (p in 0..100).
func percentile(sorted []float64, p float64) float64 {
	if len(sorted) == 0 {
		return 0
	}
	rank := int(math.Ceil(p / 100 * float64(len(sorted))))
	if rank < 1 {
		rank = 1
	}
	return sorted[rank-1]
}

// dist summarizes one latency series (milliseconds).
type dist struct {
	vals    []float64 // sorted
	missing int
}

func (d dist) stat(p float64) *float64 {
	if len(d.vals) == 0 {
		return nil
	}
	return ptr(round(percentile(d.vals, p)))
}

func (d dist) mean() *float64 {
	if len(d.vals) == 0 {
		return nil
	}
	var sum float64
	for _, v := range d.vals {
		sum += v
	}
	return ptr(round(sum / float64(len(d.vals))))
}

func (d dist) over(threshold float64) int {
	return len(d.vals) - sort.SearchFloat64s(d.vals, math.Nextafter(threshold, math.Inf(1)))
}

// series collects one metric (seconds, converted to ms) over some messages;
// absent values count as missing, never as zero. Negative or non-finite
// values are ignored as corrupt.
func (a *analysis) series(idx []int, get func(*Item) *float64) dist {
	d := dist{vals: make([]float64, 0, len(idx))}
	for _, i := range idx {
		v := get(&a.s.Items[i])
		if v == nil || math.IsNaN(*v) || math.IsInf(*v, 0) || *v < 0 {
			d.missing++
			continue
		}
		d.vals = append(d.vals, ms(*v))
	}
	sort.Float64s(d.vals)
	return d
}

func blank(s string) bool { return strings.TrimSpace(s) == "" }
