package recording

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sync"
)

// Chat history limits (docs/formats.md, "Chat history": 32 MiB).
const (
	DefaultMaxChatBytes = 32 << 20
	DefaultMaxChatItems = 100_000
)

// TypeUnknown is the type of a chat_history.json item neither SDK writes;
// the known types are scoring's (scoring.TypeMessage…).
const TypeUnknown = "unknown"

// ChatLimits bound ParseChatHistory.
type ChatLimits struct {
	MaxBytes int64 // default DefaultMaxChatBytes
	MaxItems int   // default DefaultMaxChatItems
}

// ChatHistory is a parsed chat_history.json.
type ChatHistory struct {
	Items []Item `json:"items"`
	// Counts holds the number of items by type (TypeUnknown included).
	Counts map[string]int `json:"counts"`
	// TimestampUnit is "s" (Python), "ms" (JS) or "" when no item had a timestamp.
	TimestampUnit string `json:"timestamp_unit,omitempty"`
	// KeyStyle is "snake", "camel" (older agents-js) or "mixed".
	KeyStyle string    `json:"key_style,omitempty"`
	Problems []Problem `json:"problems,omitempty"`
}

// Item is one chat item, normalized: snake_case and camelCase keys both
// read, created_at in Unix seconds whatever the SDK sent. Pointer fields are
// nil when absent, so a missing value is never mistaken for zero.
type Item struct {
	Index     int     `json:"index"`
	ID        string  `json:"id"`
	Type      string  `json:"type"`
	RawType   string  `json:"raw_type,omitempty"` // the type as sent, when unknown
	CreatedAt float64 `json:"created_at"`         // Unix seconds; 0 when absent

	// message
	Role                 string   `json:"role,omitempty"`
	Content              []string `json:"content,omitempty"`
	Interrupted          bool     `json:"interrupted,omitempty"`
	TranscriptConfidence *float64 `json:"transcript_confidence,omitempty"`
	Metrics              *Metrics `json:"metrics,omitempty"`

	// function_call and function_call_output
	CallID    string `json:"call_id,omitempty"`
	Name      string `json:"name,omitempty"`
	Arguments string `json:"arguments,omitempty"`
	GroupID   string `json:"group_id,omitempty"`
	Output    string `json:"output,omitempty"`
	IsError   bool   `json:"is_error,omitempty"`

	// agent_handoff
	OldAgentID string `json:"old_agent_id,omitempty"`
	NewAgentID string `json:"new_agent_id,omitempty"`

	// agent_config_update
	Instructions string   `json:"instructions,omitempty"`
	ToolsAdded   []string `json:"tools_added,omitempty"`
	ToolsRemoved []string `json:"tools_removed,omitempty"`
}

// Metrics is what scoring measures of a message's MetricsReport.
// Timestamps are Unix seconds, delays seconds, in both SDKs. The report's
// other numbers (on_user_turn_completed_delay, llm_node_tps, llm_node_ttfs,
// playback_latency) are checked to be numbers and not kept: no measure
// uses them (docs/formats.md).
type Metrics struct {
	StartedSpeakingAt  *float64 `json:"started_speaking_at,omitempty"`
	StoppedSpeakingAt  *float64 `json:"stopped_speaking_at,omitempty"`
	TranscriptionDelay *float64 `json:"transcription_delay,omitempty"`
	EndOfTurnDelay     *float64 `json:"end_of_turn_delay,omitempty"`
	LLMNodeTTFT        *float64 `json:"llm_node_ttft,omitempty"`
	TTSNodeTTFB        *float64 `json:"tts_node_ttfb,omitempty"`
	E2ELatency         *float64 `json:"e2e_latency,omitempty"`
}

