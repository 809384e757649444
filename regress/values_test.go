package regress

import (
	"encoding/json"
	"math"
	"testing"
)

// referenceValues is what SampleValues.UnmarshalJSON must read: the
// array as encoding/json reads a []float64, the values it lacks Missing.
func referenceValues(b []byte) (SampleValues, error) {
	var vals []float64
	var v SampleValues
	if err := json.Unmarshal(b, &vals); err != nil {
		return v, err
	}
	for i := range v {
		v[i] = Missing
		if i < len(vals) {
			v[i] = vals[i]
		}
	}
	return v, nil
}

// FuzzSampleValues: the fast reading of a stored sample's values agrees
// with encoding/json's on any bytes, and what MarshalJSON writes reads
// back as it was.
func FuzzSampleValues(f *testing.F) {
	for _, s := range []string{`[91.5,100,-1,88,72.25,1140,2210.5,0.91]`, `[1,2,3,4,5,6,7,8,300,85]`, `[1, 2]`, `[]`, `[NaN]`,
		`[1e400]`, `[0x10]`, `[1,]`, `[,1]`, `[1,2,3,4,5,6,7,8,9,10,11]`, `null`, `[-0,1e-7,5e-324]`, `[+1]`, `[1_0]`, `["1"]`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		var got SampleValues
		gerr := got.UnmarshalJSON(b)
		want, werr := referenceValues(b)
		if (gerr != nil) != (werr != nil) {
			t.Fatalf("%q: error %v, encoding/json's %v", b, gerr, werr)
		}
		if gerr != nil {
			return
		}
		for i := range got {
			if got[i] != want[i] && !(math.IsNaN(got[i]) && math.IsNaN(want[i])) {
				t.Fatalf("%q: %v, encoding/json reads %v", b, got, want)
			}
		}
		out, err := got.MarshalJSON()
		if err != nil {
			return // a value JSON cannot hold
		}
		var again SampleValues
		if err := again.UnmarshalJSON(out); err != nil || again != got {
			t.Fatalf("%q: written %s, read back %v (%v), was %v", b, out, again, err, got)
		}
	})
}
