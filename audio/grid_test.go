package audio

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"maps"
	"math"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/lkscore/lkscore/internal/testenv"
)

// The evaluation grid: calls generated with known truth under conditions
// the detector was not built around (docs/audio.md, "Evaluation grid").
// Each call is seeded: its voices (espeak-ng variants and flite), speaking
// rates, noise colour (white, pink, brown, mains hum at 50 or 60 Hz with
// harmonics), SNR 15–35 dB, the agent bleeding into the user's microphone
// −55 to −30 dB down and 20–120 ms late, an AGC-like ±6 dB drift of the user
// microphone, a DC offset, and a script of turns with normal, slow and
// awkward gaps, talk-over, back-channels, barge-ins and mid-sentence pauses
// that do not yield the turn. Truth is sample-exact.
//
// go test ./audio -run TestGrid runs the CI subset (seeds 0 and 3 mod 6);
// -grid all runs all of them (tools/audio-grid.sh). Calls whose seed is 3
// mod 4 are held out: never looked at while tuning, reported apart.
var gridFlag = flag.String("grid", "ci", "audio evaluation grid: ci (a subset) or all")

// gridCalls: the first opusencCalls are encoded by opusenc (64 kb/s, 20 ms
// frames); the rest by the agents-js SDK's RecorderIO (its ffmpeg, libopus
// at ffmpeg's default rate), as a real upload from that SDK has them.
const (
	gridCalls    = 56
	opusencCalls = 48
)

// voice is one synthesizer setting.
type voice struct {
	engine, name string
	rate         int // words per minute (espeak-ng) or duration stretch ×100 (flite)
}

var (
	userVoices = []voice{{"espeak-ng", "en-us", 160}, {"espeak-ng", "en-us+f3", 175}, {"espeak-ng", "en-gb-scotland", 145},
		{"flite", "slt", 100}, {"flite", "rms", 110}, {"espeak-ng", "en-029+m3", 190}}
	agentVoices = []voice{{"espeak-ng", "en-gb", 170}, {"flite", "kal", 100}, {"flite", "awb", 95}, {"espeak-ng", "en-gb-x-rp+f2", 165},
		{"espeak-ng", "en-us+m7", 150}}
)

// gridCond is one call's conditions.
type gridCond struct {
	Seed          int
	Noise         string
	SNR           float64
	BleedDB       float64 // the agent on the user's microphone, dB below the agent
	BleedDelayMs  int
	DriftDB       float64 // the user microphone's slow gain swing, ± dB
	DC            float64
	User, Agent   voice
	HeldOut       bool
	NoiseOnAgent  bool // the agent channel gets a little noise too (as a real call)
	AgentLevelsDB float64
	Encoder       string // opusenc or recorderio
}

func gridConditions() []gridCond {
	noises := []string{"white", "pink", "brown", "hum50", "hum60"}
	out := make([]gridCond, gridCalls)
	for i := range out {
		r := rand.New(rand.NewPCG(uint64(i), 0x67726964))
		out[i] = gridCond{Seed: i, Noise: noises[i%len(noises)], SNR: 15 + 20*r.Float64(),
			BleedDB: 30 + 25*r.Float64(), BleedDelayMs: 20 + r.IntN(101), DriftDB: 6 * r.Float64(), DC: 0.01 * r.Float64(),
			User: userVoices[r.IntN(len(userVoices))], Agent: agentVoices[r.IntN(len(agentVoices))], HeldOut: i%4 == 3,
			NoiseOnAgent: r.IntN(2) == 0, AgentLevelsDB: -6 * r.Float64(), Encoder: "opusenc"}
		if i >= opusencCalls {
			out[i].Encoder = "recorderio"
		}
	}
	return out
}

// gridClips is an empty clip cache for a test that generates grid calls;
// it skips the test under -short or when a tool is missing.
func gridClips(t *testing.T) *clips {
	t.Helper()
	if testing.Short() {
		t.Skip("-short: generates and analyses calls with espeak-ng, flite and opusenc")
	}
	needGridTools(t)
	return &clips{dir: t.TempDir(), m: map[string][]float32{}}
}

