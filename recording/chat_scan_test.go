package recording

import (
	"math"
	"math/rand/v2"
	"strconv"
	"strings"
	"testing"
)

// TestScanNumbersMatchParseFloat: the scanner's own conversion gives
// strconv.ParseFloat's value, bit for bit, for numbers in every form the
// SDKs and other writers use (shortest round-trip, fixed and exponent
// forms, integers, long mantissas, tiny and huge exponents).
func TestScanNumbersMatchParseFloat(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 11))
	var toks []string
	for range 200000 {
		f := math.Float64frombits(r.Uint64())
		if math.IsNaN(f) || math.IsInf(f, 0) {
			continue
		}
		switch r.IntN(6) {
		case 0:
			f = r.Float64() * 3 // delays
		case 1:
			f = 1.7e9 + r.Float64()*1e8 // Unix seconds
		case 2:
			f = float64(r.IntN(1 << 20)) // integers
		case 3:
			f = r.Float64() * 1e-4 // callback delays
		}
		toks = append(toks, strconv.FormatFloat(f, 'g', -1, 64), strconv.FormatFloat(f, 'e', r.IntN(20), 64),
			strconv.FormatFloat(f, 'f', r.IntN(12), 64))
	}
	toks = append(toks, "0", "-0", "-0.0", "0.000123", "1e22", "1e23", "9007199254740993", "123456789012345678901234",
		"0.1234567890123456789012", "1E5", "2e-22", "2e-23", "4.9e-324", "1.7976931348623157e308", "5e-325",
		"1e309", "-1e400", "1"+strings.Repeat("0", 320), "1"+strings.Repeat("0", 298),
		// exact halfway cases between two floats: round half to even
		"4503599627370496.5", "4503599627370497.5", "2251799813685248.25", "2251799813685248.75", "1125899906842624.125",
		"1125899906842624.375", "4503599627370495.5", "9007199254740991.5", "0.9999999999999999444888487687421729788184165954589843750")
	for _, tok := range toks {
		want, err := strconv.ParseFloat(tok, 64)
		s := scanner{data: []byte(tok)}
		got, ok := s.num()
		c := scanner{data: []byte(tok)}
		if checked := c.checkedNum(); checked != ok || (ok && c.i != len(tok)) {
			t.Fatalf("%s: checkedNum says %v (at %d), num %v", tok, checked, c.i, ok)
		}
		if err != nil || math.IsInf(want, 0) {
			if ok {
				t.Errorf("%s: scanned %v, ParseFloat fails (%v)", tok, got, err)
			}
			continue
		}
		if !ok || math.Float64bits(got) != math.Float64bits(want) || s.i != len(tok) {
			t.Fatalf("%s: scanned %v (ok %v, at %d), ParseFloat %v", tok, got, ok, s.i, want)
		}
	}
}

// TestFoldRule: a key the scanner does not take exactly is declined when
// encoding/json would match it to a field by case folding, and only then.
func TestFoldRule(t *testing.T) {
	for key, want := range map[string]bool{"ID": true, "createdat": true, "CreatedAt": true, "callid": true, "extra": false,
		"stt_metadata": false, "reply_required": false, "idx": false, "e2elatency": false, "ſtuff": true} {
		if got := foldsToAny([]byte(key), itemKeys); got != want {
			t.Errorf("item key %q: folds %v, want %v", key, got, want)
		}
	}
	for key, want := range map[string]bool{"e2elatency": true, "E2E_LATENCY": true, "llm_metadata": false, "createdat": false} {
		if got := foldsToAny([]byte(key), metricKeys); got != want {
			t.Errorf("metric key %q: folds %v, want %v", key, got, want)
		}
	}
	// Other spellings of every known key fold: upper case and capitalized.
	// (The lowered camelCase names are in the lists above; the exact names
	// never reach the rule.)
	for _, set := range []map[string]bool{itemKeys, metricKeys} {
		for name := range set {
			for _, v := range []string{strings.ToUpper(name), strings.ToUpper(name[:1]) + name[1:]} {
				if !foldsToAny([]byte(v), set) {
					t.Errorf("%q does not fold, though encoding/json matches it to a field", v)
				}
			}
		}
	}
}
