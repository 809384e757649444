package recording

import (
	"bytes"
	"encoding/binary"
	"math"
	"math/bits"
	"strconv"
	"unsafe"

	"github.com/lkscore/lkscore/session"
)

// The scanner's numbers: the SDKs' chat histories are mostly numbers
// (timestamps and latencies with up to 17 significant digits), so they are
// converted here without strconv.ParseFloat where that can be done exactly,
// and with it otherwise (FuzzChatPathsAgree compares both with encoding/json).

// num reads a JSON number as encoding/json does for a float64 field,
// the value strconv.ParseFloat gives for the token; out of range fails (a
// type error there). Most of the SDKs' numbers have at most 16 significant
// digits and a small exponent: those are converted exactly here, as
// strconv's own fast path does (a mantissa below 2^53 times or divided by
// an exactly representable power of ten is one correctly rounded
// operation), while the token is scanned. The rest go to ParseFloat.
// exponent reads a number's exponent digits (after the 'e') from d[i:]:
// the exponent, where it ends, and whether it had digits.
func exponent(d []byte, i int) (e, next int, ok bool) {
	neg := false
	if i < len(d) && (d[i] == '+' || d[i] == '-') {
		neg = d[i] == '-'
		i++
	}
	j := i
	for ; i < len(d) && d[i] >= '0' && d[i] <= '9'; i++ {
		if e < 100000 {
			e = e*10 + int(d[i]-'0')
		}
	}
	if neg {
		e = -e
	}
	return e, i, i > j
}

// exactFloat is mant × 10^exp when it can be computed exactly from the
// significant digits read (at most 19); false leaves it to ParseFloat.
func exactFloat(mant uint64, digits, exp int) (float64, bool) {
	if digits <= 19 && mant < 1<<53 && exp >= -22 && exp <= 22 {
		f := float64(mant)
		if exp < 0 {
			f /= exactPow10[-exp]
		} else {
			f *= exactPow10[exp]
		}
		return f, true
	}
	if digits <= 19 && exp < 0 && exp >= -19 && mant != 0 {
		return divPow10(mant, -exp), true
	}
	return 0, false
}

func (s *scanner) num() (float64, bool) {
	s.ws()
	d := s.data
	start := s.i
	i := start
	neg := i < len(d) && d[i] == '-'
	if neg {
		i++
	}
	var mant uint64
	digits, exp := 0, 0 // significant digits in mant; the decimal exponent
	switch {
	case i < len(d) && d[i] == '0':
		i++
	case i < len(d) && d[i] >= '1' && d[i] <= '9':
		for i+8 <= len(d) && digits <= 11 {
			v, ok := eightDigits(binary.LittleEndian.Uint64(d[i:]))
			if !ok {
				break
			}
			mant, digits, i = mant*1e8+v, digits+8, i+8
		}
		for ; i < len(d) && d[i] >= '0' && d[i] <= '9'; i++ {
			if digits < 19 {
				mant = mant*10 + uint64(d[i]-'0')
				digits++
			} else {
				exp++ // beyond 19 digits: ParseFloat below
				digits++
			}
		}
	default:
		return 0, s.fail()
	}
	if i < len(d) && d[i] == '.' {
		i++
		j := i
		for ; i < len(d) && d[i] >= '0' && d[i] <= '9'; i++ {
			if mant != 0 && digits <= 11 && i+8 <= len(d) {
				// eight digits at a time once the leading zeros are past
				if v, ok := eightDigits(binary.LittleEndian.Uint64(d[i:])); ok {
					mant, digits, exp, i = mant*1e8+v, digits+8, exp-8, i+7
					continue
				}
			}
			if mant == 0 && d[i] == '0' {
				exp-- // a leading zero: no significant digit yet
				continue
			}
			if digits < 19 {
				mant = mant*10 + uint64(d[i]-'0')
				exp--
			}
			digits++
		}
		if i == j {
			return 0, s.fail()
		}
	}
	if i < len(d) && (d[i] == 'e' || d[i] == 'E') {
		e, next, ok := exponent(d, i+1)
		if !ok {
			return 0, s.fail()
		}
		i, exp = next, exp+e
	}
	s.i = i
	if f, ok := exactFloat(mant, digits, exp); ok {
		if neg {
			f = -f
		}
		return f, true
	}
	tok := d[start:i]
	f, err := strconv.ParseFloat(unsafe.String(unsafe.SliceData(tok), len(tok)), 64)
	if err != nil || math.IsInf(f, 0) {
		return 0, s.fail()
	}
	return f, true
}