func needGridTools(t testing.TB) {
	t.Helper()
	needTools(t)
	if _, err := exec.LookPath("flite"); err != nil {
		if os.Getenv("LKSCORE_REQUIRE_AUDIO_TOOLS") != "" {
			t.Fatal("flite not found (apt-get install flite)")
		}
		t.Skip("SKIPPING: flite not found; apt-get install flite")
	}
}

// clips renders and caches speech clips.
type clips struct {
	dir string
	mu  sync.Mutex
	m   map[string][]float32
}

func (c *clips) say(t testing.TB, v voice, text string) []float32 {
	t.Helper()
	key := fmt.Sprint(v, text)
	c.mu.Lock()
	defer c.mu.Unlock()
	if s, ok := c.m[key]; ok {
		return s
	}
	wav := filepath.Join(c.dir, fmt.Sprintf("clip%d.wav", len(c.m)))
	var cmd *exec.Cmd
	switch v.engine {
	case "flite":
		cmd = exec.Command("flite", "-voice", v.name, "--setf", fmt.Sprintf("duration_stretch=%.2f", float64(v.rate)/100), "-t", text, "-o", wav)
	case "festival":
		cmd = exec.Command("text2wave", "-eval", "(voice_"+v.name+")", "-o", wav)
		cmd.Stdin = strings.NewReader(text)
	default:
		cmd = exec.Command("espeak-ng", "-v", v.name, "-s", fmt.Sprint(v.rate), "-w", wav, text)
	}
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("%s: %v: %s", v.engine, err, out)
	}
	s := trimQuiet(wavSamples(t, wav))
	// Every voice at the same peak, so SNR means the same for each.
	var peak float32
	for _, v := range s {
		peak = max(peak, float32(math.Abs(float64(v))))
	}
	for i := range s {
		s[i] *= 0.5 / peak
	}
	c.m[key] = s
	return s
}

// gridTruth is what a call holds, to compare the analysis with.
type gridTruth struct {
	turns        []Turn
	talkOver     int
	awkward      int
	backchannels int
}

var (
	userLines = []string{"Hi, I would like to move my booking to Friday.", "The dentist appointment on Tuesday morning.",
		"Two o'clock works for me.", "Is parking available there?", "How long will it take?", "Do I need to bring anything?",
		"Can you send it by email instead?", "That is all, thank you."}
	agentLines = []string{"Of course. Which booking would you like to move?", "Let me check that for you. Friday afternoon has two free slots.",
		"Great, I have booked Friday at two o'clock for you.", "Yes, there is free parking behind the building.",
		"About forty five minutes, sometimes a little less.", "Just your insurance card, please.", "Sure, I will send it by email right away.",
		"Wonderful. Have a great day!"}
	backchannels = []string{"uh huh", "mm hm", "okay", "right"}
)

