package recording

import (
	"encoding/json"
	"fmt"
	"math"

	"github.com/lkscore/lkscore/scoring"
)

//go:generate go run ../tools/genchatkeys

// rawItem is one chat item as either SDK writes it: snake_case (Python,
// agents-js since #1804) and camelCase (older agents-js) side by side.
// encoding/json matches keys case-insensitively, so "call_id" and "callId"
// need separate fields, while "id" or "name" need one. Numbers are float64
// holding NaN when absent (newRawItem): JSON cannot carry NaN, and a
// pointer per number cost an allocation each.
//
// The json tags of rawItem and rawMetrics are the one spelling of each key:
// the streaming path decodes with them, and tools/genchatkeys writes the
// scanner's switches and key sets from them (chat_keys_gen.go). A scan tag
// picks a special reader in the scanner.
type rawItem struct {
	ID        string          `json:"id"`
	Type      string          `json:"type" scan:"interned"`
	CreatedAt float64         `json:"created_at"`
	CreatedAC float64         `json:"createdAt"`
	Role      string          `json:"role" scan:"interned"`
	Content   json.RawMessage `json:"content" scan:"content"`

	Interrupted bool       `json:"interrupted"`
	TConf       float64    `json:"transcript_confidence"`
	TConfC      float64    `json:"transcriptConfidence"`
	Metrics     rawMetrics `json:"metrics"`

	CallID    string `json:"call_id"`
	CallIDC   string `json:"callId"`
	Name      string `json:"name"`
	Arguments string `json:"arguments"`
	Args      string `json:"args"`
	GroupID   string `json:"group_id"`
	GroupIDC  string `json:"groupId"`
	Output    string `json:"output"`
	IsError   bool   `json:"is_error"`
	IsErrorC  bool   `json:"isError"`

	OldAgentID  string `json:"old_agent_id"`
	OldAgentIDC string `json:"oldAgentId"`
	NewAgentID  string `json:"new_agent_id"`
	NewAgentIDC string `json:"newAgentId"`

	Instructions  json.RawMessage `json:"instructions"`
	ToolsAdded    []string        `json:"tools_added"`
	ToolsAddedC   []string        `json:"toolsAdded"`
	ToolsRemoved  []string        `json:"tools_removed"`
	ToolsRemovedC []string        `json:"toolsRemoved"`

	// contentList is Content already decoded (the scanner's fast path): a
	// string or a list of strings. contentSet says it replaces Content.
	contentList []string
	contentSet  bool
}

// rawMetrics' numbers tagged scan:"checked" are in no measure: the
// scanner checks them (a number within float64's range, as the stream's
// type check demands) without converting them, and normalize drops them.
type rawMetrics struct {
	StartedSpeakingAt         float64 `json:"started_speaking_at"`
	StartedSpeakingAtC        float64 `json:"startedSpeakingAt"`
	StoppedSpeakingAt         float64 `json:"stopped_speaking_at"`
	StoppedSpeakingAtC        float64 `json:"stoppedSpeakingAt"`
	TranscriptionDelay        float64 `json:"transcription_delay"`
	TranscriptionDelayC       float64 `json:"transcriptionDelay"`
	EndOfTurnDelay            float64 `json:"end_of_turn_delay"`
	EndOfTurnDelayC           float64 `json:"endOfTurnDelay"`
	OnUserTurnCompletedDelay  float64 `json:"on_user_turn_completed_delay" scan:"checked"`
	OnUserTurnCompletedDelayC float64 `json:"onUserTurnCompletedDelay" scan:"checked"`
	LLMNodeTTFT               float64 `json:"llm_node_ttft"`
	LLMNodeTTFTC              float64 `json:"llmNodeTtft"`
	LLMNodeTPS                float64 `json:"llm_node_tps" scan:"checked"`
	LLMNodeTTFS               float64 `json:"llm_node_ttfs" scan:"checked"`
	TTSNodeTTFB               float64 `json:"tts_node_ttfb"`
	TTSNodeTTFBC              float64 `json:"ttsNodeTtfb"`
	PlaybackLatency           float64 `json:"playback_latency" scan:"checked"`
	PlaybackLatencyC          float64 `json:"playbackLatency" scan:"checked"`
	E2ELatency                float64 `json:"e2e_latency"`
	E2ELatencyC               float64 `json:"e2eLatency"`
}

