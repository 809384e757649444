package audio

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"os"
	"runtime"
	"testing"
	"time"
)

func analyzeFile(t testing.TB, path string, cfg Config) *Result {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	res, err := Analyze(bytes.NewReader(data), cfg)
	if err != nil {
		t.Fatal(err)
	}
	return res
}

// TestShortCall: a committed two-second stereo file (a tone on the left at
// 0.2–0.8 s, on the right at 1.1–1.8 s): the segments, one turn, and the
// duration from the final granule position (the encoder's padding and
// pre-skip removed).
func TestShortCall(t *testing.T) {
	res := analyzeFile(t, "testdata/short.ogg", Config{})
	if res.Refused != "" || res.DurationMs != 2000 || res.PreSkip != 312 || len(res.UserSegments) != 1 || len(res.AgentSegments) != 1 || len(res.Turns) != 1 {
		t.Fatalf("%+v", res)
	}
	if u, a := res.UserSegments[0], res.AgentSegments[0]; abs(u.StartMs-200) > 30 || abs(a.StartMs-1100) > 30 || abs(u.EndMs-800) > 80 || abs(a.EndMs-1800) > 80 {
		t.Fatalf("segments user %+v agent %+v", u, a)
	}
}

func abs(v int64) int64 {
	if v < 0 {
		return -v
	}
	return v
}

// TestRefusals: what cannot be measured is a refusal with a reason, never
// an error or a crash.
func TestRefusals(t *testing.T) {
	short, err := os.ReadFile("testdata/short.ogg")
	if err != nil {
		t.Fatal(err)
	}
	mono, _ := os.ReadFile("testdata/mono.ogg")
	badRate := bytes.Clone(short)
	// The OpusHead's input sample rate, in the first page's packet.
	i := bytes.Index(badRate, []byte("OpusHead"))
	copy(badRate[i+12:], []byte{0xff, 0xff, 0xff, 0x7f})
	for name, c := range map[string]struct {
		data []byte
		cfg  Config
		want string
	}{
		"mono":      {mono, Config{}, "not_stereo"},
		"truncated": {short[:len(short)/2], Config{}, "corrupt"},
		"not ogg":   {[]byte("RIFF....WAVEfmt "), Config{}, "corrupt"},
		"empty":     {nil, Config{}, "corrupt"},
		"too long":  {short, Config{MaxDuration: time.Second}, "too_long"},
		"rate":      {badRate, Config{}, "sample_rate"},
	} {
		t.Run(name, func(t *testing.T) {
			res, err := Analyze(bytes.NewReader(c.data), c.cfg)
			if err != nil || res.Refused != c.want || res.Reason == "" {
				t.Fatalf("err %v, refused %q (%s), want %q", err, res.Refused, res.Reason, c.want)
			}
		})
	}
	// A reader that fails is an error, not a refusal: the file may be fine.
	if _, err := Analyze(io.MultiReader(bytes.NewReader(short[:1000]), failing{}), Config{}); err == nil || errors.Is(err, ErrCorrupt) {
		t.Fatalf("a failing reader gave %v", err)
	}
}

type failing struct{}

func (failing) Read([]byte) (int, error) { return 0, errors.New("connection reset") }

// FuzzAnalyze: hostile files never panic and never hold more than a packet.
func FuzzAnalyze(f *testing.F) {
	for _, p := range []string{"testdata/short.ogg", "testdata/mono.ogg"} {
		b, err := os.ReadFile(p)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
		f.Add(b[:len(b)/3])
	}
	f.Add([]byte("OggS\x00\x02"))
	f.Fuzz(func(t *testing.T, data []byte) {
		res, err := Analyze(bytes.NewReader(data), Config{MaxDuration: time.Minute})
		if err != nil {
			t.Fatalf("a byte slice cannot fail to read: %v", err)
		}
		if res.Refused == "" && res.Channels != 2 {
			t.Fatalf("measured a %d-channel file", res.Channels)
		}
	})
}