// gridCall lays out one call's script from its seed: eight turns, each
// with a gap drawn from normal (300–1500 ms), slow (1500–1800 ms), awkward
// (awkwardMs + 500–1500 ms) or talk-over (the agent 200–500 ms early); a
// quarter of the user turns pause 300–600 ms mid-sentence without yielding;
// back-channels inside some answers; one barge-in, where the agent yields
// 200–400 ms after the user starts.
func gridCall(t testing.TB, cl *clips, cond gridCond, awkwardMs int64) (*call, gridTruth) {
	r := rand.New(rand.NewPCG(uint64(cond.Seed), 0x63616c6c))
	c := &call{}
	var truth gridTruth
	at := ms(400 + r.IntN(600))
	bargeAt := 2 + r.IntN(5) // the user turn that barges in
	var yield int64
	for i := range 8 {
		u := cl.say(t, cond.User, userLines[(i+cond.Seed)%len(userLines)])
		var useg Segment
		if r.IntN(4) == 0 && len(u) > ms(900) { // a pause mid-sentence, the turn kept
			cut := len(u) / 2
			first := c.place(0, at, u[:cut], 0)
			second := c.place(0, at+cut+ms(300+r.IntN(301)), u[cut:], 0)
			useg = Segment{StartMs: first.StartMs, EndMs: second.EndMs}
			c.truth[0] = append(c.truth[0][:len(c.truth[0])-2], useg)
		} else {
			useg = c.place(0, at, u, 0)
		}
		tr := Turn{UserStartMs: useg.StartMs, UserEndMs: useg.EndMs}
		if i == bargeAt {
			tr.BargeIn, tr.YieldMs = true, yield
		}
		var gap int64
		switch k := r.IntN(10); {
		case k < 5:
			gap = int64(300 + r.IntN(1201))
		case k < 7:
			gap = int64(1500 + r.IntN(301))
		case k < 8:
			gap = awkwardMs + 500 + int64(r.IntN(1001))
			truth.awkward++
		default:
			gap = -int64(200 + r.IntN(301))
			truth.talkOver++
		}
		a := cl.say(t, cond.Agent, agentLines[(i+2*cond.Seed)%len(agentLines)])
		astart := int(useg.EndMs+gap) * 48
		if i+1 == bargeAt { // the next user turn barges in 1–2 s into this answer
			barge := astart + ms(1000+r.IntN(1001))
			yield = int64(200 + r.IntN(201))
			tr.AgentStartMs = c.place(1, astart, a, barge+int(yield)*48-astart).StartMs
			truth.turns = append(truth.turns, tr)
			at = barge
			continue
		}
		aseg := c.place(1, astart, a, 0)
		tr.AgentStartMs = aseg.StartMs
		if r.IntN(3) == 0 && aseg.EndMs-aseg.StartMs > 2500 { // a back-channel inside the answer
			if b := cl.say(t, cond.User, backchannels[r.IntN(len(backchannels))]); len(b) < ms(800) {
				c.place(0, int(aseg.StartMs+1000)*48, b, 0)
				truth.backchannels++
			}
		}
		truth.turns = append(truth.turns, tr)
		at = int(aseg.EndMs)*48 + ms(600+r.IntN(900))
	}
	for i := range truth.turns {
		truth.turns[i].HeardLatencyMs = truth.turns[i].AgentStartMs - truth.turns[i].UserEndMs
	}
	return c, truth
}

// noise returns n samples of the condition's noise at unit RMS.
func gridNoise(kind string, n int, seed uint64) []float64 {
	r := rand.New(rand.NewPCG(seed, 0x6e6f6973))
	out := make([]float64, n)
	switch kind {
	case "white":
		for i := range out {
			out[i] = r.NormFloat64()
		}
	case "pink": // Paul Kellet's economy filter
		var b0, b1, b2 float64
		for i := range out {
			w := r.NormFloat64()
			b0 = 0.99765*b0 + w*0.0990460
			b1 = 0.96300*b1 + w*0.2965164
			b2 = 0.57000*b2 + w*1.0526913
			out[i] = b0 + b1 + b2 + w*0.1848
		}
	case "brown":
		var v float64
		for i := range out {
			v = 0.9995*v + r.NormFloat64()
			out[i] = v
		}
	case "hum50", "hum60":
		f := 50.0
		if kind == "hum60" {
			f = 60
		}
		for i := range out {
			tt := float64(i) / 48000
			for k := 1; k <= 5; k++ {
				out[i] += math.Sin(2*math.Pi*f*float64(k)*tt+float64(k)) / float64(k)
			}
			out[i] += 0.1 * r.NormFloat64()
		}
	}
	var sum float64
	for _, v := range out {
		sum += v * v
	}
	rms := math.Sqrt(sum / float64(n))
	for i := range out {
		out[i] /= rms
	}
	return out
}

