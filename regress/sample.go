// Package regress detects regressions in scored sessions: a new agent
// version against its baseline, drift within a version, and spikes of
// failing sessions. It is pure like scoring (no I/O, no clock): the daemon
// keeps its state on NATS, `lkscore check` in a file. docs/regression.md has
// the maths.
package regress

import (
	"bytes"
	"encoding/json"
	"math"
	"slices"
	"strconv"

	"github.com/lkscore/lkscore/session"
)

// Sample is what detection keeps of one scored session.
type Sample struct {
	// Seq orders samples: the results stream's sequence in the daemon, the
	// input order offline. Merging and capping history go by it, so the
	// history does not depend on the order samples arrive in.
	Seq     uint64 `json:"seq"`
	Session string `json:"session"`
	// Values holds the continuous metrics in the order of continuousMetrics;
	// Missing (−1) marks one the session did not measure (no latency
	// figures, no confidence). Every metric is ≥ 0 otherwise.
	Values SampleValues `json:"values"`
	// Counts for the rate metrics.
	ToolCalls     int  `json:"tool_calls,omitempty"`
	ToolErrors    int  `json:"tool_errors,omitempty"`
	AgentTurns    int  `json:"agent_turns,omitempty"`
	Interruptions int  `json:"interruptions,omitempty"`
	CRError       bool `json:"cr_error,omitempty"`
	Failed        bool `json:"failed,omitempty"`
	// Codes are the finding codes that cost this session points.
	Codes []string `json:"codes,omitempty"`
}

// Key says which history a scorecard belongs to. Scores of different
// scoring versions are never compared.
type Key struct {
	Agent          string `json:"agent"`
	Version        string `json:"version"`
	ScoringVersion string `json:"scoring_version"`
}

// MetadataOnlySuffix marks the scoring version of a key whose scorecards
// were scored without a recording.
const MetadataOnlySuffix = "+metadata_only"

// Unknown is the version (or agent) of a session that names none.
const Unknown = "unknown"

// MetadataVersionTag prefixes the tag the daemon makes of the version it
// read from the job's or room's metadata (regression.version_metadata_key).
const MetadataVersionTag = session.MetadataVersionTag

// KeyOf derives a scorecard's key: the agent name from the session facts;
// the version by the one version rule (session.Version, tagPrefix is
// regression.version_tag), else Unknown.
func KeyOf(card *session.Scorecard, tagPrefix string) Key {
	k := Key{Agent: card.Session.AgentName, Version: Unknown, ScoringVersion: card.ScoringVersion}
	if !slices.Contains(card.Inputs, session.InputRecording) && len(card.Inputs) > 0 {
		// Like with like: a metadata-only scorecard (spans and logs, no
		// recording) measures fewer components; its history is its own.
		k.ScoringVersion += MetadataOnlySuffix
	}
	if k.Agent == "" {
		k.Agent = Unknown
	}
	if v := session.Version(card.Session.Tags, card.Session.DeploymentID, tagPrefix); v != "" {
		k.Version = v
	}
	return k
}

// SampleOf extracts a scorecard's sample.
func SampleOf(card *session.Scorecard, seq uint64) Sample {
	s := Sample{Seq: seq, Session: card.Session.Key}
	for i := range s.Values {
		s.Values[i] = Missing
	}
	if card.Comparable() {
		s.set(MetricOverall, card.Overall.Score)
	}
	for _, c := range card.Components {
		if c.Verdict != session.NotMeasured { // nothing measured: no value, not 0
			s.set(c.Name, c.Score)
		}
		for _, f := range c.Findings {
			if f.Deduction > 0 {
				s.Codes = append(s.Codes, f.Code)
			}
		}
	}
	m := card.Metrics
	if m.E2ELatencyP50Ms.Set {
		s.set(MetricE2EP50, m.E2ELatencyP50Ms.V)
	}
	if m.E2ELatencyP95Ms.Set {
		s.set(MetricE2EP95, m.E2ELatencyP95Ms.V)
	}
	if m.TranscriptConfidenceMean.Set {
		s.set(MetricConfidence, m.TranscriptConfidenceMean.V)
	}
	if u := card.Usage; u != nil && u.Reported && m.UserTurns > 0 { // not reported: no value, not 0
		s.set(MetricInputTokens, float64(u.InputTokens.V)/float64(m.UserTurns))
		s.set(MetricOutputTokens, float64(u.OutputTokens.V)/float64(m.UserTurns))
	}
	s.ToolCalls, s.ToolErrors = m.ToolCalls, m.ToolErrors
	s.AgentTurns, s.Interruptions = m.AgentTurns, m.Interruptions
	s.CRError = card.Completion.CloseReason == "CR_ERROR"
	s.Failed = card.Overall.Verdict == "fail"
	return s
}

