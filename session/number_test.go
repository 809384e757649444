package session

import (
	"bytes"
	"encoding/json"
	"testing"
)

func TestScanNumber(t *testing.T) {
	for _, s := range []string{"0", "-0", "12", "1.5", "-1.25e-7", "1E+21", "5e-324", "123456789012345678901234567890"} {
		if n, ok := ScanNumber([]byte(s), 0); !ok || n != len(s) {
			t.Errorf("ScanNumber(%q) = %d, %v; want %d, true", s, n, ok, len(s))
		}
	}
	for _, s := range []string{"", "-", "+1", "01", ".5", "1.", "1e", "1e+", "NaN", "Inf", "0x10", "1_0"} {
		if n, ok := ScanNumber([]byte(s), 0); ok && n == len(s) {
			t.Errorf("ScanNumber(%q) takes it whole", s)
		}
	}
	if n, ok := ScanNumber([]byte(`[12,3]`), 1); !ok || n != 3 {
		t.Errorf("from 1 in [12,3]: %d %v", n, ok)
	}
}

// FuzzScanNumber: a whole input ScanNumber takes is a number encoding/json
// takes, and the other way round.
func FuzzScanNumber(f *testing.F) {
	for _, s := range []string{"0", "-1.5e3", "01", "1.", "+1", "1e400"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		n, ok := ScanNumber(b, 0)
		whole := ok && n == len(b)
		var num json.Number
		isNumber := len(b) > 0 && len(bytes.TrimSpace(b)) == len(b) && json.Valid(b) && json.Unmarshal(b, &num) == nil && (b[0] == '-' || (b[0] >= '0' && b[0] <= '9'))
		if whole != isNumber {
			t.Fatalf("%q: ScanNumber takes it whole %v, encoding/json reads a number %v", b, whole, isNumber)
		}
	})
}