// encodeGrid mixes the call under cond and encodes it as a real upload has
// it (opusenc, 64 kb/s, 20 ms frames).
func encodeGrid(t testing.TB, dir string, c *call, cond gridCond) string {
	t.Helper()
	n := max(len(c.ch[0]), len(c.ch[1])) + ms(800)
	for ch := range 2 {
		c.ch[ch] = append(c.ch[ch], make([]float32, n-len(c.ch[ch]))...)
	}
	noise := micNoise(c, cond)
	agentNoise := gridNoise("pink", n, uint64(cond.Seed)+1000)
	bleed := math.Pow(10, -cond.BleedDB/20)
	delay := ms(cond.BleedDelayMs)
	agentGain := math.Pow(10, cond.AgentLevelsDB/20)
	period := 20 + float64(cond.Seed%20) // seconds
	l, r := make([]float32, n), make([]float32, n)
	for i := range n {
		tt := float64(i) / 48000
		gain := math.Pow(10, cond.DriftDB*math.Sin(2*math.Pi*tt/period)/20)
		mic := float64(c.ch[0][i]) + noise[i]
		if j := i - delay; j >= 0 {
			mic += bleed * agentGain * float64(c.ch[1][j])
		}
		l[i] = float32(gain*mic + cond.DC)
		rr := agentGain * float64(c.ch[1][i])
		if cond.NoiseOnAgent {
			rr += 0.0005 * agentNoise[i]
		}
		r[i] = float32(rr)
	}
	name := fmt.Sprintf("grid%d", cond.Seed)
	if cond.Encoder != "recorderio" {
		return opusEncode(t, dir, name, l, r, "64")
	}
	raw, ogg := filepath.Join(dir, name+".f32"), filepath.Join(dir, name+".ogg")
	writeStereo(t, raw, l, r)
	defer os.Remove(raw)
	js, node := testenv.AgentsJS(t)
	cmd := exec.Command(node, filepath.Join(js, "recorder-encode.mjs"), raw, ogg)
	cmd.Dir = js
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("agents-js RecorderIO encode: %v: %s", err, out)
	}
	return ogg
}

// micNoise is the noise on the user's microphone: cond.SNR under the
// user's speech (the RMS of its samples above -40 dBFS).
func micNoise(c *call, cond gridCond) []float64 {
	var sum float64
	var cnt int
	for _, v := range c.ch[0] {
		if loud(v) {
			sum += float64(v) * float64(v)
			cnt++
		}
	}
	noise := gridNoise(cond.Noise, len(c.ch[0]), uint64(cond.Seed))
	nl := math.Sqrt(sum/float64(max(cnt, 1))) * math.Pow(10, -cond.SNR/20)
	for i := range noise {
		noise[i] *= nl
	}
	return noise
}

// audibleTruth is truth with each user turn ending where the voice sinks
// under the microphone's noise for good: the end of the turn's last 10 ms
// frame where the voice alone is at least as loud as the noise around
// the end (its mean over ±250 ms), both measured in the detector's band
// (200 Hz–4 kHz), voice and hiss as bandFrames gives them. The strict
// truth ends at the voice's last sample above -40 dBFS, which under white
// or pink noise at 15–20 dB can be 60–90 ms of breath several dB under the
// noise (docs/audio.md, "The max error"). A second view, reported beside
// the strict one and never in its place.
func audibleTruth(voice, hiss []float64, truth gridTruth) gridTruth {
	out := truth
	out.turns = slices.Clone(truth.turns)
	for i, tr := range out.turns {
		first, last := int(tr.UserStartMs/frameMs), min(int(tr.UserEndMs/frameMs), len(voice)-1)
		var ref float64
		lo, hi := max(last-25, 0), min(last+25, len(hiss)-1)
		for f := lo; f <= hi; f++ {
			ref += hiss[f]
		}
		ref /= float64(hi - lo + 1)
		for f := last; f >= first; f-- {
			if voice[f] >= ref {
				out.turns[i].UserEndMs = min(tr.UserEndMs, int64(f+1)*frameMs)
				break
			}
		}
		out.turns[i].HeardLatencyMs = out.turns[i].AgentStartMs - out.turns[i].UserEndMs
	}
	return out
}

// missed is a user end the analysis put over 60 ms early: how loud the
// voice it left out is against the microphone's noise in the detector's
// whole band (dB), and how far that voice lifts the frames of the
// detector's band where it lifts them most (lift, in standard deviations
// of that band's noise from frame to frame: a frame rule that follows a
// fading end only above the noise's own flicker cannot hear a lift of a
// standard deviation or two).
type missed struct {
	db, lift float64
}

