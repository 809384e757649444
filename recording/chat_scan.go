package recording

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"math/bits"
	"unicode/utf16"
	"unicode/utf8"
	"unsafe"

	"github.com/lkscore/lkscore/scoring"
)

// fastChat decodes a well-formed chat history in one pass over the bytes,
// with no reflection: a scanner that knows rawItem's keys, reads numbers
// with strconv.ParseFloat on the token itself and content strings straight
// into the item. It is several times cheaper than a general decoder on the
// SDKs' files (docs/performance.md has the side-by-side measurement).
//
// It answers only when it is certain of what the streaming encoding/json
// path would give: ok is false for invalid UTF-8 or JSON, a key that
// encoding/json would match to a field by case folding but not exactly, a
// key with an escape, a null or a value of another type in a field it
// decodes, a repeated or missing "items", too many items, or a first item
// without an id. The caller then decodes with streamChat, which names the
// error or records the problems. FuzzChatPathsAgree checks that both paths
// give the same result wherever this one answers.
func fastChat(data []byte, lim ChatLimits, scratch *chatScratch) (h *ChatHistory, ok bool) {
	if !utf8.Valid(data) {
		return nil, false // encoding/json replaces invalid UTF-8; leave that to it
	}
	s := scanner{data: data, scratch: scratch}
	p := &chatParser{lim: lim, unmarshal: json.Unmarshal, h: scratch.reset(), metrics: metricsSlab{pool: &scratch.boxes}}
	if !s.document(p) || s.failed {
		return nil, false
	}
	p.finish()
	scratch.done()
	return p.h, true
}

type scanner struct {
	data   []byte
	i      int
	failed bool
	depth  int
	// arena holds the bytes of the strings the scanner returns, so that a
	// history's few thousand strings are a few allocations, not one each.
	// Bytes once written are never changed: a full chunk is replaced by a
	// new one, and the strings keep the old one alive.
	arena   []byte
	strs    []string // the string lists' chunk (strList)
	scratch *chatScratch
}

// arenaChunk is the size of one arena allocation; longer strings get their
// own. strsChunk is the length of one chunk of string lists.
const (
	arenaChunk = 32 << 10
	strsChunk  = 256
)

// save returns b as a string whose bytes live in the arena, or, when the
// input outlives the history (a ChatDecoder's own buffer), in the input.
func (s *scanner) save(b []byte) string {
	switch {
	case len(b) == 0:
		return ""
	case s.scratch.views:
		return unsafe.String(&b[0], len(b))
	case len(b) > arenaChunk/8:
		return string(b)
	case cap(s.arena)-len(s.arena) < len(b):
		s.arena = s.scratch.arena.next(arenaChunk)
	}
	start := len(s.arena)
	s.arena = append(s.arena, b...)
	return unsafe.String(&s.arena[start], len(b))
}

// maxSkipDepth bounds the nesting of values the scanner skips; deeper
// input is left to encoding/json.
const maxSkipDepth = 512

func (s *scanner) fail() bool { s.failed = true; return false }

func (s *scanner) ws() {
	if s.i < len(s.data) && s.data[s.i] > ' ' {
		return // most tokens follow no whitespace, or one space (json.dumps) skipped below
	}
	for s.i < len(s.data) {
		switch s.data[s.i] {
		case ' ', '\t', '\n', '\r':
			s.i++
		default:
			return
		}
	}
}

// next skips whitespace and returns the next byte (0 at the end).
func (s *scanner) next() byte {
	s.ws()
	if s.i >= len(s.data) {
		return 0
	}
	return s.data[s.i]
}

func (s *scanner) expect(c byte) bool {
	if s.next() != c {
		return s.fail()
	}
	s.i++
	return true
}

func (s *scanner) document(p *chatParser) bool {
	sawItems := false
	ok := s.object(func(key []byte) bool {
		switch {
		case string(key) == "items":
			// a repeated "items" merges in one decode and restarts in the stream
			ok := !sawItems && s.items(p)
			sawItems = true
			return ok
		case foldsTo(key, "items"):
			return false
		default:
			return s.skip()
		}
	})
	s.ws()
	if !ok || s.failed || s.i != len(s.data) || !sawItems {
		return s.fail()
	}
	return true
}

