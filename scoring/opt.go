package scoring

import (
	"bytes"
	"encoding/json"
)

// Opt is an optional number. In JSON it is the number, or null when unset;
// with the omitzero tag an unset Opt is left out. Unlike a pointer it costs
// no allocation, which matters at tens of findings per session.
type Opt[T int | float64] struct {
	V   T
	Set bool
}

func some[T int | float64](v T) Opt[T] { return Opt[T]{V: v, Set: true} }

// IsZero reports an unset value (for omitzero).
func (o Opt[T]) IsZero() bool { return !o.Set }

// MarshalJSON writes the number or null.
func (o Opt[T]) MarshalJSON() ([]byte, error) {
	if !o.Set {
		return []byte("null"), nil
	}
	return json.Marshal(o.V)
}

// UnmarshalJSON reads a number or null.
func (o *Opt[T]) UnmarshalJSON(b []byte) error {
	if bytes.Equal(bytes.TrimSpace(b), []byte("null")) {
		*o = Opt[T]{}
		return nil
	}
	o.Set = true
	return json.Unmarshal(b, &o.V)
}