// Missing marks a continuous metric a session did not measure.
const Missing = -1.0

// storedValues is how many values a sample stored before the token metrics
// holds: a sample whose later values are all Missing is written with these
// alone, so a baseline sealed before them keeps its bytes, and its id.
const storedValues = 8

// SampleValues are a sample's continuous metrics in the order of
// continuousMetrics. In JSON they are the values up to the last measured
// one past the first storedValues (a sample stored before the token
// metrics keeps its bytes, and a sealed baseline its id); a shorter array,
// as stored before them, reads back with the values it lacks Missing.
// Only the array has its own encoding: a whole Sample with a MarshalJSON of
// its own went through reflection per sample, a tenth of the worker's CPU.
type SampleValues [nContinuous]float64

// MarshalJSON writes the values in encoding/json's number format.
func (v SampleValues) MarshalJSON() ([]byte, error) {
	n := nContinuous
	for n > storedValues && v[n-1] == Missing {
		n--
	}
	b := make([]byte, 0, 16*n)
	b = append(b, '[')
	for i, f := range v[:n] {
		if i > 0 {
			b = append(b, ',')
		}
		var err error
		if b, err = session.AppendFloat(b, f); err != nil {
			return nil, err
		}
	}
	return append(b, ']'), nil
}

// UnmarshalJSON reads an array of up to nContinuous numbers; the values
// it lacks are Missing (not measured), never 0.
func (v *SampleValues) UnmarshalJSON(b []byte) error {
	var buf [nContinuous]float64
	vals, ok := parseNumbers(b, buf[:0])
	if !ok { // not the plain array MarshalJSON writes: encoding/json's rules
		vals = nil
		if err := json.Unmarshal(b, &vals); err != nil {
			return err
		}
	}
	for i := range v {
		v[i] = Missing
		if i < len(vals) {
			v[i] = vals[i]
		}
	}
	return nil
}

// parseNumbers reads a JSON array of at most cap(dst) numbers without
// spaces, as SampleValues.MarshalJSON writes it, into dst; false for
// anything else.
func parseNumbers(b []byte, dst []float64) ([]float64, bool) {
	if len(b) < 2 || b[0] != '[' || b[len(b)-1] != ']' {
		return nil, false
	}
	b = b[1 : len(b)-1]
	for len(b) > 0 {
		i := bytes.IndexByte(b, ',')
		if i < 0 {
			i = len(b)
		}
		if n, ok := session.ScanNumber(b[:i], 0); !ok || n != i { // ParseFloat also takes Inf, NaN, hex, "+1", "1_0"
			return nil, false
		}
		f, err := strconv.ParseFloat(string(b[:i]), 64)
		if err != nil || len(dst) == cap(dst) {
			return nil, false
		}
		dst = append(dst, f)
		if i == len(b) {
			break
		}
		if b = b[i+1:]; len(b) == 0 {
			return nil, false // a trailing comma
		}
	}
	return dst, true
}

// continuousMetrics are the metrics a Sample's Values hold, in order. The
// order is part of the stored history's format: add new metrics at the end.
var continuousMetrics = [...]string{MetricOverall, componentTurns, componentTranscr, componentTools, componentLatency,
	MetricE2EP50, MetricE2EP95, MetricConfidence, MetricInputTokens, MetricOutputTokens}

const nContinuous = len(continuousMetrics)

func continuousIndex(name string) int {
	for i, n := range continuousMetrics {
		if n == name {
			return i
		}
	}
	return -1
}

func (s *Sample) set(name string, v float64) {
	if i := continuousIndex(name); i >= 0 && v >= 0 && !math.IsNaN(v) {
		s.Values[i] = v
	}
}

// Value returns a continuous metric of the sample, and whether it was measured.
func (s *Sample) Value(name string) (float64, bool) {
	i := continuousIndex(name)
	if i < 0 || s.Values[i] < 0 {
		return 0, false
	}
	return s.Values[i], true
}