// object reads an object: member is called with each key, the scanner at
// its value, and reads the value; false from it fails the scan.
func (s *scanner) object(member func(key []byte) bool) bool {
	if !s.expect('{') {
		return false
	}
	if s.next() == '}' {
		s.i++
		return true
	}
	for {
		key, ok := s.key()
		if !ok || !member(key) {
			return s.fail()
		}
		if !s.more('}') {
			return !s.failed
		}
	}
}

// more consumes a ',' (true: another member follows) or the closing byte
// (false). Anything else fails the scan.
func (s *scanner) more(closing byte) bool {
	switch s.next() {
	case ',':
		s.i++
		return true
	case closing:
		s.i++
		return false
	}
	s.fail()
	return false
}

// key reads an object key and its ':'. Keys with escapes are declined: the
// SDKs write none, and encoding/json matches their unescaped form.
func (s *scanner) key() ([]byte, bool) {
	if s.next() != '"' {
		return nil, s.fail()
	}
	raw, esc, ok := s.rawString()
	if !ok || esc {
		return nil, s.fail()
	}
	return raw, s.expect(':')
}

func (s *scanner) items(p *chatParser) bool {
	if !s.expect('[') {
		return false
	}
	if s.next() == ']' {
		s.i++
		return true
	}
	// Size the slice from the input instead of growing it: the SDKs' items
	// take 400-650 bytes, the more with json.dumps's ", " and ": ".
	per := 400
	if bytes.Contains(s.data[:min(len(s.data), 512)], []byte(`": "`)) {
		per = 540
	}
	if want := len(s.data)/per + 1; cap(p.h.Items) < want {
		p.h.Items = make([]Item, 0, want)
	}
	var raw rawItem
	for i := 0; ; i++ {
		if i >= p.lim.MaxItems {
			return s.fail() // the stream names the limit
		}
		raw = newRawItem()
		if !s.item(&raw) || (i == 0 && raw.ID == "") {
			return s.fail()
		}
		p.add(i, &raw)
		if !s.more(']') {
			return !s.failed
		}
	}
}

// content reads a message's content: a string or a list of strings goes
// straight into raw; anything else (a list with image or audio objects) is
// kept raw for contentStrings, as on the stream.
func (s *scanner) content(raw *rawItem) bool {
	switch s.next() {
	case '"':
		v, ok := s.str()
		raw.Content, raw.contentSet, raw.contentList = nil, true, []string{v}
		return ok
	case '[':
		start := s.i
		if list, ok := s.strList(); ok {
			raw.Content, raw.contentSet, raw.contentList = nil, true, list
			return true
		}
		s.i, s.failed = start, false
		v, ok := s.rawValue()
		raw.Content, raw.contentSet, raw.contentList = v, false, nil
		return ok
	}
	return s.fail()
}

// rawValue returns the next value's bytes (a view of the input), for the
// few fields decoded with encoding/json from them. null is declined.
func (s *scanner) rawValue() (json.RawMessage, bool) {
	if s.next() == 'n' {
		return nil, s.fail()
	}
	start := s.i
	if !s.skip() {
		return nil, false
	}
	return json.RawMessage(s.data[start:s.i]), true
}

// strList reads a list of strings. The lists share chunks of s.strs, each
// cut to its own capacity, so that appending to one cannot reach another.
func (s *scanner) strList() ([]string, bool) {
	if !s.expect('[') {
		return nil, false
	}
	if s.next() == ']' {
		s.i++
		return []string{}, true
	}
	start := len(s.strs)
	for {
		if s.next() != '"' {
			return nil, s.fail()
		}
		v, ok := s.str()
		if !ok {
			return nil, false
		}
		if len(s.strs) == cap(s.strs) {
			n := len(s.strs) - start
			var grown []string
			if n < strsChunk/2 {
				grown = s.scratch.strs.next(strsChunk)[:n]
			} else {
				grown = make([]string, n, 2*n)
			}
			copy(grown, s.strs[start:])
			s.strs, start = grown, 0
		}
		s.strs = append(s.strs, v)
		if !s.more(']') {
			return s.strs[start:len(s.strs):len(s.strs)], !s.failed
		}
	}
}

func (s *scanner) boolean() (bool, bool) {
	switch s.next() {
	case 't':
		return true, s.literal("true")
	case 'f':
		return false, s.literal("false")
	}
	return false, s.fail()
}

func (s *scanner) literal(w string) bool {
	if !bytes.HasPrefix(s.data[s.i:], []byte(w)) {
		return s.fail()
	}
	s.i += len(w)
	return true
}

