package dashboard

import (
	"fmt"
	"math"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/lkscore/lkscore/scoring"
	"github.com/lkscore/lkscore/session"
)

// bucketSizes are the trend buckets, smallest first: a chart uses the
// smallest that gives at most maxBuckets over the range shown.
var bucketSizes = []time.Duration{time.Second, 5 * time.Second, 15 * time.Second, time.Minute, 5 * time.Minute,
	15 * time.Minute, time.Hour, 3 * time.Hour, 6 * time.Hour, 24 * time.Hour}

const maxBuckets = 60

// bucketFor picks the bucket size for a range: minutes for the last hour,
// half hours for a day, and so on.
func bucketFor(span time.Duration) time.Duration {
	for _, b := range bucketSizes {
		if span/b <= maxBuckets {
			return b
		}
	}
	return bucketSizes[len(bucketSizes)-1]
}

// series is one line of a trend: a value per entry (Missing to skip it)
// and the quantile of the bucket's values it plots (0.5 the median).
type series struct {
	name  string
	value func(e *Entry) float64
	q     float64
}

// Trend is a line chart over time buckets.
type Trend struct {
	W, H   float64
	Bucket string // the bucket size, for the caption
	Lines  []Line
	Ticks  []Bar
	YTicks []Bar
	// Buckets is how many buckets have data.
	Buckets int
}

// trend plots each series per bucket of the range [from, to].
func trend(entries []Entry, from, to time.Time, ss []series, yMax float64, unit string) Trend {
	c := Trend{W: chartW, H: chartH}
	if len(entries) == 0 || !to.After(from) {
		to = from.Add(time.Second)
	}
	size := bucketFor(to.Sub(from))
	c.Bucket = shortDuration(size)
	first := from.Truncate(size)
	n := int(to.Sub(first)/size) + 1
	vals := make([][][]float64, len(ss)) // series, bucket, values
	for i := range ss {
		vals[i] = make([][]float64, n)
	}
	for k := range entries {
		e := &entries[k]
		b := int(e.At.Sub(first) / size)
		if b < 0 || b >= n {
			continue
		}
		for i, s := range ss {
			if v := s.value(e); v != Missing {
				vals[i][b] = append(vals[i][b], v)
			}
		}
	}
	if yMax <= 0 { // scale to the data
		for i := range ss {
			for _, b := range vals[i] {
				if len(b) > 0 {
					yMax = math.Max(yMax, quantile(b, ss[i].q))
				}
			}
		}
		yMax = niceCeil(yMax)
	}
	x := func(b int) float64 { return padL + (float64(b)+0.5)*(chartW-padL)/float64(n) }
	y := func(v float64) float64 { return chartH - padB - math.Min(v, yMax)/yMax*(chartH-padB-10) }
	used := map[int]bool{}
	for i, s := range ss {
		var pts []string
		last, lastB := Missing, 0
		for b := range n {
			if len(vals[i][b]) == 0 {
				continue
			}
			used[b] = true
			last, lastB = quantile(vals[i][b], s.q), b
			pts = append(pts, fmt.Sprintf("%.1f,%.1f", x(b), y(last)))
		}
		if len(pts) == 1 { // one bucket: a short level segment, so the line shows
			pts = []string{fmt.Sprintf("%.1f,%.1f %.1f,%.1f", x(lastB)-20, y(last), x(lastB)+20, y(last))}
		}
		c.Lines = append(c.Lines, Line{Name: s.name, Class: fmt.Sprintf("c%d", i%4), Points: strings.Join(pts, " "), Last: last})
	}
	c.Buckets = len(used)
	every := max(1, n/8)
	for b := 0; b < n; b += every {
		t := first.Add(time.Duration(b) * size).UTC()
		label := t.Format("15:04")
		if size < time.Minute {
			label = t.Format("15:04:05")
		} else if size >= 24*time.Hour {
			label = t.Format("01-02")
		}
		c.Ticks = append(c.Ticks, Bar{Label: label, LabelX: x(b), LabelY: chartH - 8})
	}
	for _, f := range []float64{0, 0.5, 1} {
		c.YTicks = append(c.YTicks, Bar{Label: fmt.Sprintf("%g%s", math.Round(yMax*f), unit), LabelX: 4, LabelY: y(yMax*f) + 4})
	}
	return c
}

