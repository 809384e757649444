package dashboard

import (
	"fmt"
	"math"
	"sort"
	"strings"

	"github.com/lkscore/lkscore/scoring"
	"github.com/lkscore/lkscore/session"
)

// Chart geometry, in SVG user units.
const (
	chartW, chartH = 640.0, 180.0
	padL, padB     = 40.0, 24.0
)

// Bar is one bar of a bar chart.
type Bar struct {
	Label          string
	Value          float64
	X, Y, W, H     float64
	LabelX, LabelY float64
	Class          string
	Link           string
}

// BarChart is a simple SVG bar chart.
type BarChart struct {
	W, H float64
	Bars []Bar
	Max  float64
}

func barChart(labels []string, values []float64, classes []string, links []string) BarChart {
	c := BarChart{W: chartW, H: chartH}
	for _, v := range values {
		c.Max = math.Max(c.Max, v)
	}
	if len(values) == 0 {
		return c
	}
	slot := (chartW - padL) / float64(len(values))
	for i, v := range values {
		h := 0.0
		if c.Max > 0 {
			h = v / c.Max * (chartH - padB - 10)
		}
		b := Bar{Label: labels[i], Value: v, X: padL + float64(i)*slot + slot*0.1, W: slot * 0.8, H: h, Y: chartH - padB - h,
			LabelX: padL + float64(i)*slot + slot/2, LabelY: chartH - 8}
		if classes != nil {
			b.Class = classes[i]
		}
		if links != nil {
			b.Link = links[i]
		}
		c.Bars = append(c.Bars, b)
	}
	return c
}

func verdictMix(entries []Entry) BarChart {
	order := []string{session.Pass, session.Warn, session.Fail, session.Unscored}
	counts := map[string]float64{}
	for _, e := range entries {
		counts[e.Verdict]++
	}
	vals := make([]float64, len(order))
	links := make([]string, len(order))
	for i, v := range order {
		vals[i], links[i] = counts[v], "/ui/sessions?verdict="+v
	}
	return barChart(order, vals, order, links)
}

func reasonMix(entries []Entry) BarChart {
	counts := map[string]float64{}
	for _, e := range entries {
		counts[e.CloseReason]++
	}
	var labels []string
	for r := range counts {
		labels = append(labels, r)
	}
	sort.Strings(labels)
	vals := make([]float64, len(labels))
	links := make([]string, len(labels))
	short := make([]string, len(labels))
	for i, r := range labels {
		vals[i], links[i] = counts[r], "/ui/sessions?close_reason="+r
		short[i] = strings.TrimPrefix(r, "CR_")
	}
	return barChart(short, vals, nil, links)
}

// Line is one series of a line chart.
type Line struct {
	Name   string
	Class  string
	Points string // SVG polyline points
	Last   float64
}

// Span is one interval on the timeline.
type Span struct {
	ID         string // tl-<item index> (the chat timeline), heard-<turn> (heard turns)
	Lane       int    // 0 user, 1 agent, 2 tools
	X, W, Y, H float64
	Class      string
	Title      string
}

// Timeline is a session's turns drawn on three lanes.
type Timeline struct {
	W, H     float64
	Spans    []Span
	Lanes    []Bar
	Duration float64 // seconds
	Ticks    []Bar
}

const laneH, laneGap, tlLeft = 22.0, 10.0, 60.0

// timeline draws user and agent speech (interruptions marked) and tool
// calls (errors marked, with their durations) against time.
func timeline(items []scoring.Item) Timeline {
	t := Timeline{W: chartW + 200, H: 3*(laneH+laneGap) + 30}
	for i, name := range []string{"user", "agent", "tools"} {
		t.Lanes = append(t.Lanes, Bar{Label: name, LabelX: 4, LabelY: float64(i)*(laneH+laneGap) + laneH*0.7})
	}
	ivs := intervals(items)
	if len(ivs) == 0 {
		return t
	}
	t0, t1 := math.Inf(1), math.Inf(-1)
	for _, v := range ivs {
		t0, t1 = math.Min(t0, v.start), math.Max(t1, v.end)
	}
	t.Duration = t1 - t0
	scale := (t.W - tlLeft - 10) / math.Max(t.Duration, 1)
	for _, v := range ivs {
		t.Spans = append(t.Spans, Span{ID: fmt.Sprintf("tl-%d", v.item), Lane: v.lane, X: tlLeft + (v.start-t0)*scale,
			W: math.Max((v.end-v.start)*scale, 2),
			Y: float64(v.lane) * (laneH + laneGap), H: laneH, Class: v.class, Title: v.title})
	}
	stepS := niceStep(t.Duration)
	for s := 0.0; s <= t.Duration; s += stepS {
		t.Ticks = append(t.Ticks, Bar{Label: fmt.Sprintf("%.0fs", s), LabelX: tlLeft + s*scale, LabelY: t.H - 6})
	}
	return t
}

// interval is one bar of the timeline: an item on its lane (0 user, 1
// agent, 2 tools), in seconds.
type interval struct {
	item       int
	lane       int
	start, end float64
	class      string
	title      string
}