// missedVoice measures the user ends over 60 ms early; voice and hiss are
// bandFrames of the user's voice and of the microphone's noise, the bands
// are computed from user and noise (the samples) only when an end is early.
func missedVoice(user []float32, noise, voice, hiss []float64, res *Result, truth gridTruth) []missed {
	var out []missed
	var vb, nb [nBands][]float64
	for _, tr := range truth.turns {
		for _, got := range res.Turns {
			d := tr.UserEndMs - got.UserEndMs
			if d <= 60 || d >= 500 {
				continue
			}
			if vb[0] == nil {
				for b := range nBands {
					vb[b], nb[b] = partFrames(user, b), partFrames(noise, b)
				}
			}
			first, last := int(got.UserEndMs/frameMs), min(int(tr.UserEndMs/frameMs), len(voice))
			var v, n float64
			for f := first; f < last; f++ {
				v, n = v+voice[f], n+hiss[f]
			}
			m := missed{db: 10 * math.Log10(v/n)}
			for b := range nBands {
				var lift float64
				for f := first; f < last; f++ {
					lift += 10 * math.Log10((vb[b][f]+nb[b][f])/nb[b][f])
				}
				m.lift = max(m.lift, lift/float64(last-first)/dbSpread(nb[b]))
			}
			out = append(out, m)
		}
	}
	return out
}

// partFrames is the mean power of x in the detector's band part b, per 10 ms frame.
func partFrames[T float32 | float64](x []T, b int) []float64 {
	f := newBand(b)
	return filteredFrames(x, newHighPass(highPassHz, sampleRate), newLowPass(lowPassHz, sampleRate), f[0], f[1])
}

// dbSpread is the standard deviation of the frames' levels (dB).
func dbSpread(p []float64) float64 {
	var m, m2 float64
	for _, v := range p {
		l := 10 * math.Log10(v)
		m, m2 = m+l, m2+l*l
	}
	m /= float64(len(p))
	return math.Sqrt(max(m2/float64(len(p))-m*m, 1e-9))
}

// bandFrames is the mean power of x in the detector's band, per 10 ms frame.
func bandFrames[T float32 | float64](x []T) []float64 {
	return filteredFrames(x, newHighPass(highPassHz, sampleRate), newLowPass(lowPassHz, sampleRate))
}

// filteredFrames is the mean power of x through the filters in turn, per
// 10 ms frame; never 0, so that its decibels are a number.
func filteredFrames[T float32 | float64](x []T, filters ...biquad) []float64 {
	out := make([]float64, 0, len(x)/frameSamples)
	var acc float64
	for i, v := range x {
		y := float64(v)
		for k := range filters {
			y = filters[k].filter(y)
		}
		acc += y * y
		if (i+1)%frameSamples == 0 {
			out = append(out, acc/frameSamples+1e-20)
			acc = 0
		}
	}
	return out
}

// gridScore is the grid's tally, for a set of calls.
type gridScore struct {
	calls, refused            int
	trueTurns, matched, extra int
	errs                      []float64
	countsExact, countCalls   int
	backFound, backTrue       int
	verbose                   func(format string, args ...any) // logs the turns that miss by over 60 ms
}

func (g *gridScore) add(res *Result, truth gridTruth) (matched, extra int, e []float64) {
	g.calls++
	if res.Refused != "" {
		g.refused++
		return 0, 0, nil
	}
	g.trueTurns += len(truth.turns)
	used := make([]bool, len(res.Turns))
	for _, w := range truth.turns {
		best, bestD := -1, int64(501)
		for j, got := range res.Turns {
			if d := abs64(got.UserEndMs - w.UserEndMs); !used[j] && d < bestD {
				best, bestD = j, d
			}
		}
		if best < 0 {
			continue
		}
		used[best] = true
		matched++
		e = append(e, math.Abs(float64(res.Turns[best].HeardLatencyMs-w.HeardLatencyMs)))
		if g.verbose != nil && e[len(e)-1] > 60 {
			g.verbose("  turn: got %+v, truth %+v", res.Turns[best], w)
		}
	}
	extra = len(res.Turns) - matched
	g.matched += matched
	g.extra += extra
	g.errs = append(g.errs, e...)
	g.countCalls++
	if res.Metrics.TalkOverCount == truth.talkOver && res.Metrics.AwkwardSilenceCount == truth.awkward {
		g.countsExact++
	}
	g.backTrue += truth.backchannels
	g.backFound += min(res.Metrics.BackchannelCount, truth.backchannels)
	return matched, extra, e
}

