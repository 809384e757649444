package audio

import (
	"encoding/binary"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestIndependentCalls measures calls built by a second recipe, apart from
// the grid's generator and never tuned on: other sentences, a third
// synthesizer (festival) beside espeak-ng voices the grid does not use,
// noise from sox's own generators, the agent's bleed through a room (three
// echoes, not one delayed copy), the SNR taken over the user's speaking
// frames, opusenc at the SDKs' 96 kb/s, and a fixed script per call. It
// checks the goals the grid meets (docs/audio.md, "Independent calls").
func TestIndependentCalls(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: generates and analyses calls with espeak-ng, festival and opusenc")
	}
	needTools(t)
	if _, err := exec.LookPath("text2wave"); err != nil {
		if os.Getenv("LKSCORE_REQUIRE_AUDIO_TOOLS") != "" {
			t.Fatal("festival's text2wave not found (apt-get install festival festvox-kallpc16k)")
		}
		t.Skip("SKIPPING: festival not found; apt-get install festival festvox-kallpc16k")
	}
	cl := &clips{dir: t.TempDir(), m: map[string][]float32{}}
	awkward := DefaultConfig().AwkwardSilenceMs
	all := gridScore{verbose: t.Logf} // logs the turns that miss by over 60 ms
	for i, ic := range independentCalls {
		c, truth := ic.build(t, cl, awkward)
		ogg := ic.encode(t, cl.dir, i, c)
		res := analyzeFile(t, ogg, Config{})
		m, x, e := all.add(res, truth)
		worst := 0.0
		for _, v := range e {
			worst = max(worst, v)
		}
		t.Logf("independent %d %s %.0f dB, bleed -%.0f dB %d ms, user %s/%s agent %s/%s: %s turns %d/%d extra %d max err %.0f ms; "+
			"talk-over %d (%d) awkward %d (%d) back-channels %d (%d), user_snr_db %.1f", i, ic.noise, ic.snr, ic.bleedDB, ic.delayMs,
			ic.user.engine, ic.user.name, ic.agent.engine, ic.agent.name, res.Refused, m, len(truth.turns), x, worst,
			res.Metrics.TalkOverCount, truth.talkOver, res.Metrics.AwkwardSilenceCount, truth.awkward, res.Metrics.BackchannelCount,
			truth.backchannels, res.Metrics.UserSNRDB)
	}
	t.Logf("independent: %s", &all)
	all.checkGoals(t)
}

// independentCall is one call of the second recipe.
type independentCall struct {
	noise        string  // sox synth's arguments: whitenoise, pinknoise, brownnoise, or a sine and effects
	snr, bleedDB float64 // dB
	delayMs      int
	user, agent  voice
	// gaps: the agent's answer to each user turn starts this long after the
	// user ends (negative: talk-over); 0 marks the turn the next user turn
	// barges into, 1.2 s into the answer, the agent yielding 300 ms later.
	gaps []int
}

var independentCalls = []independentCall{
	{"pinknoise", 30, 40, 60, voice{"espeak-ng", "en-us+f4", 170}, voice{"festival", "kal_diphone", 100}, []int{700, -300, 2700, 0, 500, 1100}},
	{"brownnoise", 25, 35, 40, voice{"festival", "kal_diphone", 100}, voice{"espeak-ng", "en-gb+m2", 160}, []int{900, 2600, -250, 400, 0, 1300}},
	{"pinknoise", 22, 45, 80, voice{"espeak-ng", "en-gb+f4", 150}, voice{"espeak-ng", "en-us+m3", 175}, []int{-400, 800, 0, 3000, 600, 1500}},
	{"whitenoise", 18, 38, 100, voice{"espeak-ng", "en-us+m2", 165}, voice{"festival", "kal_diphone", 100}, []int{500, 0, 1200, -200, 2800, 700}},
	{"brownnoise", 16, 50, 30, voice{"espeak-ng", "en-gb+f1", 180}, voice{"espeak-ng", "en-us+f2", 160}, []int{1000, 300, 0, 2500, -350, 900}},
	{"whitenoise", 27, 32, 120, voice{"festival", "kal_diphone", 100}, voice{"espeak-ng", "en-gb+f3", 170}, []int{600, 0, -300, 1400, 2900, 450}},
	// A mains hum as a saturated transformer gives it: sox's sine through its
	// overdrive effect, harmonics reaching well into the speech band.
	{"sine 50 overdrive 10", 22, 42, 70, voice{"espeak-ng", "en-us+f5", 165}, voice{"festival", "kal_diphone", 100}, []int{800, -300, 0, 2600, 500, 1200}},
	{"sine 60 overdrive 20", 16, 36, 50, voice{"espeak-ng", "en-gb+m5", 155}, voice{"espeak-ng", "en-us+m6", 160}, []int{1100, 0, 400, -250, 2700, 900}},
}