// ParseChatHistory reads chat_history.json (at most lim.MaxBytes, else a
// limit *ParseError) and decodes it with ParseChatHistoryBytes. A failing
// reader gives its own error, wrapped: a store hiccup is not bad input.
func ParseChatHistory(r io.Reader, lim ChatLimits) (*ChatHistory, error) {
	lim = lim.withDefaults()
	buf := readBuffers.Get().(*[]byte)
	defer readBuffers.Put(buf)
	data, err := readCapped(r, lim.MaxBytes, (*buf)[:0])
	if cap(data) <= maxPooledRead {
		*buf = data[:0] // the history holds no view of it (TestChatHistoryKeepsNoViewOfItsBytes)
	}
	if err != nil {
		return nil, readErr(err, lim)
	}
	return ParseChatHistoryBytes(data, lim)
}

// readErr is a failed read's error: a limit *ParseError, or the reader's
// own error wrapped.
func readErr(err error, lim ChatLimits) error {
	if errors.Is(err, ErrLimit) {
		return limitErr(PartChatHistory, -1, lim.MaxBytes, fmt.Sprintf("max_bytes=%d", lim.MaxBytes))
	}
	return fmt.Errorf("read %s: %w", PartChatHistory, err)
}

// ParseChatHistoryBytes decodes chat_history.json. Syntax errors and limits
// are fatal *ParseErrors naming the item and byte offset; a field of the
// wrong type or an unknown item type is a Problem, and parsing goes on.
//
// Well-formed input takes the fast path (fastChat, goccy/go-json); anything
// it does not accept as is (a syntax or type error, a repeated or missing
// "items", invalid UTF-8, too many items) is decoded again by the streaming
// encoding/json path, which gives the exact error or problems. Both paths
// give the same result wherever the fast one answers (FuzzChatPathsAgree).
func ParseChatHistoryBytes(data []byte, lim ChatLimits) (*ChatHistory, error) {
	return decodeChat(data, lim.withDefaults(), new(chatScratch))
}

func decodeChat(data []byte, lim ChatLimits, scratch *chatScratch) (*ChatHistory, error) {
	if int64(len(data)) > lim.MaxBytes {
		return nil, limitErr(PartChatHistory, -1, lim.MaxBytes, fmt.Sprintf("max_bytes=%d", lim.MaxBytes))
	}
	if h, ok := fastChat(data, lim, scratch); ok {
		return h, nil
	}
	return streamChat(bytes.NewReader(data), lim)
}

// matchesItems reports whether encoding/json would decode a top-level key
// into the "items" field: it matches names case-insensitively, with its own
// folding rules, which the fast path's decoder shares.
func matchesItems(key string) bool {
	if key == "items" {
		return true
	}
	doc, err := json.Marshal(map[string]int{key: 1})
	var probe struct {
		Items *int `json:"items"`
	}
	return err == nil && json.Unmarshal(doc, &probe) == nil && probe.Items != nil
}

// SizeHinter is a reader that knows the size of what it reads (a store's
// object reader): SizeHint returns it, or -1 when unknown.
type SizeHinter interface{ SizeHint() int64 }

// readBuffers keeps the buffers chat histories are read into, up to
// maxPooledRead bytes each: a fresh 300 KB buffer per session cost its page
// faults again on every read (on the CI's virtual machines a page fault is
// a hypervisor exit), and nothing the parsers return points into the bytes
// they read.
var readBuffers = sync.Pool{New: func() any { return new([]byte) }}

const maxPooledRead = 4 << 20

// readCapped reads r whole into buf (grown as needed), failing with
// ErrLimit past max bytes. A reader that knows its length (bytes.Reader, a
// store's SizeHinter) is read into one allocation of that size.
func readCapped(r io.Reader, max int64, buf []byte) ([]byte, error) {
	size := 64 << 10
	if l, ok := r.(interface{ Len() int }); ok && int64(l.Len()) <= max {
		size = l.Len() + 1 // +1: room for the read that sees EOF
	} else if h, ok := r.(SizeHinter); ok && h.SizeHint() >= 0 && h.SizeHint() <= max {
		size = int(h.SizeHint()) + 1
	}
	if cap(buf) < size {
		buf = make([]byte, 0, size)
	}
	cr := &capReader{r: r, left: max}
	for {
		if len(buf) == cap(buf) {
			buf = append(buf, 0)[:len(buf)]
		}
		n, err := cr.Read(buf[len(buf):cap(buf)])
		buf = buf[:len(buf)+n]
		if errors.Is(err, io.EOF) {
			return buf, nil
		}
		if err != nil {
			return nil, err
		}
	}
}

