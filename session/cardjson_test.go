package session

import (
	"bytes"
	"encoding/json"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"reflect"
	"testing"
)

// randomStrings are the strings a random card's fields take: plain, JSON's
// and HTML's special characters, control characters, U+2028/U+2029,
// multi-byte and invalid UTF-8.
var randomStrings = []string{
	"", "pass", "CR_ERROR", `quote " and \ backslash`, "<script>&amp;</script>", "line\nbreak\ttab\r\b\f",
	"\x00\x01\x1f\x7f", "sep\u2028par\u2029", "héllo wörld 日本語 🎧", "bad \xff\xfe utf8 \xc3", "\xe2\x80", "a\u00a0b",
}

// randomFloats are the floats a random card takes: encoding/json's format
// changes at 1e-6 and 1e21, and the exponent form's "e-07" is "e-7" there.
var randomFloats = []float64{
	0, math.Copysign(0, -1), 1, -1, 0.5, 83.33333333333333, 1e-6, 9.99e-7, 1e-7, 1.5e-300, 5e-324, 1e20, 1e21, 1.2345e22,
	-2.5e-8, 123456789.125, math.MaxFloat64, 1764417600.123,
}

// fill sets every field v can reach to random values, so a field added to
// a scorecard type is covered without this test naming it.
func fill(r *rand.Rand, v reflect.Value, depth int) {
	switch v.Kind() {
	case reflect.String:
		if r.IntN(4) == 0 {
			b := make([]byte, r.IntN(12))
			for i := range b {
				b[i] = byte(r.UintN(256))
			}
			v.SetString(string(b))
			return
		}
		v.SetString(randomStrings[r.IntN(len(randomStrings))])
	case reflect.Bool:
		v.SetBool(r.IntN(2) == 0)
	case reflect.Int, reflect.Int64:
		ints := []int64{0, 1, -1, 7, 1023, 1024, -1024, math.MaxInt32, math.MinInt64, math.MaxInt64, r.Int64() - r.Int64()}
		v.SetInt(ints[r.IntN(len(ints))])
	case reflect.Float64:
		f := randomFloats[r.IntN(len(randomFloats))]
		if r.IntN(3) == 0 {
			f = (r.Float64() - 0.5) * math.Pow(10, float64(r.IntN(50)-25))
		}
		v.SetFloat(f)
	case reflect.Slice:
		if depth > 4 || r.IntN(4) == 0 {
			return // nil
		}
		n := r.IntN(4)
		s := reflect.MakeSlice(v.Type(), n, n)
		for i := range n {
			fill(r, s.Index(i), depth+1)
		}
		v.Set(s)
	case reflect.Map:
		if r.IntN(3) == 0 {
			return
		}
		m := reflect.MakeMap(v.Type())
		for range r.IntN(4) {
			k, e := reflect.New(v.Type().Key()).Elem(), reflect.New(v.Type().Elem()).Elem()
			fill(r, k, depth+1)
			fill(r, e, depth+1)
			m.SetMapIndex(k, e)
		}
		v.Set(m)
	case reflect.Pointer:
		if r.IntN(3) == 0 {
			return
		}
		p := reflect.New(v.Type().Elem())
		fill(r, p.Elem(), depth+1)
		v.Set(p)
	case reflect.Struct:
		for i := range v.NumField() {
			fill(r, v.Field(i), depth+1)
		}
	default:
		panic("fill: a scorecard field of kind " + v.Kind().String() + ": teach fill and AppendJSON about it")
	}
}

func randomCard(seed uint64) *Scorecard {
	r := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	var sc Scorecard
	fill(r, reflect.ValueOf(&sc).Elem(), 0)
	return &sc
}

// sameAsEncodingJSON fails t unless AppendJSON writes what json.Marshal
// does, or both refuse the card.
func sameAsEncodingJSON(t *testing.T, sc *Scorecard, what string) {
	t.Helper()
	want, werr := json.Marshal(sc)
	got, gerr := sc.AppendJSON([]byte("prefix"))
	if (werr != nil) != (gerr != nil) {
		t.Fatalf("%s: encoding/json error %v, AppendJSON error %v", what, werr, gerr)
	}
	if werr != nil {
		return
	}
	if !bytes.HasPrefix(got, []byte("prefix")) || !bytes.Equal(got[len("prefix"):], want) {
		got = bytes.TrimPrefix(got, []byte("prefix"))
		i := 0
		for i < len(got) && i < len(want) && got[i] == want[i] {
			i++
		}
		t.Fatalf("%s: differs at byte %d:\nencoding/json …%s\nAppendJSON    …%s", what, i, want[max(0, i-80):min(len(want), i+80)],
			got[max(0, i-80):min(len(got), i+80)])
	}
}

func TestScorecardJSONMatchesEncodingJSON(t *testing.T) {
	for seed := range uint64(3000) {
		sc := randomCard(seed)
		sameAsEncodingJSON(t, sc, "random card")
	}
	sameAsEncodingJSON(t, &Scorecard{}, "zero card")
	// A NaN anywhere is encoding/json's error, and AppendJSON's.
	nan := randomCard(1)
	nan.Metrics.DurationS = math.NaN()
	if _, err := nan.AppendJSON(nil); err == nil {
		t.Fatal("a NaN encoded")
	}
	// The golden scorecards: what scoring really writes.
	files, _ := filepath.Glob("../scenarios/data/*/scorecard.golden.json")
	if len(files) == 0 {
		t.Fatal("no golden scorecards")
	}
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		var sc Scorecard
		if err := json.Unmarshal(data, &sc); err != nil {
			t.Fatal(err)
		}
		sameAsEncodingJSON(t, &sc, f)
	}
}

// FuzzScorecardJSON: on any seed's random card (every field set or not,
// hostile strings, extreme numbers), AppendJSON writes encoding/json's bytes.
func FuzzScorecardJSON(f *testing.F) {
	for _, s := range []uint64{0, 1, 2, 42, 1 << 40} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, seed uint64) {
		sameAsEncodingJSON(t, randomCard(seed), "random card")
	})
}

func BenchmarkScorecardJSON(b *testing.B) {
	data, err := os.ReadFile("../scenarios/data/4_tool_trouble/scorecard.golden.json")
	if err != nil {
		b.Fatal(err)
	}
	var sc Scorecard
	if err := json.Unmarshal(data, &sc); err != nil {
		b.Fatal(err)
	}
	b.Run("encoding/json", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := json.Marshal(&sc); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("AppendJSON", func(b *testing.B) {
		b.ReportAllocs()
		buf := make([]byte, 0, 16<<10)
		for b.Loop() {
			if _, err := sc.AppendJSON(buf[:0]); err != nil {
				b.Fatal(err)
			}
		}
	})
}
