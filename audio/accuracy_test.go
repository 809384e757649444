package audio

import (
	"encoding/binary"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"testing"
)

// The accuracy test builds calls with known truth: two espeak-ng voices
// (user en-us, agent en-gb) resampled to 48 kHz by sox, placed sample-exact
// on their channels, with noise and the agent bleeding into the user's
// microphone, encoded by opusenc. CI sets LKSCORE_REQUIRE_AUDIO_TOOLS=1.
func needTools(t testing.TB) {
	t.Helper()
	for _, tool := range []string{"espeak-ng", "sox", "opusenc"} {
		if _, err := exec.LookPath(tool); err != nil {
			if os.Getenv("LKSCORE_REQUIRE_AUDIO_TOOLS") != "" {
				t.Fatalf("%s not found (apt-get install espeak-ng sox opus-tools)", tool)
			}
			t.Skipf("SKIPPING: %s not found; apt-get install espeak-ng sox opus-tools", tool)
		}
	}
}

// speech renders text with an espeak-ng voice as 48 kHz mono samples.
func speech(t testing.TB, dir, voice, text string) []float32 {
	t.Helper()
	wav := filepath.Join(dir, "v.wav")
	if out, err := exec.Command("espeak-ng", "-v", voice, "-w", wav, text).CombinedOutput(); err != nil {
		t.Fatalf("espeak-ng: %v: %s", err, out)
	}
	return trimQuiet(wavSamples(t, wav))
}

// trimQuiet trims a synthesizer's leading and trailing silence: the clip
// is speech from its first to its last sample above -40 dBFS.
func trimQuiet(s []float32) []float32 {
	first, last := slices.IndexFunc(s, loud), len(s)-1
	for last > first && !loud(s[last]) {
		last--
	}
	return s[first : last+1]
}

// wavSamples resamples a synthesizer's wav file to 48 kHz mono float32 (sox).
func wavSamples(t testing.TB, wav string) []float32 {
	t.Helper()
	raw, err := exec.Command("sox", "-R", wav, "-t", "f32", "-r", "48000", "-c", "1", "-").Output()
	if err != nil {
		t.Fatalf("sox: %v", err)
	}
	s := make([]float32, len(raw)/4)
	for i := range s {
		s[i] = math.Float32frombits(binary.LittleEndian.Uint32(raw[4*i:]))
	}
	return s
}

func loud(v float32) bool { return math.Abs(float64(v)) > 0.01 }

// call is a two-channel timeline under construction, and its truth.
type call struct {
	ch    [2][]float32
	truth [2][]Segment
}

func ms(n int) int { return n * 48 }

// place puts clip on channel ch at sample offset at; cut > 0 ends it early.
func (c *call) place(ch, at int, clip []float32, cut int) Segment {
	if cut > 0 && cut < len(clip) {
		clip = clip[:cut]
	}
	if need := at + len(clip); need > len(c.ch[ch]) {
		c.ch[ch] = append(c.ch[ch], make([]float32, need-len(c.ch[ch]))...)
	}
	for i, v := range clip {
		c.ch[ch][at+i] += v
	}
	seg := Segment{StartMs: int64(at) / 48, EndMs: int64(at+len(clip)) / 48}
	c.truth[ch] = append(c.truth[ch], seg)
	return seg
}

// encode mixes noise (snrDB under the speech level) and agent bleed
// (bleedDB under the agent) in and encodes at kbps.
func (c *call) encode(t testing.TB, dir string, snrDB, bleedDB float64, kbps string) string {
	t.Helper()
	n := max(len(c.ch[0]), len(c.ch[1])) + ms(500)
	for ch := range 2 {
		c.ch[ch] = append(c.ch[ch], make([]float32, n-len(c.ch[ch]))...)
	}
	rng := rand.New(rand.NewPCG(1, 2))
	var sum float64
	var cnt int
	for ch := range 2 {
		for _, v := range c.ch[ch] {
			if loud(v) {
				sum += float64(v) * float64(v)
				cnt++
			}
		}
	}
	noise := math.Sqrt(sum/float64(cnt)) * math.Pow(10, -snrDB/20)
	bleed := float32(math.Pow(10, -bleedDB/20))
	l, r := make([]float32, n), make([]float32, n)
	for i := range n {
		l[i] = c.ch[0][i] + bleed*c.ch[1][i] + float32(rng.NormFloat64()*noise)
		r[i] = c.ch[1][i] + float32(rng.NormFloat64()*noise)
	}
	return opusEncode(t, dir, "call-"+kbps, l, r, kbps)
}

