package recording

import (
	"io"
)

// ChatDecoder decodes chat histories one after another into memory it
// keeps: the read buffer, the items, the strings and the metrics of the
// history before are reused for the next one. A batch (`lkscore score`
// over many sessions) then makes almost no garbage, so the collector
// rarely runs and the process touches few new pages: on a virtual machine
// each first touch of a page is a hypervisor exit (docs/performance.md).
//
// The history Decode returns, and every string in it, is valid only until
// the next Decode: a caller that keeps anything from it past that (a
// scorecard's item ids) must have used it first, or copy it. A zero
// ChatDecoder is ready; it is not safe for concurrent use.
type ChatDecoder struct {
	buf     []byte
	scratch chatScratch
}

// Decode reads chat_history.json from r as ParseChatHistory does, into the
// decoder's memory.
func (d *ChatDecoder) Decode(r io.Reader, lim ChatLimits) (*ChatHistory, error) {
	lim = lim.withDefaults()
	data, err := readCapped(r, lim.MaxBytes, d.buf[:0])
	if cap(data) <= maxPooledRead {
		d.buf = data[:0]
	}
	if err != nil {
		return nil, readErr(err, lim)
	}
	// The strings may be views of data: it is the decoder's, kept until the
	// next Decode, as the history is.
	d.scratch.views = true
	return decodeChat(data, lim, &d.scratch)
}

// chatScratch is the memory a decode fills: a fresh one per
// ParseChatHistory, one kept per ChatDecoder.
type chatScratch struct {
	h     ChatHistory
	items []Item // h.Items' memory, kept while h.Items is nil
	arena chunks[byte]
	strs  chunks[string]
	boxes chunks[metricsBox]
	// views says the input lives as long as the history: strings without
	// escapes are views of it instead of copies.
	views bool
}

// reset readies the scratch for the next history, handing out its memory
// again from the start.
func (c *chatScratch) reset() *ChatHistory {
	if cap(c.h.Items) > cap(c.items) {
		c.items = c.h.Items
	}
	items, counts := c.items[:0], c.h.Counts
	if counts == nil {
		counts = map[string]int{}
	}
	clear(counts)
	c.h = ChatHistory{Items: items, Counts: counts}
	c.arena.reset()
	c.strs.reset()
	c.boxes.reset()
	return &c.h
}

// done finishes a history decoded into the scratch: no items is nil, as
// a fresh decode gives.
func (c *chatScratch) done() {
	if len(c.h.Items) == 0 { // never grown: the next reset keeps c.items
		c.h.Items = nil
	}
}

// chunks hands out slices of a fixed capacity, the same ones again after
// a reset.
type chunks[T any] struct {
	all  [][]T
	used int
}

// next returns an empty slice of capacity size: one handed out before the
// last reset when there is one left (its old contents cleared), else a
// new one.
func (c *chunks[T]) next(size int) []T {
	if c.used < len(c.all) && cap(c.all[c.used]) == size {
		ch := c.all[c.used][:size]
		clear(ch)
		c.used++
		return ch[:0]
	}
	ch := make([]T, 0, size)
	c.all = append(c.all[:c.used], ch)
	c.used++
	return ch
}

func (c *chunks[T]) reset() { c.used = 0 }