func abs64(v int64) int64 {
	if v < 0 {
		return -v
	}
	return v
}

func (g *gridScore) String() string {
	slices.Sort(g.errs)
	p50, p95, worst := math.NaN(), math.NaN(), math.NaN()
	if len(g.errs) > 0 {
		p50, p95, worst = g.errs[len(g.errs)/2], g.errs[len(g.errs)*95/100], g.errs[len(g.errs)-1]
	}
	within := 0
	for _, e := range g.errs {
		if e <= 60 {
			within++
		}
	}
	return fmt.Sprintf("%d calls (%d refused): turns matched %d/%d (%.1f%%), extra %d (%.1f%%), heard-latency |error| p50 %.0f ms p95 %.0f ms max %.0f ms (≤ 60 ms: %.1f%%), "+
		"talk-over and awkward counts exact on %d/%d calls, back-channels %d/%d", g.calls, g.refused, g.matched, g.trueTurns,
		100*float64(g.matched)/float64(max(g.trueTurns, 1)), g.extra, 100*float64(g.extra)/float64(max(g.trueTurns, 1)), p50, p95, worst,
		100*float64(within)/float64(max(len(g.errs), 1)),
		g.countsExact, g.countCalls, g.backFound, g.backTrue)
}

func (g *gridScore) merge(o *gridScore) {
	g.calls += o.calls
	g.refused += o.refused
	g.trueTurns += o.trueTurns
	g.matched += o.matched
	g.extra += o.extra
	g.errs = append(g.errs, o.errs...)
	g.countsExact += o.countsExact
	g.countCalls += o.countCalls
	g.backFound += o.backFound
	g.backTrue += o.backTrue
}

func (g *gridScore) matchedShare() float64 { return float64(g.matched) / float64(max(g.trueTurns, 1)) }