// eightDigits returns the value of eight ASCII digits read little-endian
// from the input (the first digit in the low byte), and false when any of
// the eight bytes is not a digit (SWAR, as simdjson parses them).
func eightDigits(x uint64) (uint64, bool) {
	if (x&0xF0F0F0F0F0F0F0F0)|(((x+0x0606060606060606)&0xF0F0F0F0F0F0F0F0)>>4) != 0x3333333333333333 {
		return 0, false
	}
	x = (x & 0x0F0F0F0F0F0F0F0F) * 2561 >> 8
	x = (x & 0x00FF00FF00FF00FF) * 6553601 >> 16
	return (x & 0x0000FFFF0000FFFF) * 42949672960001 >> 32, true
}

// divPow10 returns mant / 10^k correctly rounded (round half to even), for
// the SDKs' 17-digit numbers that the exact fast path cannot take: the
// 128-bit quotient of mant shifted left, its low bits and the remainder
// decide the rounding exactly. mant > 0, 1 <= k <= 19; the result is far
// from the subnormal range (at least 1e-19).
func divPow10(mant uint64, k int) float64 {
	d := pow10u64[k]
	s := 63 - bits.Len64(mant) + bits.Len64(d) // quotient in [2^62, 2^64)
	hi, lo := shl128(mant, s)
	q, r := bits.Div64(hi, lo, d)
	if q < 1<<63 {
		s++
		hi, lo = shl128(mant, s)
		q, r = bits.Div64(hi, lo, d)
	}
	m, low := q>>11, q&0x7ff
	if low > 0x400 || (low == 0x400 && (r != 0 || m&1 == 1)) {
		m++
		if m == 1<<53 {
			m >>= 1
			s--
		}
	}
	// m × 2^(11-s) with m in [2^52, 2^53): a normal float64, whose bits are
	// the exponent and m without its leading bit (no math.Ldexp needed).
	return math.Float64frombits(uint64(1023+52+11-s)<<52 | m&(1<<52-1))
}

// shl128 returns x << s as a 128-bit number (s < 128).
func shl128(x uint64, s int) (hi, lo uint64) {
	if s >= 64 {
		return x << (s - 64), 0
	}
	if s == 0 {
		return 0, x
	}
	return x >> (64 - s), x << s
}

var pow10u64 = [...]uint64{1, 1e1, 1e2, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9, 1e10, 1e11, 1e12, 1e13, 1e14, 1e15, 1e16,
	1e17, 1e18, 1e19}

// exactPow10 are the powers of ten a float64 holds exactly.
var exactPow10 = [...]float64{1e0, 1e1, 1e2, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9, 1e10, 1e11, 1e12, 1e13, 1e14, 1e15,
	1e16, 1e17, 1e18, 1e19, 1e20, 1e21, 1e22}

// checkedNum reads a number it does not convert: one the stream's float64
// field would take (within range), or the scan fails. Only a number with
// an exponent or hundreds of digits can be out of range; those are
// converted to check.
func (s *scanner) checkedNum() bool {
	start := s.next()
	if start == 0 {
		return s.fail()
	}
	from := s.i
	if !s.numberToken() {
		return false
	}
	tok := s.data[from:s.i]
	if len(tok) < 300 && bytes.IndexAny(tok, "eE") < 0 {
		return true
	}
	s.i = from
	_, ok := s.num()
	return ok
}

// numberToken advances over -?(0|[1-9]\d*)(\.\d+)?([eE][+-]?\d+)?
// (session.ScanNumber, the one grammar).
func (s *scanner) numberToken() bool {
	i, ok := session.ScanNumber(s.data, s.i)
	if !ok {
		return s.fail()
	}
	s.i = i
	return true
}