func shortDuration(d time.Duration) string {
	switch {
	case d >= 24*time.Hour:
		return fmt.Sprintf("%dd", int(d/(24*time.Hour)))
	case d >= time.Hour:
		return fmt.Sprintf("%dh", int(d/time.Hour))
	case d >= time.Minute:
		return fmt.Sprintf("%dmin", int(d/time.Minute))
	}
	return fmt.Sprintf("%ds", int(d/time.Second))
}

func niceCeil(v float64) float64 {
	if v <= 0 {
		return 1
	}
	p := math.Pow(10, math.Floor(math.Log10(v)))
	for _, m := range []float64{1, 2, 2.5, 5, 10} {
		if m*p >= v {
			return m * p
		}
	}
	return 10 * p
}

// quantile is the nearest-rank quantile of vs (sorted in place).
func quantile(vs []float64, q float64) float64 {
	sort.Float64s(vs)
	i := int(math.Ceil(q*float64(len(vs)))) - 1
	return vs[max(0, min(i, len(vs)-1))]
}

// histogram counts the sessions' values in bins of width up to top; the
// last bin holds everything above.
func histogram(entries []Entry, value func(*Entry) float64, width, top float64, unit string, link func(lo float64) string) BarChart {
	n := int(top/width) + 1
	counts := make([]float64, n)
	labels := make([]string, n)
	links := make([]string, n)
	for i := range n {
		labels[i] = fmt.Sprintf("%g", float64(i)*width)
		if link != nil {
			links[i] = link(float64(i) * width)
		}
	}
	labels[n-1] = fmt.Sprintf("≥%g%s", top, unit)
	for k := range entries {
		v := value(&entries[k])
		if v == Missing {
			continue
		}
		counts[min(int(v/width), n-1)]++
	}
	return barChart(labels, counts, nil, links)
}

// CodeCount is a finding code and the sessions that have it.
type CodeCount struct {
	Code     string
	Sessions int
	Share    float64 // of the sessions shown
}

// topCodes lists the finding codes by how many sessions have them.
func topCodes(entries []Entry, n int) []CodeCount {
	counts := map[string]int{}
	for _, e := range entries {
		for _, c := range e.Codes {
			counts[c]++
		}
	}
	out := make([]CodeCount, 0, len(counts))
	for c, k := range counts {
		out = append(out, CodeCount{Code: c, Sessions: k, Share: float64(k) / float64(len(entries))})
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Sessions != out[j].Sessions {
			return out[i].Sessions > out[j].Sessions
		}
		return out[i].Code < out[j].Code
	})
	return out[:min(n, len(out))]
}

// VersionRow sums up one agent version.
type VersionRow struct {
	Agent, Version                     string
	Sessions                           int // scored: unscored ones are counted apart
	Unscored                           int
	ScoreP50, FailShare                float64
	E2EP50, E2EP95, HeardP50, HeardP95 float64 // Missing when none measured
	First, Last                        time.Time
}

// versions sums up every agent version among entries, latest first.
func versions(entries []Entry) []VersionRow {
	type acc struct {
		row                           VersionRow
		score, e2e, e2e95, heard, h95 []float64
		fails                         int
	}
	by := map[[2]string]*acc{}
	for _, e := range entries {
		k := [2]string{e.AgentName, e.Version}
		a := by[k]
		if a == nil {
			a = &acc{row: VersionRow{Agent: e.AgentName, Version: e.Version, First: e.At}}
			by[k] = a
		}
		a.row.Last = e.At
		if e.Verdict == session.Unscored {
			a.row.Unscored++ // not a pass, not a fail: out of the rates
			continue
		}
		a.row.Sessions++
		if e.Score != Missing {
			a.score = append(a.score, e.Score)
		}
		if e.Verdict == session.Fail {
			a.fails++
		}
		for _, p := range []struct {
			v  float64
			to *[]float64
		}{{e.E2EP50, &a.e2e}, {e.E2EP95, &a.e2e95}, {e.HeardP50, &a.heard}, {e.HeardP95, &a.h95}} {
			if p.v != Missing {
				*p.to = append(*p.to, p.v)
			}
		}
	}
	q := func(vs []float64, p float64) float64 {
		if len(vs) == 0 {
			return Missing
		}
		return quantile(vs, p)
	}
	out := make([]VersionRow, 0, len(by))
	for _, a := range by {
		r := a.row
		r.ScoreP50, r.FailShare = q(a.score, 0.5), float64(a.fails)/float64(max(r.Sessions, 1))
		r.E2EP50, r.E2EP95, r.HeardP50, r.HeardP95 = q(a.e2e, 0.5), q(a.e2e95, 0.95), q(a.heard, 0.5), q(a.h95, 0.95)
		out = append(out, r)
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Agent != out[j].Agent {
			return out[i].Agent < out[j].Agent
		}
		return out[i].Last.After(out[j].Last)
	})
	return out
}

