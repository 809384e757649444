package recording

import (
	"bytes"
	"unicode/utf8"

	gojson "github.com/goccy/go-json"
)

// chatDoc is chat_history.json as the fast path decodes it, in one call.
type chatDoc struct {
	Items []rawItem `json:"items"`
}

// absentItems marks the first element of the slice fastChat decodes into.
// Still there after decoding, it means either no "items" key or a first
// item without an "id": the fast path cannot tell which, and declines.
const absentItems = "\x00lkscore:absent"

// goccyChat is the fast path as it was before the scanner (chat_scan.go):
// goccy/go-json decoding the whole document into []rawItem. It stays, in a
// test file, for BenchmarkFieldHistory's side-by-side measurement.
// It answers only when it is certain of the streaming path's result: ok is
// false for invalid UTF-8, a syntax or type error, a missing or null
// "items", or too many items, and the caller decodes again with streamChat,
// which names the error or the problems. FuzzChatPathsAgree checks that
// both give the same result wherever the fast path answers.
func goccyChat(data []byte, lim ChatLimits) (h *ChatHistory, ok bool) {
	if !utf8.Valid(data) || !oneItemsKey(data) {
		return nil, false // encoding/json replaces invalid UTF-8; leave that to it
	}
	// SDK items take 400-600 bytes each: size the slice from the input
	// instead of growing it (and copying every item) a dozen times.
	n := min(len(data)/384+1, lim.MaxItems)
	items, ok := decodeItems(data, n)
	if ok && len(items) > n {
		items, ok = decodeItems(data, len(items)) // denser than SDK output: once more, sized
	}
	if !ok || items == nil || len(items) > lim.MaxItems || (len(items) > 0 && items[0].ID == absentItems) {
		return nil, false
	}
	p := &chatParser{lim: lim, unmarshal: gojson.Unmarshal, h: &ChatHistory{Counts: map[string]int{}}}
	if len(items) > 0 {
		p.h.Items = make([]Item, 0, len(items))
	}
	for i := range items {
		p.add(i, &items[i])
	}
	p.finish()
	return p.h, true
}

// decodeItems decodes the document into a slice whose first n elements
// start with every number absent (NaN): goccy/go-json, like encoding/json,
// decodes into the elements already in a slice's capacity. Elements past n
// start zeroed, so when the result is longer than n its numbers cannot be
// trusted and the caller decodes again with a larger n. The first element
// is marked, so that a document without "items" can be told from "items": [{}].
func decodeItems(data []byte, n int) ([]rawItem, bool) {
	items := make([]rawItem, max(n, 1))
	tmpl := newRawItem()
	for i := range items {
		items[i] = tmpl
	}
	items[0].ID = absentItems
	doc := chatDoc{Items: items[:1]}
	if gojson.Unmarshal(data, &doc) != nil {
		return nil, false
	}
	return doc.Items, true
}

// oneItemsKey reports whether data certainly holds at most one key that
// encoding/json would decode into "items": one decode of a whole document
// merges a repeated key's array into the first one's elements, where the
// streaming path starts afresh. It is conservative: the string "items" in
// any letter case counts wherever it appears, and input with a letter
// written as a \u escape (which no SDK writes) or with 'ſ' (which folds to
// 's') is declined outright.
func oneItemsKey(data []byte) bool {
	if bytes.Contains(data, []byte("ſ")) {
		return false
	}
	for i := 0; ; {
		j := bytes.IndexByte(data[i:], '\\')
		if j < 0 {
			break
		}
		i += j + 1
		if e := data[i:]; len(e) >= 4 && e[0] == 'u' && e[1] == '0' && e[2] == '0' && e[3] >= '4' && e[3] <= '7' {
			return false // an escaped letter (or @, [, `, …)
		}
		i++ // past the escaped character, so "\\" counts once
		if i >= len(data) {
			break
		}
	}
	n := 0
	for i := 0; ; {
		j := bytes.IndexByte(data[i:], '"')
		if j < 0 {
			return n <= 1
		}
		i += j + 1
		if i+6 <= len(data) && data[i+5] == '"' && bytes.EqualFold(data[i:i+5], []byte("items")) {
			n++
		}
	}
}