// str reads a string value; a null or another type fails.
func (s *scanner) str() (string, bool) {
	if s.next() != '"' {
		return "", s.fail()
	}
	raw, esc, ok := s.rawString()
	if !ok {
		return "", false
	}
	if !esc {
		return s.save(raw), true
	}
	return s.unescape(raw)
}

// interned reads a string value that is usually one of a few words (an
// item's type or role) without allocating for those.
func (s *scanner) interned() (string, bool) {
	if s.next() != '"' {
		return "", s.fail()
	}
	raw, esc, ok := s.rawString()
	if !ok {
		return "", false
	}
	if esc {
		return s.unescape(raw)
	}
	switch string(raw) {
	case scoring.TypeMessage:
		return scoring.TypeMessage, true
	case scoring.TypeFunctionCall:
		return scoring.TypeFunctionCall, true
	case scoring.TypeFunctionCallOutput:
		return scoring.TypeFunctionCallOutput, true
	case scoring.TypeAgentHandoff:
		return scoring.TypeAgentHandoff, true
	case scoring.TypeAgentConfigUpdate:
		return scoring.TypeAgentConfigUpdate, true
	case "user":
		return "user", true
	case "assistant":
		return "assistant", true
	case "system":
		return "system", true
	case "developer":
		return "developer", true
	}
	return s.save(raw), true
}

// stringSpecial marks the bytes that end a string's plain run: the quote,
// the backslash and the control characters JSON forbids in strings.
var stringSpecial = func() (t [256]bool) {
	for c := 0; c < 0x20; c++ {
		t[c] = true
	}
	t['"'], t['\\'] = true, true
	return t
}()

// rawString reads a string at s.i (a '"'); raw is its content between the
// quotes, esc whether it holds an escape.
func (s *scanner) rawString() (raw []byte, esc bool, ok bool) {
	d := s.data
	i := s.i + 1
	start := i
	for {
		// Eight bytes at a time while none of them is special (SWAR: a
		// byte of x^q is zero where x has a quote, and so on); the lowest
		// bit of the masks is the first special byte.
		for i+8 <= len(d) {
			x := binary.LittleEndian.Uint64(d[i:])
			if m := zeroBytes(x^quotes) | zeroBytes(x^backslashes) | bytesBelow(x, 0x20); m != 0 {
				i += bits.TrailingZeros64(m) >> 3
				break
			}
			i += 8
		}
		for i < len(d) && !stringSpecial[d[i]] {
			i++
		}
		if i >= len(d) || d[i] < 0x20 {
			return nil, false, s.fail()
		}
		if d[i] == '"' {
			s.i = i + 1
			return d[start:i], esc, true
		}
		// a backslash: one escape, checked here, decoded by unescape
		esc = true
		if i+1 >= len(d) {
			return nil, false, s.fail()
		}
		switch d[i+1] {
		case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
			i += 2
		case 'u':
			if i+6 > len(d) || !isHex4(d[i+2:i+6]) {
				return nil, false, s.fail()
			}
			i += 6
		default:
			return nil, false, s.fail()
		}
	}
}

const (
	ones        = 0x0101010101010101
	highs       = 0x8080808080808080
	quotes      = '"' * ones
	backslashes = '\\' * ones
)

// zeroBytes has the high bit set in the bytes of x that are zero, exact
// up to the first of them (the borrow may mark bytes above it).
func zeroBytes(x uint64) uint64 { return (x - ones) &^ x & highs }

// bytesBelow has the high bit set in the bytes of x below n (n <= 128),
// exact up to the first of them.
func bytesBelow(x uint64, n uint64) uint64 { return (x - ones*n) &^ x & highs }

func isHex4(b []byte) bool {
	for _, c := range b[:4] {
		if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f' || c >= 'A' && c <= 'F') {
			return false
		}
	}
	return true
}

// unescape decodes a string's escapes (already checked by rawString). A
// lone surrogate, which encoding/json replaces with U+FFFD, is declined.
func unescape(raw []byte) (string, bool) {
	b, ok := appendUnescaped(make([]byte, 0, len(raw)), raw)
	if !ok || len(b) == 0 {
		return "", ok
	}
	return unsafe.String(&b[0], len(b)), true
}