// TestGrid runs the evaluation grid (the CI subset unless -grid all) and
// fails when the detector does worse than the floor it is known to reach
// (gridFloor): a guard, not the goal, which docs/audio.md states.
func TestGrid(t *testing.T) {
	cl := gridClips(t)
	awkward := int64(DefaultConfig().AwkwardSilenceMs)
	tuning, heldOut := gridScore{verbose: t.Logf}, gridScore{verbose: t.Logf}
	early := map[string][]missed{} // by noise colour: the voice the early user ends leave out
	asHeard := gridScore{verbose: func(f string, args ...any) { t.Logf("  as heard"+f, args...) }}
	js, _ := testenv.AgentsJS(t)
	haveJS := js != ""
	groups := map[string]*gridScore{} // by noise colour, SNR band and encoder
	for _, cond := range gridConditions() {
		if *gridFlag != "all" && cond.Seed%6 != 0 && cond.Seed%6 != 3 { // the CI subset: 19 calls, 5 of them held out, 3 RecorderIO
			continue
		}
		if cond.Encoder == "recorderio" && !haveJS {
			t.Logf("call %2d SKIPPED: the agents-js SDK is not installed (npm ci in consumer/testdata/agents-js)", cond.Seed)
			continue
		}
		c, truth := gridCall(t, cl, cond, awkward)
		ogg := encodeGrid(t, cl.dir, c, cond)
		res := analyzeFile(t, ogg, Config{})
		set := &tuning
		if cond.HeldOut {
			set = &heldOut
		}
		m, x, e := set.add(res, truth)
		noise := micNoise(c, cond)
		voice, hiss := bandFrames(c.ch[0]), bandFrames(noise)
		asHeard.add(res, audibleTruth(voice, hiss, truth))
		early[cond.Noise] = append(early[cond.Noise], missedVoice(c.ch[0], noise, voice, hiss, res, truth)...)
		lo := 15 + 5*min(int(cond.SNR-15)/5, 3)
		for _, k := range []string{"noise " + cond.Noise, fmt.Sprintf("snr %d-%d dB", lo, lo+5), "encoder " + cond.Encoder} {
			if groups[k] == nil {
				groups[k] = &gridScore{}
			}
			groups[k].add(res, truth)
		}
		slices.Sort(e)
		worst := 0.0
		if len(e) > 0 {
			worst = e[len(e)-1]
		}
		t.Logf("call %2d %-5s snr %4.1f bleed -%4.1f dB %3d ms drift ±%.1f dc %.3f user %s/%s agent %s/%s %s: %s turns %d/%d extra %d max err %.0f ms; "+
			"talk-over %d (%d) awkward %d (%d) back-channels %d (%d)", cond.Seed, cond.Noise, cond.SNR, cond.BleedDB, cond.BleedDelayMs,
			cond.DriftDB, cond.DC, cond.User.engine, cond.User.name, cond.Agent.engine, cond.Agent.name, cond.Encoder, res.Refused, m, len(truth.turns), x, worst,
			res.Metrics.TalkOverCount, truth.talkOver, res.Metrics.AwkwardSilenceCount, truth.awkward, res.Metrics.BackchannelCount, truth.backchannels)
		_ = os.Remove(ogg)
	}
	t.Logf("tuning:   %s", &tuning)
	t.Logf("held out: %s", &heldOut)
	var all gridScore
	all.merge(&tuning)
	all.merge(&heldOut)
	t.Logf("all:      %s", &all)
	t.Logf("as heard: %s (user ends where the voice sinks under the microphone's noise)", &asHeard)
	var faint, ends int
	for _, k := range slices.Sorted(maps.Keys(early)) {
		m := early[k]
		if len(m) == 0 {
			continue
		}
		db, lift := make([]float64, len(m)), make([]float64, len(m))
		for i, x := range m {
			db[i], lift[i] = x.db, x.lift
			if x.lift < 2 {
				faint++
			}
		}
		ends += len(m)
		slices.Sort(db)
		slices.Sort(lift)
		t.Logf("%-5s: %d user ends over 60 ms early; the voice they leave out, against the noise in the detector's band: median %+.1f dB, %+.1f to %+.1f; "+
			"in its best band it lifts the frames by %.1f to %.1f standard deviations of that band's noise", k, len(m), db[len(db)/2], db[0], db[len(db)-1], lift[0], lift[len(lift)-1])
	}
	t.Logf("%d of %d user ends over 60 ms early leave out a voice that lifts no band of the detector by 2 standard deviations of its noise", faint, ends)
	for _, k := range slices.Sorted(maps.Keys(groups)) {
		t.Logf("%-18s %s", k+":", groups[k])
	}
	all.checkGoals(t)
}

// checkGoals fails t where the calls miss the goals that the
// detector meets (docs/audio.md): the max error goal (60 ms) is not met yet
// and is reported, not checked. Every call here is above the detector's
// floor, so none may be refused.
func (g *gridScore) checkGoals(t *testing.T) {
	t.Helper()
	if got := g.matchedShare(); got < 0.95 {
		t.Errorf("turns matched %.1f%%, want ≥ 95%%", 100*got)
	}
	if x := float64(g.extra) / float64(max(g.trueTurns, 1)); x > 0.05 {
		t.Errorf("extra turns %.1f%% of true turns, want ≤ 5%%", 100*x)
	}
	errs := slices.Sorted(slices.Values(g.errs))
	if len(errs) == 0 || errs[len(errs)/2] > 20 {
		t.Errorf("heard-latency |error| p50 over 20 ms (or no turns): %v", errs)
	}
	if float64(g.countsExact) < 0.9*float64(g.countCalls) {
		t.Errorf("talk-over and awkward counts exact on %d of %d calls, want ≥ 90%%", g.countsExact, g.countCalls)
	}
	if float64(g.backFound) < 0.8*float64(g.backTrue) {
		t.Errorf("back-channels found %d of %d, want ≥ 80%%", g.backFound, g.backTrue)
	}
	if g.refused > 0 {
		t.Errorf("%d calls refused: every call here is above the detector's floor", g.refused)
	}
}

