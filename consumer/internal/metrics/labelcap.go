package metrics

import (
	"strings"
	"sync"
)

// LabelCap bounds the label values a metric gives names chosen by the
// agents themselves (agent names, versions): the first max distinct values
// (or tuples of values) get a series of their own, later ones count as
// "other" (metrics.max_agents). A process keeps what it has given out.
type LabelCap struct {
	mu   sync.Mutex
	max  int
	seen map[string]bool
}

// NewLabelCap gives at most max values a series of their own.
func NewLabelCap(max int) *LabelCap { return &LabelCap{max: max, seen: map[string]bool{}} }

// SetMax sets the bound (metrics.max_agents).
func (c *LabelCap) SetMax(max int) {
	c.mu.Lock()
	c.max = max
	c.mu.Unlock()
}

// Values returns vals when they have, or can still get, a series of their
// own, else as many "other"s.
func (c *LabelCap) Values(vals ...string) []string {
	key := strings.Join(vals, "\x00")
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.seen[key] {
		return vals
	}
	if len(c.seen) < c.max {
		c.seen[key] = true
		return vals
	}
	out := make([]string, len(vals))
	for i := range out {
		out[i] = "other"
	}
	return out
}
