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

	// Tool calls by call_id: the index of the first call and of the first
	// output (-1 when there is none).
	tools map[string]callIdx

	scratch *scratch
}

type callIdx struct{ call, output int32 }

// scratch holds analyze's working memory, reused across sessions by a
// Scorer (sync.Pool): at a few hundred items, allocating and collecting it
// anew costs more than the analysis itself. Everything is reset before use.
type scratch struct {
	ints     []int
	answered []bool
	buf      []float64
	set      []uint64
	tools    map[string]callIdx
}

func newScratch() *scratch { return &scratch{tools: make(map[string]callIdx)} }

// grow returns b resized to n, reusing its memory when it can, zeroed.
func grow[T any](b []T, n int) []T {
	if cap(b) < n {
		return make([]T, n)
	}
	b = b[:n]
	clear(b)
	return b
}

func analyze(s Session, sc *scratch) *analysis {
	n := len(s.Items)
	// One backing array for the three index slices.
	sc.ints, sc.answered = grow(sc.ints, 3*n), grow(sc.answered, n)
	clear(sc.tools)
	ints := sc.ints
	a := &analysis{s: s, answered: sc.answered, prevUser: ints[:n:n],
		users: ints[n : n : 2*n], agents: ints[2*n : 2*n : 3*n], tools: sc.tools, scratch: sc}
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
		case TypeFunctionCall, TypeFunctionCallOutput:
			c, ok := a.tools[it.CallID]
			if !ok {
				c = callIdx{-1, -1}
			}
			if it.Type == TypeFunctionCall && c.call < 0 {
				c.call = int32(i)
			} else if it.Type == TypeFunctionCallOutput && c.output < 0 {
				c.output = int32(i)
			}
			a.tools[it.CallID] = c
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
	sc.buf = grow(sc.buf, 3*len(a.agents)+2*len(a.users))
	buf := sc.buf[:0]
	a.e2e, buf = a.series(buf, a.agents, func(it *Item) *float64 { return it.E2ELatency })
	a.ttft, buf = a.series(buf, a.agents, func(it *Item) *float64 { return it.LLMNodeTTFT })
	a.ttfb, buf = a.series(buf, a.agents, func(it *Item) *float64 { return it.TTSNodeTTFB })
	a.stt, buf = a.series(buf, a.users, func(it *Item) *float64 { return it.TranscriptionDelay })
	a.eot, _ = a.series(buf, a.users, func(it *Item) *float64 { return it.EndOfTurnDelay })
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

func (d dist) stat(p float64) Opt[float64] {
	if len(d.vals) == 0 {
		return Opt[float64]{}
	}
	return some(round(percentile(d.vals, p)))
}

func (d dist) mean() Opt[float64] {
	if len(d.vals) == 0 {
		return Opt[float64]{}
	}
	var sum float64
	for _, v := range d.vals {
		sum += v
	}
	return some(round(sum / float64(len(d.vals))))
}

func (d dist) over(threshold float64) int {
	return len(d.vals) - sort.SearchFloat64s(d.vals, math.Nextafter(threshold, math.Inf(1)))
}

// series collects one metric (seconds, converted to ms) over some messages;
// absent values count as missing, never as zero. Negative or non-finite
// values are ignored as corrupt.
// The values are appended to buf; the rest of buf is returned for the next series.
func (a *analysis) series(buf []float64, idx []int, get func(*Item) *float64) (dist, []float64) {
	start := len(buf)
	var d dist
	for _, i := range idx {
		v := get(&a.s.Items[i])
		if v == nil || math.IsNaN(*v) || math.IsInf(*v, 0) || *v < 0 {
			d.missing++
			continue
		}
		buf = append(buf, ms(*v))
	}
	d.vals = buf[start:len(buf):len(buf)]
	sort.Float64s(d.vals)
	return d, buf
}

// blank reports an empty or whitespace-only text; most texts are decided by
// their first byte.
func blank(s string) bool {
	if len(s) > 0 && s[0] > ' ' && s[0] < 0x80 {
		return false
	}
	return strings.TrimSpace(s) == ""
}