// unescape is the package's unescape with the decoded bytes in the arena
// when they fit there (a tool call's arguments are JSON in a string, an
// escape every few bytes).
func (s *scanner) unescape(raw []byte) (string, bool) {
	if len(raw) > arenaChunk/8 {
		return unescape(raw)
	}
	if cap(s.arena)-len(s.arena) < len(raw) { // decoded, it is no longer
		s.arena = s.scratch.arena.next(arenaChunk)
	}
	start := len(s.arena)
	b, ok := appendUnescaped(s.arena, raw)
	if !ok || len(b) == start {
		return "", ok
	}
	s.arena = b
	return unsafe.String(&b[start], len(b)-start), true
}

// appendUnescaped appends raw's decoded bytes to b; false for a lone
// surrogate.
func appendUnescaped(b, raw []byte) ([]byte, bool) {
	for i := 0; i < len(raw); {
		c := raw[i]
		if c != '\\' {
			j := bytes.IndexByte(raw[i:], '\\')
			if j < 0 {
				j = len(raw) - i
			}
			b = append(b, raw[i:i+j]...)
			i += j
			continue
		}
		switch raw[i+1] {
		case 'u':
			r := rune(hex4(raw[i+2 : i+6]))
			i += 6
			if utf16.IsSurrogate(r) {
				if i+6 > len(raw) || raw[i] != '\\' || raw[i+1] != 'u' {
					return b, false
				}
				r = utf16.DecodeRune(r, rune(hex4(raw[i+2:i+6])))
				if r == utf8.RuneError {
					return b, false
				}
				i += 6
			}
			b = utf8.AppendRune(b, r)
			continue
		case 'b':
			b = append(b, '\b')
		case 'f':
			b = append(b, '\f')
		case 'n':
			b = append(b, '\n')
		case 'r':
			b = append(b, '\r')
		case 't':
			b = append(b, '\t')
		default: // '"', '\\', '/'
			b = append(b, raw[i+1])
		}
		i += 2
	}
	return b, true
}

func hex4(b []byte) uint32 {
	var v uint32
	for _, c := range b[:4] {
		switch {
		case c >= '0' && c <= '9':
			c -= '0'
		case c >= 'a' && c <= 'f':
			c -= 'a' - 10
		default:
			c -= 'A' - 10
		}
		v = v<<4 | uint32(c)
	}
	return v
}

// skip advances over one value of any type, checking its syntax.
func (s *scanner) skip() bool {
	switch c := s.next(); c {
	case '"':
		_, _, ok := s.rawString()
		return ok
	case '{', '[':
		closing := byte(']')
		if c == '{' {
			closing = '}'
		}
		s.i++
		if s.depth++; s.depth > maxSkipDepth {
			return s.fail()
		}
		defer func() { s.depth-- }()
		if s.next() == closing {
			s.i++
			return true
		}
		for {
			if c == '{' { // a member's key first
				if s.next() != '"' {
					return s.fail()
				}
				if _, _, ok := s.rawString(); !ok || !s.expect(':') {
					return s.fail()
				}
			}
			if !s.skip() {
				return s.fail()
			}
			if !s.more(closing) {
				return !s.failed
			}
		}
	case 't':
		return s.literal("true")
	case 'f':
		return s.literal("false")
	case 'n':
		return s.literal("null")
	default:
		return s.numberToken()
	}
}

// foldsToAny reports whether encoding/json could match key to one of the
// names by case folding. Non-ASCII keys are treated as possible matches
// ('ſ' folds to 's', the Kelvin sign to 'k').
func foldsToAny(key []byte, names map[string]bool) bool {
	plain := true // lower-case ASCII only: it can fold only to a camelCase name
	for _, c := range key {
		if c >= utf8.RuneSelf || (c >= 'A' && c <= 'Z') {
			plain = false
			break
		}
	}
	if plain {
		return foldedName(string(key)) && names[string(key)]
	}
	var buf [64]byte
	if len(key) > len(buf) {
		return false // longer than any name
	}
	for i, c := range key {
		if c >= utf8.RuneSelf {
			return true
		}
		if c >= 'A' && c <= 'Z' {
			c += 'a' - 'A'
		}
		buf[i] = c
	}
	return names[string(buf[:len(key)])]
}

func foldsTo(key []byte, name string) bool {
	for _, c := range key {
		if c >= utf8.RuneSelf {
			return true
		}
	}
	return bytes.EqualFold(key, []byte(name))
}