// newRawItem returns an item with every number absent.
func newRawItem() rawItem {
	n := math.NaN()
	return rawItem{CreatedAt: n, CreatedAC: n, TConf: n, TConfC: n, Metrics: rawMetrics{
		StartedSpeakingAt: n, StartedSpeakingAtC: n, StoppedSpeakingAt: n, StoppedSpeakingAtC: n,
		TranscriptionDelay: n, TranscriptionDelayC: n, EndOfTurnDelay: n, EndOfTurnDelayC: n,
		OnUserTurnCompletedDelay: n, OnUserTurnCompletedDelayC: n, LLMNodeTTFT: n, LLMNodeTTFTC: n,
		LLMNodeTPS: n, LLMNodeTTFS: n, TTSNodeTTFB: n, TTSNodeTTFBC: n, PlaybackLatency: n, PlaybackLatencyC: n,
		E2ELatency: n, E2ELatencyC: n,
	}}
}

// pickNum returns the snake_case number if present, else the camelCase one;
// NaN when neither is.
func pickNum(snake, camel float64) float64 {
	if !math.IsNaN(snake) {
		return snake
	}
	return camel
}

func pick[T comparable](snake, camel T) T {
	var zero T
	if snake != zero {
		return snake
	}
	return camel
}

func pickList(snake, camel []string) []string {
	if snake != nil {
		return snake
	}
	return camel
}

// metricsBox is one message's Metrics with the values its pointers refer
// to, and its transcript confidence.
type metricsBox struct {
	m       Metrics
	vals    [7]float64
	conf    float64
	confSet bool
}

// float returns a pointer to v, kept in the slab (the message's box when it
// has metrics).
func (s *metricsSlab) float(v float64) *float64 {
	b := s.last()
	if b == nil || b.confSet {
		b = s.next()
	}
	b.conf, b.confSet = v, true
	return &b.conf
}

func (s *metricsSlab) last() *metricsBox {
	if len(s.cur) == 0 {
		return nil
	}
	return &s.cur[len(s.cur)-1]
}

// metricsSlab hands out metricsBoxes from chunks: one allocation per 64
// messages instead of one each, none when the pool has chunks left from
// the history before (ChatDecoder).
type metricsSlab struct {
	cur  []metricsBox
	pool *chunks[metricsBox] // nil: new chunks
}

func (s *metricsSlab) next() *metricsBox {
	if len(s.cur) == cap(s.cur) {
		if s.pool == nil {
			s.pool = new(chunks[metricsBox])
		}
		s.cur = s.pool.next(64)
	}
	s.cur = s.cur[:len(s.cur)+1]
	return &s.cur[len(s.cur)-1]
}

func (m *rawMetrics) normalize(slab *metricsSlab) *Metrics {
	vals := [...]float64{
		pickNum(m.StartedSpeakingAt, m.StartedSpeakingAtC),
		pickNum(m.StoppedSpeakingAt, m.StoppedSpeakingAtC),
		pickNum(m.TranscriptionDelay, m.TranscriptionDelayC),
		pickNum(m.EndOfTurnDelay, m.EndOfTurnDelayC),
		pickNum(m.LLMNodeTTFT, m.LLMNodeTTFTC),
		pickNum(m.TTSNodeTTFB, m.TTSNodeTTFBC),
		pickNum(m.E2ELatency, m.E2ELatencyC),
	}
	present := false
	for _, v := range vals {
		present = present || !math.IsNaN(v)
	}
	if !present {
		return nil
	}
	// The speaking timestamps are Unix seconds in both SDKs; normalize anyway
	// so a millisecond value cannot skew every gap computed from them.
	for i := 0; i < 2; i++ {
		if !math.IsNaN(vals[i]) {
			vals[i] = UnixSeconds(vals[i])
		}
	}
	out := slab.next()
	out.vals = vals
	ptr := func(i int) *float64 {
		if math.IsNaN(out.vals[i]) {
			return nil
		}
		return &out.vals[i]
	}
	out.m = Metrics{
		StartedSpeakingAt: ptr(0), StoppedSpeakingAt: ptr(1), TranscriptionDelay: ptr(2), EndOfTurnDelay: ptr(3),
		LLMNodeTTFT: ptr(4), TTSNodeTTFB: ptr(5), E2ELatency: ptr(6),
	}
	return &out.m
}