func (lim ChatLimits) withDefaults() ChatLimits {
	if lim.MaxBytes <= 0 {
		lim.MaxBytes = DefaultMaxChatBytes
	}
	if lim.MaxItems <= 0 {
		lim.MaxItems = DefaultMaxChatItems
	}
	return lim
}

// streamChat decodes with encoding/json one item at a time: the reference
// path, exact about errors, offsets and per-field problems.
func streamChat(r io.Reader, lim ChatLimits) (*ChatHistory, error) {
	lr := &capReader{r: r, left: lim.MaxBytes}
	dec := json.NewDecoder(lr)
	p := &chatParser{dec: dec, lr: lr, lim: lim, unmarshal: json.Unmarshal, h: &ChatHistory{Counts: map[string]int{}}}
	if err := p.parse(); err != nil {
		return nil, err
	}
	return p.h, nil
}

// unmarshalFunc decodes one value: encoding/json's on the streaming path,
// goccy/go-json's on the fast one.
type unmarshalFunc func([]byte, any) error

type chatParser struct {
	metrics   metricsSlab
	unmarshal unmarshalFunc
	dec       *json.Decoder
	lr        *capReader
	lim       ChatLimits
	h         *ChatHistory
	snake     bool
	camel     bool
	seconds   bool
	millis    bool
	sawItems  bool
}

func (p *chatParser) fail(item int, err error) error {
	off := p.dec.InputOffset()
	if errors.Is(err, ErrLimit) || p.lr.hit {
		return limitErr(PartChatHistory, item, p.lim.MaxBytes, fmt.Sprintf("max_bytes=%d", p.lim.MaxBytes))
	}
	if errors.Is(err, io.EOF) {
		err = io.ErrUnexpectedEOF
	}
	var se *json.SyntaxError
	if errors.As(err, &se) {
		off = se.Offset
	}
	return parseErr(PartChatHistory, item, off, err)
}

func (p *chatParser) parse() error {
	if err := p.expectDelim('{', -1); err != nil {
		return err
	}
	for p.dec.More() {
		tok, err := p.dec.Token()
		if err != nil {
			return p.fail(-1, err)
		}
		key, _ := tok.(string)
		if !matchesItems(key) {
			var skip json.RawMessage // other top-level keys are allowed and ignored
			if err := p.dec.Decode(&skip); err != nil {
				return p.fail(-1, err)
			}
			continue
		}
		if err := p.items(); err != nil {
			return err
		}
	}
	if err := p.expectDelim('}', -1); err != nil {
		return err
	}
	// Nothing but whitespace may follow the object.
	if _, err := p.dec.Token(); !errors.Is(err, io.EOF) {
		if err == nil {
			err = errors.New("data after the top-level object")
		}
		return p.fail(-1, err)
	}
	if !p.sawItems {
		return parseErr(PartChatHistory, -1, -1, errors.New(`no "items" array`))
	}
	p.finish()
	return nil
}

func (p *chatParser) expectDelim(want json.Delim, item int) error {
	tok, err := p.dec.Token()
	if err != nil {
		return p.fail(item, err)
	}
	if d, ok := tok.(json.Delim); !ok || d != want {
		return parseErr(PartChatHistory, item, p.dec.InputOffset(), fmt.Errorf("want %q, got %v", want, tok))
	}
	return nil
}