// BenchmarkCall measures 1- and 10-minute stereo calls (the accuracy
// test's call, repeated, encoded at 96 kb/s): the realtime factor per core
// (run it with -cpu 1) and how far the heap grows while it runs, which must
// not grow with the call's length.
func BenchmarkCall(b *testing.B) {
	needTools(b)
	dir := b.TempDir()
	c, _ := testCall(b, dir)
	for _, minutes := range []int{1, 10} {
		b.Run(fmt.Sprintf("%dmin", minutes), func(b *testing.B) { benchCall(b, c, dir, minutes) })
	}
}

func benchCall(b *testing.B, c *call, dir string, minutes int) {
	n := max(len(c.ch[0]), len(c.ch[1]))
	long := &call{}
	for ch := range 2 {
		one := append(c.ch[ch], make([]float32, n-len(c.ch[ch]))...)
		for len(long.ch[ch]) < minutes*60*48000 {
			long.ch[ch] = append(long.ch[ch], one...)
		}
		long.ch[ch] = long.ch[ch][:minutes*60*48000]
	}
	path := long.encode(b, dir, 30, 25, "96")
	long = nil
	st, err := os.Stat(path)
	if err != nil {
		b.Fatal(err)
	}
	b.SetBytes(st.Size())
	runtime.GC()
	var base runtime.MemStats
	runtime.ReadMemStats(&base)
	var peak uint64
	done, stopped := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(stopped)
		var ms runtime.MemStats
		for {
			select {
			case <-done:
				return
			case <-time.After(10 * time.Millisecond):
				runtime.ReadMemStats(&ms)
				peak = max(peak, ms.HeapInuse)
			}
		}
	}()
	b.ResetTimer()
	var dur int64
	for i := 0; i < b.N; i++ {
		f, err := os.Open(path) // streamed, as from the store
		if err != nil {
			b.Fatal(err)
		}
		res, err := Analyze(f, Config{})
		f.Close()
		if err != nil || res.Refused != "" {
			b.Fatalf("%v %s", err, res.Reason)
		}
		dur = res.DurationMs
	}
	b.StopTimer()
	close(done)
	<-stopped
	perCall := b.Elapsed().Seconds() / float64(b.N)
	b.ReportMetric(float64(dur)/1000/perCall, "x_realtime")
	b.ReportMetric(float64(peak-min(peak, base.HeapInuse))/(1<<20), "heap_growth_MiB")
}

// TestBackchannelInSentenceBreak: a short user utterance that starts while
// the agent speaks is a back-channel when the agent keeps the floor, also
// when it ends in the agent's pause between two sentences; when the agent
// stays silent past backchannel_max_ms, it is a barge-in.
func TestBackchannelInSentenceBreak(t *testing.T) {
	cfg := DefaultConfig()
	user := []Segment{{StartMs: 0, EndMs: 2000}, {StartMs: 5500, EndMs: 6100}}
	for _, tc := range []struct {
		name        string
		resumeMs    int64 // the agent's next sentence starts here
		backchannel bool
	}{{"agent resumes 550 ms after", 6650, true}, {"agent silent 1.5 s", 7600, false}} {
		t.Run(tc.name, func(t *testing.T) {
			agent := []Segment{{StartMs: 2600, EndMs: 6000}, {StartMs: tc.resumeMs, EndMs: tc.resumeMs + 2000}}
			turns, _, m := turns(user, agent, cfg, Metrics{})
			if got := m.BackchannelCount == 1; got != tc.backchannel {
				t.Errorf("back-channels %d, barge-ins %d, turns %+v; want a back-channel: %v", m.BackchannelCount, m.BargeInCount, turns, tc.backchannel)
			}
			if !tc.backchannel && (m.BargeInCount != 1 || len(turns) != 2) {
				t.Errorf("barge-ins %d, turns %+v; want the short utterance as a barge-in turn", m.BargeInCount, turns)
			}
		})
	}
}