// add normalizes raw into an Item and appends it.
func (p *chatParser) add(i int, raw *rawItem) {
	it := Item{Index: i, ID: raw.ID, Type: raw.Type, Role: raw.Role, Interrupted: raw.Interrupted}
	p.noteStyle(raw)
	if v := pickNum(raw.CreatedAt, raw.CreatedAC); !math.IsNaN(v) {
		switch {
		case math.IsInf(v, 0) || v < 0:
			p.problem(i, "created_at_invalid", fmt.Sprintf("created_at %v is not a timestamp", v))
		case v >= 1e11:
			p.millis = true
			it.CreatedAt = UnixSeconds(v)
		default:
			p.seconds = true
			it.CreatedAt = v
		}
	}
	switch raw.Type {
	case scoring.TypeMessage:
		content, ok := raw.contentList, true
		if !raw.contentSet {
			content, ok = contentStrings(raw.Content, p.unmarshal)
		}
		if !ok {
			p.problem(i, "content_invalid", "message content is neither a string nor a list")
		}
		it.Content = content
		it.Metrics = raw.Metrics.normalize(&p.metrics)
		if c := pickNum(raw.TConf, raw.TConfC); !math.IsNaN(c) {
			it.TranscriptConfidence = p.metrics.float(c)
		}
	case scoring.TypeFunctionCall:
		it.CallID, it.Name = pick(raw.CallID, raw.CallIDC), raw.Name
		it.Arguments, it.GroupID = pick(raw.Arguments, raw.Args), pick(raw.GroupID, raw.GroupIDC)
	case scoring.TypeFunctionCallOutput:
		it.CallID, it.Name, it.Output = pick(raw.CallID, raw.CallIDC), raw.Name, raw.Output
		it.IsError = raw.IsError || raw.IsErrorC
	case scoring.TypeAgentHandoff:
		it.OldAgentID, it.NewAgentID = pick(raw.OldAgentID, raw.OldAgentIDC), pick(raw.NewAgentID, raw.NewAgentIDC)
	case scoring.TypeAgentConfigUpdate:
		it.Instructions = instructionsText(raw.Instructions, p.unmarshal)
		it.ToolsAdded, it.ToolsRemoved = pickList(raw.ToolsAdded, raw.ToolsAddedC), pickList(raw.ToolsRemoved, raw.ToolsRemovedC)
	default:
		// Newer SDKs add item types: keep the item, report it.
		it.RawType, it.Type = raw.Type, TypeUnknown
		p.problem(i, "unknown_item_type", fmt.Sprintf("item type %q is not known", truncate(raw.Type, 40)))
	}
	p.h.Counts[it.Type]++
	p.h.Items = append(p.h.Items, it)
}

func (p *chatParser) noteStyle(r *rawItem) {
	if !math.IsNaN(r.CreatedAt) || r.CallID != "" || r.NewAgentID != "" || !math.IsNaN(r.TConf) {
		p.snake = true
	}
	if !math.IsNaN(r.CreatedAC) || r.CallIDC != "" || r.IsErrorC || r.NewAgentIDC != "" || !math.IsNaN(r.TConfC) {
		p.camel = true
	}
}