// intervals are the timeline's bars: what the user and the agent said, and
// each tool call from its call to its output.
func intervals(items []scoring.Item) []interval {
	var ivs []interval
	calls := map[string]scoring.Item{}
	for n, it := range items {
		switch it.Type {
		case scoring.TypeMessage:
			if v, ok := speech(n, it); ok {
				ivs = append(ivs, v)
			}
		case scoring.TypeFunctionCall:
			calls[it.CallID] = it
		case scoring.TypeFunctionCallOutput:
			call, ok := calls[it.CallID]
			start := it.CreatedAt
			if ok && call.CreatedAt > 0 {
				start = call.CreatedAt
			}
			class, title := "tool", fmt.Sprintf("%s: %.0f ms", it.Name, (it.CreatedAt-start)*1000)
			if it.IsError {
				class += " error"
				title += " (error)"
			}
			if start > 0 {
				ivs = append(ivs, interval{n, 2, start, math.Max(it.CreatedAt, start+0.2), class, title})
			}
		}
	}
	return ivs
}

// speech is a user's or the agent's message n as a bar.
func speech(n int, it scoring.Item) (interval, bool) {
	lane := -1
	switch it.Role {
	case scoring.RoleUser:
		lane = 0
	case scoring.RoleAssistant:
		lane = 1
	}
	if lane < 0 {
		return interval{}, false
	}
	start, end := it.CreatedAt, it.CreatedAt+0.5
	if it.StartedSpeakingAt != nil {
		start = *it.StartedSpeakingAt
	}
	if it.StoppedSpeakingAt != nil && *it.StoppedSpeakingAt > start {
		end = *it.StoppedSpeakingAt
	}
	class := []string{"user", "agent"}[lane]
	title := it.Text
	if it.Interrupted {
		class += " interrupted"
		title = "(interrupted) " + title
	}
	return interval{n, lane, start, end, class, truncate(title, 160)}, start > 0
}

func niceStep(d float64) float64 {
	for _, s := range []float64{1, 2, 5, 10, 15, 30, 60, 120, 300, 600} {
		if d/s <= 12 {
			return s
		}
	}
	return 1200
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && s[n]&0xC0 == 0x80 {
		n--
	}
	return s[:n] + "…"
}

// heardTimeline draws the speech heard on each channel of the recording
// (user and agent lanes) and marks talk-over, from the scorecard's audio
// block; empty without one.
func heardTimeline(au *session.Audio) Timeline {
	t := Timeline{W: chartW + 200, H: 2*(laneH+laneGap) + 30}
	if au == nil || au.Refused != "" || len(au.UserSegments)+len(au.AgentSegments) == 0 {
		return Timeline{}
	}
	for i, name := range []string{"user", "agent"} {
		t.Lanes = append(t.Lanes, Bar{Label: name, LabelX: 4, LabelY: float64(i)*(laneH+laneGap) + laneH*0.7})
	}
	var end int64 = 1
	for _, segs := range [][]session.AudioSegment{au.UserSegments, au.AgentSegments} {
		for _, s := range segs {
			end = max(end, s.EndMs)
		}
	}
	t.Duration = float64(end) / 1000
	scale := (t.W - tlLeft - 10) / math.Max(t.Duration, 1)
	for lane, segs := range [][]session.AudioSegment{au.UserSegments, au.AgentSegments} {
		for _, s := range segs {
			t.Spans = append(t.Spans, Span{Lane: lane, X: tlLeft + float64(s.StartMs)/1000*scale,
				W: math.Max(float64(s.EndMs-s.StartMs)/1000*scale, 2),
				Y: float64(lane) * (laneH + laneGap), H: laneH, Class: []string{"user", "agent"}[lane] + " heard",
				Title: fmt.Sprintf("heard %s speech %d–%d ms", []string{"user", "agent"}[lane], s.StartMs, s.EndMs)})
		}
	}
	for i, tr := range au.Turns {
		// Each heard turn's answer, as a target for its findings.
		t.Spans = append(t.Spans, Span{ID: fmt.Sprintf("heard-%d", i), Lane: 1, X: tlLeft + float64(tr.AgentStartMs)/1000*scale, W: 2,
			Y: laneH + laneGap, H: laneH, Class: "turn-mark", Title: fmt.Sprintf("heard turn %d: latency %d ms", i, tr.HeardLatencyMs)})
		if tr.HeardLatencyMs < 0 {
			t.Spans = append(t.Spans, Span{Lane: 1, X: tlLeft + float64(tr.AgentStartMs)/1000*scale,
				W: math.Max(float64(-tr.HeardLatencyMs)/1000*scale, 2),
				Y: laneH + laneGap, H: laneH, Class: "agent interrupted", Title: fmt.Sprintf("talk-over: %d ms", -tr.HeardLatencyMs)})
		}
	}
	stepS := niceStep(t.Duration)
	for s := 0.0; s <= t.Duration; s += stepS {
		t.Ticks = append(t.Ticks, Bar{Label: fmt.Sprintf("%.0fs", s), LabelX: tlLeft + s*scale, LabelY: t.H - 6})
	}
	return t
}