// TestGridDeterministic: the same file gives the same result, byte for byte.
func TestGridDeterministic(t *testing.T) {
	cl := gridClips(t)
	cond := gridConditions()[7]
	c, _ := gridCall(t, cl, cond, int64(DefaultConfig().AwkwardSilenceMs))
	ogg := encodeGrid(t, cl.dir, c, cond)
	var out [2][]byte
	for i := range out {
		var err error
		if out[i], err = json.Marshal(analyzeFile(t, ogg, Config{})); err != nil {
			t.Fatal(err)
		}
	}
	if !bytes.Equal(out[0], out[1]) || len(out[0]) < 100 {
		t.Errorf("two analyses of one file differ:\n%s\n%s", out[0], out[1])
	}
}

// TestGridFloor sweeps the grid's calls below and across its SNR range
// (docs/audio.md, "Where it stops"): per SNR, the user SNR the detector
// estimates, how it does when made to measure anyway, and what it refuses
// at its stated floor. -grid all sweeps every noise colour with 12 calls
// per SNR; the CI subset one call per colour at three SNRs.
func TestGridFloor(t *testing.T) {
	cl := gridClips(t)
	awkward := int64(DefaultConfig().AwkwardSilenceMs)
	snrs, perSNR := []float64{0, 3, 6, 9, 12, 15, 20}, 12
	if *gridFlag != "all" {
		snrs, perSNR = []float64{3, 9, 15}, 5
	}
	conds := gridConditions()
	tooNoisy := 0
	for _, snr := range snrs {
		var forced, stated gridScore
		var ests []float64
		for k := range perSNR {
			cond := conds[(k*7+int(snr))%opusencCalls] // a spread of seeds, every colour
			cond.SNR = snr
			c, truth := gridCall(t, cl, cond, awkward)
			ogg := encodeGrid(t, cl.dir, c, cond)
			res := analyzeFile(t, ogg, Config{MinSNRDB: -100})
			m, x, e := forced.add(res, truth)
			ests = append(ests, res.Metrics.UserSNRDB)
			st := analyzeFile(t, ogg, Config{})
			stated.add(st, truth)
			slices.Sort(e)
			worst := 0.0
			if len(e) > 0 {
				worst = e[len(e)-1]
			}
			t.Logf("snr %4.1f call %2d %-5s: estimated %5.1f dB, refused %q at the floor; measured anyway: %q turns %d/%d extra %d max err %.0f ms",
				snr, cond.Seed, cond.Noise, res.Metrics.UserSNRDB, st.Refused, res.Refused, m, len(truth.turns), x, worst)
			floor := DefaultConfig().MinSNRDB
			switch {
			case res.Metrics.UserSNRDB < floor && st.Refused != "too_noisy":
				t.Errorf("snr %.0f call %d: estimated %.1f dB, under the %.0f dB floor, but refused %q, want too_noisy",
					snr, cond.Seed, res.Metrics.UserSNRDB, floor, st.Refused)
			case res.Metrics.UserSNRDB >= floor && st.Refused == "too_noisy":
				t.Errorf("snr %.0f call %d: estimated %.1f dB, over the floor, refused too_noisy", snr, cond.Seed, res.Metrics.UserSNRDB)
			case snr >= 15 && st.Refused != "":
				t.Errorf("snr %.0f call %d (inside the grid's range): refused %q: %s", snr, cond.Seed, st.Refused, st.Reason)
			}
			if st.Refused == "too_noisy" {
				tooNoisy++
			}
			_ = os.Remove(ogg)
		}
		slices.Sort(ests)
		t.Logf("snr %4.1f: estimated %.1f–%.1f dB; measured anyway: %s", snr, ests[0], ests[len(ests)-1], &forced)
		t.Logf("snr %4.1f: at the stated floor: %s", snr, &stated)
	}
	if tooNoisy == 0 {
		t.Errorf("no call of the sweep down to %.0f dB was refused too_noisy", snrs[0])
	}
}