// volume counts the sessions scored per bucket of [from, to], with the
// trend charts' bucket size.
func volume(entries []Entry, from, to time.Time) (BarChart, string) {
	if !to.After(from) {
		to = from.Add(time.Second)
	}
	size := bucketFor(to.Sub(from))
	first := from.Truncate(size)
	n := int(to.Sub(first)/size) + 1
	counts := make([]float64, n)
	labels := make([]string, n)
	every := max(1, n/8)
	for i := range n {
		if i%every == 0 {
			t := first.Add(time.Duration(i) * size).UTC()
			labels[i] = t.Format("15:04")
			if size < time.Minute {
				labels[i] = t.Format("15:04:05")
			}
		}
	}
	for _, e := range entries {
		if i := int(e.At.Sub(first) / size); i >= 0 && i < n {
			counts[i]++
		}
	}
	c := barChart(labels, counts, nil, nil)
	return c, shortDuration(size)
}

// ProjectRow is one LiveKit project's (API key's) sessions in view.
type ProjectRow struct {
	Project             string
	Sessions            int // scored; unscored ones are left out of the rates
	ScoreP50, FailShare float64
	Agents              []string
}

// projects sums up the sessions per project (API key), busiest first.
func projects(entries []Entry) []ProjectRow {
	type acc struct {
		row    ProjectRow
		scores []float64
		fails  int
		agents map[string]bool
	}
	by := map[string]*acc{}
	for _, e := range entries {
		a := by[e.Project]
		if a == nil {
			a = &acc{row: ProjectRow{Project: e.Project}, agents: map[string]bool{}}
			by[e.Project] = a
		}
		if e.AgentName != "" {
			a.agents[e.AgentName] = true
		}
		if e.Verdict == session.Unscored {
			continue
		}
		a.row.Sessions++
		if e.Score != Missing {
			a.scores = append(a.scores, e.Score)
		}
		if e.Verdict == session.Fail {
			a.fails++
		}
	}
	out := make([]ProjectRow, 0, len(by))
	for _, a := range by {
		r := a.row
		r.ScoreP50 = Missing
		if len(a.scores) > 0 {
			r.ScoreP50 = quantile(a.scores, 0.5)
		}
		if r.Sessions > 0 {
			r.FailShare = float64(a.fails) / float64(r.Sessions)
		}
		for ag := range a.agents {
			r.Agents = append(r.Agents, ag)
		}
		sort.Strings(r.Agents)
		out = append(out, r)
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Sessions != out[j].Sessions {
			return out[i].Sessions > out[j].Sessions
		}
		return out[i].Project < out[j].Project
	})
	return out
}

// RuleCount is one rule's violations among the sessions shown.
type RuleCount struct {
	Rule      string
	Violated  int
	Evaluated int
	Share     float64 // of the sessions it was evaluated on
}

// ruleCounts lists the rules evaluated on the sessions shown, the most
// violated first.
func ruleCounts(entries []Entry) []RuleCount {
	byRule := map[string]*RuleCount{}
	for _, e := range entries {
		for _, r := range e.Rules {
			c := byRule[r]
			if c == nil {
				c = &RuleCount{Rule: r}
				byRule[r] = c
			}
			c.Evaluated++
			if slices.Contains(e.Codes, scoring.RuleCodePrefix+r) {
				c.Violated++
			}
		}
	}
	out := make([]RuleCount, 0, len(byRule))
	for _, c := range byRule {
		c.Share = float64(c.Violated) / float64(c.Evaluated)
		out = append(out, *c)
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Violated != out[j].Violated {
			return out[i].Violated > out[j].Violated
		}
		return out[i].Rule < out[j].Rule
	})
	return out
}