var (
	indUser = []string{"Good morning, I am calling about my internet bill.", "It went up by twenty dollars this month.",
		"I never ordered the sports package.", "Could you remove it from my account?", "Will I get a refund for this month?",
		"Great, please email me the new bill."}
	indAgent = []string{"Good morning! I can help with your bill today.", "I see a new charge for the sports package from the fifth.",
		"I understand. It was added during a promotion that has now ended.", "Done, the sports package is removed from your plan.",
		"Yes, a refund of twenty dollars will appear on your next statement.", "I have emailed the updated bill. Anything else?"}
	indBack = []string{"mhm", "yes", "sure"}
)

// build places the call's script and returns its truth.
func (ic independentCall) build(t *testing.T, cl *clips, awkwardMs int64) (*call, gridTruth) {
	c := &call{}
	var truth gridTruth
	at := ms(700)
	yield := int64(300)
	barged := false
	for i, gap := range ic.gaps {
		useg := c.place(0, at, cl.say(t, ic.user, indUser[i]), 0)
		tr := Turn{UserStartMs: useg.StartMs, UserEndMs: useg.EndMs}
		if barged {
			tr.BargeIn, tr.YieldMs = true, yield
			barged = false
		}
		a := cl.say(t, ic.agent, indAgent[i])
		if gap == 0 { // the next user turn barges in
			astart := int(useg.EndMs+600) * 48
			barge := astart + ms(1200)
			tr.AgentStartMs = c.place(1, astart, a, barge+int(yield)*48-astart).StartMs
			truth.turns = append(truth.turns, tr)
			at, barged = barge, true
			continue
		}
		switch {
		case gap < 0:
			truth.talkOver++
		case int64(gap) > awkwardMs:
			truth.awkward++
		}
		aseg := c.place(1, int(useg.EndMs+int64(gap))*48, a, 0)
		tr.AgentStartMs = aseg.StartMs
		if i%2 == 1 && aseg.EndMs-aseg.StartMs > 2500 { // a back-channel 1.2 s into the answer
			if b := cl.say(t, ic.user, indBack[i%len(indBack)]); len(b) < ms(800) {
				c.place(0, int(aseg.StartMs+1200)*48, b, 0)
				truth.backchannels++
			}
		}
		truth.turns = append(truth.turns, tr)
		at = int(aseg.EndMs)*48 + ms(700+150*i)
	}
	for i := range truth.turns {
		truth.turns[i].HeardLatencyMs = truth.turns[i].AgentStartMs - truth.turns[i].UserEndMs
	}
	return c, truth
}

// encode mixes sox's noise at the call's SNR (against the user's speaking
// frames) and the agent through a room into the user's microphone, and
// encodes at 96 kb/s.
func (ic independentCall) encode(t *testing.T, dir string, i int, c *call) string {
	t.Helper()
	n := max(len(c.ch[0]), len(c.ch[1])) + ms(800)
	for ch := range 2 {
		c.ch[ch] = append(c.ch[ch], make([]float32, n-len(c.ch[ch]))...)
	}
	noise := soxNoise(t, dir, ic.noise, n)
	// The speech level: the mean power of the user's 10 ms frames within
	// 40 dB of the loudest one.
	var frames []float64
	for f := 0; (f+1)*480 <= n; f++ {
		var e float64
		for _, v := range c.ch[0][f*480 : (f+1)*480] {
			e += float64(v) * float64(v)
		}
		frames = append(frames, e/480)
	}
	loudest := 0.0
	for _, e := range frames {
		loudest = max(loudest, e)
	}
	var sp, np float64
	var cnt int
	for _, e := range frames {
		if e > loudest*1e-4 {
			sp += e
			cnt++
		}
	}
	for _, v := range noise {
		np += v * v
	}
	gain := math.Sqrt(sp/float64(max(cnt, 1))/(np/float64(n))) * math.Pow(10, -ic.snr/20)
	bleed := math.Pow(10, -ic.bleedDB/20)
	taps := []struct {
		ms   int
		gain float64
	}{{ic.delayMs, 1}, {ic.delayMs + 7, 0.5}, {ic.delayMs + 19, 0.25}}
	l := make([]float32, n)
	for s := range n {
		mic := float64(c.ch[0][s]) + gain*noise[s]
		for _, tp := range taps {
			if j := s - ms(tp.ms); j >= 0 {
				mic += bleed * tp.gain * float64(c.ch[1][j])
			}
		}
		l[s] = float32(mic)
	}
	return opusEncode(t, dir, fmt.Sprintf("ind%d", i), l, c.ch[1], "96")
}

// soxNoise is n samples of sox's own noise generator (repeatable with -R).
func soxNoise(t *testing.T, dir, kind string, n int) []float64 {
	t.Helper()
	path := filepath.Join(dir, strings.ReplaceAll(kind, " ", "_")+".f32")
	secs := fmt.Sprintf("%.3f", float64(n)/48000+0.1)
	args := append([]string{"-R", "-n", "-r", "48000", "-c", "1", "-e", "floating-point", "-b", "32", path, "synth", secs}, strings.Fields(kind)...)
	if out, err := exec.Command("sox", args...).CombinedOutput(); err != nil {
		t.Fatalf("sox synth %s: %v: %s", kind, err, out)
	}
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	out := make([]float64, n)
	for i := range out {
		out[i] = float64(math.Float32frombits(binary.LittleEndian.Uint32(raw[4*i:])))
	}
	return out
}