// TestFadingEndPairs: after its last speech frame, an utterance's end
// follows pairs of frames over the pairs' noise only when two such pairs
// come in a row; a lone pair, as a 60 Hz hum's beat gives every 50 ms, is
// the noise's swing and leaves the end where it was.
func TestFadingEndPairs(t *testing.T) {
	for _, tc := range []struct {
		name    string
		pairs   []bool // weakPair on the user's channel after the speech
		wantEnd int64
	}{
		{"none", []bool{false, false, false, false, false}, 200},
		{"lone pairs", []bool{false, true, false, false, true, false, false, true}, 200},
		{"a run", []bool{true, true, true, false}, 220},
		{"a run across a gap", []bool{false, false, true, true, false}, 230},
	} {
		t.Run(tc.name, func(t *testing.T) {
			checkFadingEnd(t, tc.pairs, tc.wantEnd, func(a *analyzer, on, weakPair bool) {
				a.segments([2]bool{on}, [2]bool{on}, [2]bool{weakPair})
			})
		})
	}
}

// checkFadingEnd runs 200 ms of the user's speech, then a frame per value
// of after (step gives the segmenter each frame, whether it is speech and
// the rule's value), until the utterance closes, and checks it is one
// utterance from 0 to wantEnd ms.
func checkFadingEnd(t *testing.T, after []bool, wantEnd int64, step func(a *analyzer, on, v bool)) {
	t.Helper()
	a := newAnalyzer(DefaultConfig().withDefaults())
	frame := func(on, v bool) {
		step(a, on, v)
		a.index++
	}
	for range 20 { // 200 ms of speech
		frame(true, true)
	}
	for _, v := range after {
		frame(false, v)
	}
	for range 60 { // the merge gap passes: the utterance closes
		frame(false, false)
	}
	if len(a.segs[0]) != 1 {
		t.Fatalf("segments %+v, want one", a.segs[0])
	}
	if got := a.segs[0][0]; got.StartMs != 0 || got.EndMs != wantEnd {
		t.Errorf("utterance %+v, want 0–%d ms", got, wantEnd)
	}
}

// TestFadingEndBands: a band of the user's frame over its own noise follows
// the fading end straight on from it, or across a gap when two frames in a
// row do; a lone frame after a gap is a band's flicker.
func TestFadingEndBands(t *testing.T) {
	for _, tc := range []struct {
		name    string
		bands   []bool // bandHit on the user's channel after the speech
		wantEnd int64
	}{
		{"none", []bool{false, false, false, false}, 200},
		{"straight on", []bool{true, true, false, false}, 220},
		{"a lone frame after a gap", []bool{false, true, false, false, true, false}, 200},
		{"a run across a gap", []bool{false, true, true, false}, 230},
	} {
		t.Run(tc.name, func(t *testing.T) {
			checkFadingEnd(t, tc.bands, tc.wantEnd, func(a *analyzer, on, band bool) {
				a.bandHit = band
				a.segments([2]bool{on}, [2]bool{on}, [2]bool{})
			})
		})
	}
}

// TestBandsHearATailUnderHum: a fading end at 3 kHz, far under a hum's
// power in the whole speech band but far over the little noise in the
// 2–4 kHz band, stays in the utterance.
func TestBandsHearATailUnderHum(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 7))
	const speechAt, speechEnd, tailEnd = 2000, 2600, 2680 // ms
	n := 4 * sampleRate
	pcm := make([]float32, 2*n)
	for i := range n {
		ms := i * 1000 / sampleRate
		x := 0.05*math.Sin(2*math.Pi*250*float64(i)/sampleRate) + 0.05*math.Sin(2*math.Pi*350*float64(i)/sampleRate) +
			1e-4*r.NormFloat64()
		switch {
		case ms >= speechAt && ms < speechEnd:
			x += 0.3 * r.NormFloat64()
		case ms >= speechEnd && ms < tailEnd:
			x += 0.005 * math.Sin(2*math.Pi*3000*float64(i)/sampleRate)
		}
		pcm[2*i] = float32(x)
	}
	a := newAnalyzer(DefaultConfig().withDefaults())
	a.add(pcm)
	a.finish()
	if len(a.segs[0]) != 1 {
		t.Fatalf("user segments %+v, want one", a.segs[0])
	}
	if got := a.segs[0][0]; got.StartMs < speechAt-20 || got.StartMs > speechAt+20 || got.EndMs < tailEnd-10 || got.EndMs > tailEnd+20 {
		t.Errorf("user utterance %+v, want about %d–%d ms", got, speechAt, tailEnd)
	}
}
