package scoring

import (
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
)

// TestOptMarshalMatchesEncodingJSON: Opt writes every number as
// encoding/json writes it (the scorecard's bytes are the contract).
func TestOptMarshalMatchesEncodingJSON(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 5))
	vals := []float64{0, -0.0, 1, 0.5, 1e-6, 9.99e-7, 1e21, 1e20, 123456.789, 1e-7, -2.5e-9, 3e300}
	for range 100000 {
		if f := math.Float64frombits(r.Uint64()); !math.IsNaN(f) && !math.IsInf(f, 0) {
			vals = append(vals, f, r.Float64()*5000, math.Round(r.Float64()*1e6)/100)
		}
	}
	for _, v := range vals {
		want, _ := json.Marshal(v)
		got, err := Opt[float64]{V: v, Set: true}.MarshalJSON()
		if err != nil || string(got) != string(want) {
			t.Fatalf("%v: %s, encoding/json %s", v, got, want)
		}
	}
	for _, v := range []int{0, 1, -1, 7, 1023, 1024, 1 << 40, -12345} {
		want, _ := json.Marshal(v)
		if got, _ := (Opt[int]{V: v, Set: true}).MarshalJSON(); string(got) != string(want) {
			t.Fatalf("%d: %s, encoding/json %s", v, got, want)
		}
	}
	if _, err := (Opt[float64]{V: math.NaN(), Set: true}).MarshalJSON(); err == nil {
		t.Error("NaN marshalled")
	}
}

// TestNumIsPercentG: messages write numbers with strconv since issue 58;
// the bytes must stay those fmt's %g wrote (the goldens hold them), over a
// seeded grid of magnitudes, signs and the values round lands on.
func TestNumIsPercentG(t *testing.T) {
	r := rand.New(rand.NewPCG(58, 1))
	vals := []float64{0, -0.0, 1, -1, 0.004, 0.005, 999999.994, 999999.995, 1e6, 1e21, 1e-5, math.MaxFloat64, math.Inf(1), math.NaN()}
	for range 20000 {
		exp := r.IntN(30) - 8
		v := (r.Float64()*2 - 1) * math.Pow(10, float64(exp))
		vals = append(vals, v, math.Round(v), math.Round(v*100)/100)
	}
	for _, v := range vals {
		if got, want := num(v), fmt.Sprintf("%g", round(v)); got != want {
			t.Fatalf("num(%v) = %q, %%g writes %q", v, got, want)
		}
	}
}