func (p *chatParser) items() error {
	// A repeated "items" replaces the earlier one, as encoding/json (and
	// goccy/go-json on the fast path) decode a repeated key.
	*p = chatParser{unmarshal: p.unmarshal, dec: p.dec, lr: p.lr, lim: p.lim, h: &ChatHistory{Counts: map[string]int{}}}
	p.sawItems = true
	tok, err := p.dec.Token()
	if err != nil {
		return p.fail(-1, err)
	}
	if tok == nil { // "items": null
		return nil
	}
	if d, ok := tok.(json.Delim); !ok || d != '[' {
		return parseErr(PartChatHistory, -1, p.dec.InputOffset(), fmt.Errorf(`"items" is not an array`))
	}
	var raw rawItem
	for i := 0; p.dec.More(); i++ {
		if i >= p.lim.MaxItems {
			return limitErr(PartChatHistory, i, p.dec.InputOffset(), fmt.Sprintf("max_items=%d", p.lim.MaxItems))
		}
		raw = newRawItem()
		err := p.dec.Decode(&raw)
		var te *json.UnmarshalTypeError
		switch {
		case errors.As(err, &te):
			// encoding/json finishes the value after a type error: keep the item.
			p.problem(i, "field_type", fmt.Sprintf("field %q: %v", te.Field, te))
		case err != nil:
			return p.fail(i, err)
		}
		p.add(i, &raw)
	}
	return p.expectDelim(']', -1)
}

func (p *chatParser) problem(item int, code, msg string) {
	p.h.Problems = append(p.h.Problems, Problem{Part: PartChatHistory, Code: code, Item: item, Message: msg})
}

func (p *chatParser) finish() {
	switch {
	case p.seconds && p.millis:
		p.h.TimestampUnit = "mixed"
		p.problem(-1, "timestamp_units_mixed", "created_at mixes seconds and milliseconds")
	case p.millis:
		p.h.TimestampUnit = "ms"
	case p.seconds:
		p.h.TimestampUnit = "s"
	}
	switch {
	case p.snake && p.camel:
		p.h.KeyStyle = "mixed"
	case p.camel:
		p.h.KeyStyle = "camel"
	case p.snake:
		p.h.KeyStyle = "snake"
	}
}

// capReader fails with ErrLimit after left bytes instead of truncating.
type capReader struct {
	r    io.Reader
	left int64
	hit  bool
}

func (c *capReader) Read(b []byte) (int, error) {
	if c.left <= 0 {
		// One more byte tells "exactly at the limit" from "over it".
		var one [1]byte
		n, err := c.r.Read(one[:])
		if n > 0 {
			c.hit = true
			return 0, ErrLimit
		}
		return 0, err
	}
	if int64(len(b)) > c.left {
		b = b[:c.left]
	}
	n, err := c.r.Read(b)
	c.left -= int64(n)
	return n, err
}

// contentStrings keeps the text entries of a message's content: a list of
// strings (images and audio are objects, dropped by the SDKs by default) or a
// bare string.
func contentStrings(raw json.RawMessage, unmarshal unmarshalFunc) ([]string, bool) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || raw[0] == 'n' {
		return nil, true
	}
	if raw[0] == '"' {
		var s string
		err := unmarshal(raw, &s)
		return []string{s}, err == nil
	}
	var ss []string
	if unmarshal(raw, &ss) == nil {
		return ss, true
	}
	var parts []json.RawMessage
	if unmarshal(raw, &parts) != nil {
		return nil, false
	}
	ss = ss[:0] // the failed decode above may have filled some entries
	for _, part := range parts {
		var s string
		if unmarshal(part, &s) == nil {
			ss = append(ss, s)
		}
	}
	return ss, true
}

// instructionsText reads instructions given as a string or as the JS object
// {"type":"instructions","audio":…,"text":…}.
func instructionsText(raw json.RawMessage, unmarshal unmarshalFunc) string {
	if len(raw) == 0 {
		return ""
	}
	var s string
	if unmarshal(raw, &s) == nil {
		return s
	}
	var o struct {
		Text  string `json:"text"`
		Audio string `json:"audio"`
	}
	if unmarshal(raw, &o) == nil {
		if o.Text != "" {
			return o.Text
		}
		return o.Audio
	}
	return ""
}