// writeStereo writes l and r interleaved as little-endian float32: the raw
// 48 kHz stereo samples sox and the RecorderIO script read.
func writeStereo(t testing.TB, path string, l, r []float32) {
	t.Helper()
	buf := make([]byte, 8*len(l))
	for i := range l {
		binary.LittleEndian.PutUint32(buf[8*i:], math.Float32bits(l[i]))
		binary.LittleEndian.PutUint32(buf[8*i+4:], math.Float32bits(r[i]))
	}
	if err := os.WriteFile(path, buf, 0o644); err != nil {
		t.Fatal(err)
	}
}

// opusEncode encodes a stereo call as opusenc does at kbps with 20 ms
// frames (sox makes the 16-bit wav it reads, without dither, so the same
// samples always give the same file) and returns the Ogg file's path.
func opusEncode(t testing.TB, dir, name string, l, r []float32, kbps string) string {
	t.Helper()
	raw, wav, ogg := filepath.Join(dir, name+".f32"), filepath.Join(dir, name+".wav"), filepath.Join(dir, name+".ogg")
	writeStereo(t, raw, l, r)
	defer os.Remove(raw)
	defer os.Remove(wav)
	if out, err := exec.Command("sox", "-R", "-D", "-t", "f32", "-r", "48000", "-c", "2", raw, "-b", "16", wav).CombinedOutput(); err != nil {
		t.Fatalf("sox: %v: %s", err, out)
	}
	if out, err := exec.Command("opusenc", "--quiet", "--bitrate", kbps, "--framesize", "20", wav, ogg).CombinedOutput(); err != nil {
		t.Fatalf("opusenc: %v: %s", err, out)
	}
	return ogg
}

// testCall lays out a call with a normal turn, an awkward silence, a
// talk-over, a back-channel, a barge-in with a 250 ms yield and four more
// ordinary turns, and returns the expected turns.
func testCall(t testing.TB, dir string) (*call, []Turn) {
	user := func(s string) []float32 { return speech(t, dir, "en-us", s) }
	agent := func(s string) []float32 { return speech(t, dir, "en-gb", s) }
	c := &call{}
	var want []Turn
	u1 := c.place(0, ms(500), user("Hi, I would like to move my booking to Friday."), 0)
	a1 := c.place(1, int(u1.EndMs+700)*48, agent("Of course. Which booking would you like to move?"), 0)
	want = append(want, Turn{UserEndMs: u1.EndMs, AgentStartMs: a1.StartMs, HeardLatencyMs: 700})
	u2 := c.place(0, int(a1.EndMs+2500)*48, user("The dentist appointment on Tuesday morning, please."), 0) // awkward silence
	a2clip := agent("Let me check that for you. Friday afternoon has two o'clock and four o'clock free, and the morning is full.")
	a2 := c.place(1, int(u2.EndMs-300)*48, a2clip, 0) // talk-over
	want = append(want, Turn{UserEndMs: u2.EndMs, AgentStartMs: a2.StartMs, HeardLatencyMs: -300})
	c.place(0, int(a2.StartMs+1800)*48, user("uh huh"), 0) // back-channel
	u4 := c.place(0, int(a2.EndMs+600)*48, user("Two o'clock works for me."), 0)
	a3clip := agent("Great. I have booked Friday at two o'clock. You will receive a confirmation by text message shortly, and")
	a3start := int(u4.EndMs+900) * 48
	u5start := a3start + ms(1500)
	a3 := c.place(1, a3start, a3clip, u5start+ms(250)-a3start) // yields 250 ms after the barge-in
	want = append(want, Turn{UserEndMs: u4.EndMs, AgentStartMs: a3.StartMs, HeardLatencyMs: 900})
	u5 := c.place(0, u5start, user("Actually, can you send it by email instead?"), 0)
	a4 := c.place(1, int(u5.EndMs+1000)*48, agent("Sure, I will send it by email."), 0)
	want = append(want, Turn{UserEndMs: u5.EndMs, AgentStartMs: a4.StartMs, HeardLatencyMs: 1000, BargeIn: true, YieldMs: 250})
	// Ordinary turns with gaps from quick to slow.
	last := a4
	for i, gap := range []int64{400, 1200, 1800, 600} {
		u := c.place(0, int(last.EndMs+800)*48, user([]string{"Thanks. Is parking available there?", "And how long will it take?",
			"Do I need to bring anything?", "Perfect, that is all."}[i]), 0)
		last = c.place(1, int(u.EndMs+gap)*48, agent([]string{"Yes, there is free parking behind the building.", "About forty five minutes.",
			"Just your insurance card, please.", "Wonderful. Have a great day!"}[i]), 0)
		want = append(want, Turn{UserEndMs: u.EndMs, AgentStartMs: last.StartMs, HeardLatencyMs: gap})
	}
	return c, want
}