// Metric names, as alerts and reports name them.
const (
	MetricOverall    = "overall"
	MetricE2EP50     = "e2e_latency_p50_ms"
	MetricE2EP95     = "e2e_latency_p95_ms"
	MetricConfidence = "transcript_confidence"
	// MetricInputTokens and MetricOutputTokens are the LLM tokens a call
	// used per turn of the caller, as the SDK's usage report says
	// (session.Usage): a version whose turns cost more alerts like one
	// whose turns got slower. Per turn, not per call: a call's tokens grow
	// with its length, which tells nothing of the version (per call, two
	// populations of one version differed in 1 seed of 40).
	MetricInputTokens  = "llm_input_tokens_per_turn"
	MetricOutputTokens = "llm_output_tokens_per_turn"
	MetricToolErrors   = "tool_error_rate"
	MetricInterrupts   = "interruption_rate"
	MetricCRError      = "cr_error_share"
	MetricFailed       = "fail_share"
	componentTurns     = session.TurnHandling
	componentTranscr   = session.TranscriptIntegrity
	componentTools     = session.ToolReliability
	componentLatency   = session.ResponseLatency
	kindContinuous     = "continuous"
	kindRate           = "rate"
	higherIsWorse      = 1.0
	lowerIsWorse       = -1.0
	defaultMinScorePts = 5
)

// metricDef is one metric detection looks at.
type metricDef struct {
	name  string
	kind  string  // kindContinuous (Mann–Whitney U) or kindRate (two proportions)
	worse float64 // higherIsWorse or lowerIsWorse
	// minEffect is the smallest change, in the metric's unit and in the
	// worse direction, worth an alert (Config.MinEffect overrides it).
	minEffect float64
	// minRelative, when set, raises minEffect to that share of the
	// baseline's median: token counts differ by agent tenfold, so only a
	// share says "worth an alert" for every agent.
	minRelative float64
	// count gives a rate metric's numerator and denominator for a sample.
	count func(*Sample) (int, int)
}

func metricDefs() []metricDef {
	b := func(v bool) int {
		if v {
			return 1
		}
		return 0
	}
	return []metricDef{
		{name: MetricOverall, kind: kindContinuous, worse: lowerIsWorse, minEffect: defaultMinScorePts},
		{name: componentTurns, kind: kindContinuous, worse: lowerIsWorse, minEffect: defaultMinScorePts},
		{name: componentTranscr, kind: kindContinuous, worse: lowerIsWorse, minEffect: defaultMinScorePts},
		{name: componentTools, kind: kindContinuous, worse: lowerIsWorse, minEffect: defaultMinScorePts},
		{name: componentLatency, kind: kindContinuous, worse: lowerIsWorse, minEffect: defaultMinScorePts},
		{name: MetricE2EP50, kind: kindContinuous, worse: higherIsWorse, minEffect: 150},
		{name: MetricE2EP95, kind: kindContinuous, worse: higherIsWorse, minEffect: 300},
		{name: MetricConfidence, kind: kindContinuous, worse: lowerIsWorse, minEffect: 0.05},
		{name: MetricInputTokens, kind: kindContinuous, worse: higherIsWorse, minEffect: 2, minRelative: 0.1},
		{name: MetricOutputTokens, kind: kindContinuous, worse: higherIsWorse, minEffect: 2, minRelative: 0.1},
		{name: MetricToolErrors, kind: kindRate, worse: higherIsWorse, minEffect: 0.03,
			count: func(s *Sample) (int, int) { return s.ToolErrors, s.ToolCalls }},
		{name: MetricInterrupts, kind: kindRate, worse: higherIsWorse, minEffect: 0.05,
			count: func(s *Sample) (int, int) { return s.Interruptions, s.AgentTurns }},
		{name: MetricCRError, kind: kindRate, worse: higherIsWorse, minEffect: 0.05,
			count: func(s *Sample) (int, int) { return b(s.CRError), 1 }},
		{name: MetricFailed, kind: kindRate, worse: higherIsWorse, minEffect: 0.05,
			count: func(s *Sample) (int, int) { return b(s.Failed), 1 }},
	}
}

// MetricNames lists the metrics detection compares, in report order.
func MetricNames() []string {
	var out []string
	for _, d := range metricDefs() {
		out = append(out, d.name)
	}
	return out
}

func values(samples []Sample, name string) []float64 {
	out := make([]float64, 0, len(samples))
	i := continuousIndex(name)
	for j := range samples {
		if v := samples[j].Values[i]; v >= 0 {
			out = append(out, v)
		}
	}
	return out
}
