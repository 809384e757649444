package session

import (
	"bytes"
	"encoding/json"
	"math"
	"strconv"
)

// Opt is an optional number. In JSON it is the number, or null when unset;
// with the omitzero tag an unset Opt is left out. Unlike a pointer it costs
// no allocation, which matters at tens of findings per session.
type Opt[T int | float64] struct {
	V   T
	Set bool
}

// IsZero reports an unset value (for omitzero).
func (o Opt[T]) IsZero() bool { return !o.Set }

// MarshalJSON writes the number or null, in encoding/json's number format
// (the scorecard's bytes are the determinism contract), without its
// reflection and allocations: a scorecard has dozens of Opt fields.
func (o Opt[T]) MarshalJSON() ([]byte, error) {
	if !o.Set {
		return []byte("null"), nil
	}
	switch v := any(o.V).(type) {
	case int:
		if v >= 0 && v < len(smallInts) {
			return smallInts[v], nil // read only: encoding/json copies it
		}
		return strconv.AppendInt(make([]byte, 0, 8), int64(v), 10), nil
	case float64:
		return AppendFloat(make([]byte, 0, 24), v)
	}
	return json.Marshal(o.V)
}

// AppendFloat appends f as encoding/json writes a float64: the shortest
// round-trip form, in exponent form below 1e-6 or from 1e21, with "e-07"
// written "e-7"; NaN and infinities are an error, as there. Scorecards and
// what is stored of them are bytes others compare (determinism).
func AppendFloat(b []byte, f float64) ([]byte, error) {
	if math.IsInf(f, 0) || math.IsNaN(f) {
		return nil, &json.UnsupportedValueError{Str: strconv.FormatFloat(f, 'g', -1, 64)}
	}
	format := byte('f')
	if abs := math.Abs(f); abs != 0 && (abs < 1e-6 || abs >= 1e21) {
		format = 'e'
	}
	b = strconv.AppendFloat(b, f, format, -1, 64)
	if format == 'e' {
		if n := len(b); n >= 4 && b[n-4] == 'e' && b[n-3] == '-' && b[n-2] == '0' {
			b[n-2] = b[n-1]
			b = b[:n-1]
		}
	}
	return b, nil
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

// smallInts holds the JSON of the ints a scorecard mostly has (turn
// indexes, counts), written once: an allocation each was a tenth of a
// scorecard's encoding garbage.
var smallInts = func() (t [1024][]byte) {
	for i := range t {
		t[i] = strconv.AppendInt(nil, int64(i), 10)
	}
	return t
}()