// TestHeardLatencyAccuracy: at 20 dB SNR with the agent bleeding into the
// user's microphone, heard latency is within 20 ms at the median and 60 ms
// at worst; talk-over, awkward silences, back-channels and barge-ins are
// counted exactly; low-bitrate stereo is refused, and so is a call whose
// noise is as loud as its speech.
func TestHeardLatencyAccuracy(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: generates and analyses calls with espeak-ng, flite and opusenc")
	}
	needTools(t)
	dir := t.TempDir()
	c, want := testCall(t, dir)
	for _, snr := range []float64{20, 30} {
		t.Run(fmt.Sprintf("snr%.0f", snr), func(t *testing.T) { checkAccuracy(t, c, want, dir, snr) })
	}
	for _, kbps := range []string{"12", "24"} {
		low, err := os.Open(c.encode(t, dir, 20, 25, kbps))
		if err != nil {
			t.Fatal(err)
		}
		res, err := Analyze(low, Config{})
		low.Close()
		if err != nil || res.Refused != "channels_leak" {
			t.Errorf("%s kb/s: refused %q (%s), separation %.1f dB; want channels_leak", kbps, res.Refused, res.Reason, res.Metrics.SeparationDB)
		}
	}
	// White noise as loud as the speech: refused as too noisy, not
	// measured, and not mistaken for leaking channels.
	noisy, err := os.Open(c.encode(t, dir, 0, 25, "96"))
	if err != nil {
		t.Fatal(err)
	}
	defer noisy.Close()
	if res, err := Analyze(noisy, Config{}); err != nil || res.Refused != "too_noisy" || len(res.Turns) != 0 {
		t.Errorf("0 dB SNR: refused %q (%s), user SNR %.1f dB, %d turns; want too_noisy", res.Refused, res.Reason, res.Metrics.UserSNRDB, len(res.Turns))
	}
}

func checkAccuracy(t *testing.T, c *call, want []Turn, dir string, snr float64) {
	ogg := c.encode(t, dir, snr, 25, "96")
	f, err := os.Open(ogg)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	res, err := Analyze(f, Config{})
	if err != nil || res.Refused != "" {
		t.Fatalf("err %v, refused %s: %s", err, res.Refused, res.Reason)
	}
	if len(res.Turns) != len(want) {
		t.Fatalf("%d turns, want %d:\n got %+v\nwant %+v\nuser %v\nagent %v\ntruth %v", len(res.Turns), len(want), res.Turns, want, res.UserSegments, res.AgentSegments, c.truth)
	}
	var errs []float64
	for i, w := range want {
		g := res.Turns[i]
		truth := w.AgentStartMs - w.UserEndMs
		e := math.Abs(float64(g.HeardLatencyMs - truth))
		errs = append(errs, e)
		t.Logf("turn %d: heard %d ms, truth %d ms (error %.0f); user end %d/%d, agent start %d/%d", i, g.HeardLatencyMs, truth, e,
			g.UserEndMs, w.UserEndMs, g.AgentStartMs, w.AgentStartMs)
		if g.BargeIn != w.BargeIn {
			t.Errorf("turn %d: barge-in %v, want %v", i, g.BargeIn, w.BargeIn)
		}
		if w.BargeIn && math.Abs(float64(g.YieldMs-w.YieldMs)) > 60 {
			t.Errorf("turn %d: yield %d ms, want %d", i, g.YieldMs, w.YieldMs)
		}
	}
	slices.Sort(errs)
	p50, worst := errs[len(errs)/2], errs[len(errs)-1]
	t.Logf("heard-latency error p50 %.0f ms, max %.0f ms; metrics %+v", p50, worst, res.Metrics)
	if p50 > 20 || worst > 60 {
		t.Errorf("heard-latency error p50 %.0f ms (≤ 20), max %.0f ms (≤ 60)", p50, worst)
	}
	m := res.Metrics
	if m.TalkOverCount != 1 || m.AwkwardSilenceCount != 1 || len(res.Silences) != 1 || m.BackchannelCount != 1 || m.BargeInCount != 1 {
		t.Errorf("counts: talk-over %d, awkward silences %d, back-channels %d, barge-ins %d; want 1 each", m.TalkOverCount,
			m.AwkwardSilenceCount, m.BackchannelCount, m.BargeInCount)
	}
}
