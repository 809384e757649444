package audio

import (
	"errors"
	"fmt"
	"io"
	"math"
	"slices"
	"time"

	"github.com/pion/opus"

	"github.com/lkscore/lkscore/scoring"
	"github.com/lkscore/lkscore/session"
)

// Config tunes the analysis. Zero fields take DefaultConfig's values.
type Config struct {
	// ThresholdDB: a frame is speech when its energy is this far above the
	// channel's noise floor (the quietest frame of the last FloorWindow).
	ThresholdDB float64 `yaml:"threshold_db" json:"threshold_db"`
	// MinLevelDB: never speech below this level (dBFS).
	MinLevelDB float64 `yaml:"min_level_db" json:"min_level_db"`
	// BleedMarginDB: frames where the agent is at least this much louder
	// than the user's channel estimate how strongly the agent bleeds into
	// the user's microphone (the cross-channel guard).
	BleedMarginDB float64 `yaml:"bleed_margin_db" json:"bleed_margin_db"`
	// MinSeparationDB: the agent must be at least this much quieter on the
	// user channel than on its own, else the recording is refused (the
	// channels leak into each other, as low-bitrate stereo does).
	MinSeparationDB float64 `yaml:"min_separation_db" json:"min_separation_db"`
	// MinSNRDB: the user's speech must stand at least this far above the
	// noise of the user's microphone (in the speech band), else the
	// recording is refused as too noisy rather than measured wrong.
	MinSNRDB float64 `yaml:"min_snr_db" json:"min_snr_db"`
	// MergeGapMs: pauses shorter than this stay inside one utterance.
	MergeGapMs int64 `yaml:"merge_gap_ms" json:"merge_gap_ms"`
	// MinSpeechMs: shorter bursts are noise.
	MinSpeechMs int64 `yaml:"min_speech_ms" json:"min_speech_ms"`
	// BackchannelMaxMs: a user utterance this short, inside an agent
	// utterance, is a back-channel ("mm-hm"), not a barge-in.
	BackchannelMaxMs int64 `yaml:"backchannel_max_ms" json:"backchannel_max_ms"`
	// AwkwardSilenceMs: a silence of nobody speaking longer than this.
	AwkwardSilenceMs int64 `yaml:"awkward_silence_ms" json:"awkward_silence_ms"`
	// MaxDuration: longer recordings are refused.
	MaxDuration time.Duration `yaml:"max_duration" json:"max_duration"`
}

// DefaultConfig is the documented default.
func DefaultConfig() Config {
	return Config{ThresholdDB: 4, MinLevelDB: -60, BleedMarginDB: 12, MinSeparationDB: 12, MinSNRDB: minSNRDB, MergeGapMs: 500,
		MinSpeechMs: 100, BackchannelMaxMs: 1000, AwkwardSilenceMs: 2000, MaxDuration: 4 * time.Hour}
}

// ForScoring is the analysis the scoring config asks for: its awkward
// silence threshold is part of the scoring version, so the same recording
// always gets the same findings under one scoring version.
func ForScoring(c scoring.AudioConfig, maxDuration time.Duration) Config {
	return Config{AwkwardSilenceMs: int64(c.AwkwardSilenceMs), MaxDuration: maxDuration}
}

func (c Config) withDefaults() Config {
	d := DefaultConfig()
	for _, f := range []struct{ v, d *float64 }{{&c.ThresholdDB, &d.ThresholdDB}, {&c.MinLevelDB, &d.MinLevelDB},
		{&c.BleedMarginDB, &d.BleedMarginDB}, {&c.MinSeparationDB, &d.MinSeparationDB}, {&c.MinSNRDB, &d.MinSNRDB}} {
		if *f.v == 0 {
			*f.v = *f.d
		}
	}
	for _, f := range []struct{ v, d *int64 }{{&c.MergeGapMs, &d.MergeGapMs}, {&c.MinSpeechMs, &d.MinSpeechMs},
		{&c.BackchannelMaxMs, &d.BackchannelMaxMs}, {&c.AwkwardSilenceMs, &d.AwkwardSilenceMs}} {
		if *f.v == 0 {
			*f.v = *f.d
		}
	}
	if c.MaxDuration == 0 {
		c.MaxDuration = d.MaxDuration
	}
	return c
}

// Segment is speech on one channel, in milliseconds from the start of the
// recording (after the encoder's pre-skip).
type Segment = session.AudioSegment

// Turn is a user utterance and the agent's answer as the caller heard it.
type Turn = session.AudioTurn

// Metrics summarize the call, named as LiveKit's conversation metrics
// where they exist; the scorecard's audio block carries the same type.
type Metrics = session.AudioMetrics

// Result is what Analyze measured, or why it refused to: the scorecard's
// audio block (session.Audio: refusal, segments per channel, turns, awkward
// silences, metrics) and the file's own figures.
type Result struct {
	session.Audio
	DurationMs int64 `json:"duration_ms"`
	Channels   int   `json:"channels"`
	PreSkip    int   `json:"pre_skip"`
}

const (
	sampleRate   = 48000
	frameSamples = sampleRate / 100 // 10 ms
	frameMs      = 10
	// floorFrames: the noise floor is a low percentile (floorPercentile) of
	// the last 4 s of frames: it follows noise that drifts (an AGC, a fan
	// starting) and sits in the noise rather than below it, as the quietest
	// frame would.
	floorFrames     = 300
	floorPercentile = 0.10
	histBins        = 360 // 0.5 dB bins from -150 to +30 dBFS
	// bleedHeadroomDB: how far above the agent's predicted bleed a user frame
	// must be to count as the user.
	bleedHeadroomDB = 3
	// bleedFrames: the agent's bleed reaches the user's microphone up to
	// this many frames late (a speaker and a room: 20–120 ms).
	bleedFrames = 15
	// onsetFrames: speech is at least this many active frames in a row.
	// Its end follows the fading voice above half the margin, frame after
	// frame with no gap (tailGapMs; noise near the floor flickers above and
	// below it), for at most tailMs, without keeping the utterance open.
	onsetFrames = 3
	tailMs      = 150
	tailGapMs   = 100
	// dynamicRangeDB: speech edges sit at most this far below the
	// speaker's loudest frame on the user's channel, agentDynamicRangeDB on
	// the agent's (a synthesized voice may open with a quiet click); an
	// utterance's fading end tailRangeDB further.
	dynamicRangeDB      = 35
	agentDynamicRangeDB = 50
	tailRangeDB         = 10
	// highPassHz: energy is measured above this: mains hum, rumble and the
	// low end of brown noise carry no speech the detector needs; on the
	// user's channel, below lowPassHz too (most of a white noise's power
	// lies above it).
	highPassHz = 200
	lowPassHz  = 4000
	// noiseAlpha: the noise level's moving average weighs the newest frame
	// this much (about half a second); noiseClip, noiseClipMinDB: how far
	// one frame may pull it; noiseSigmas: an utterance's fading end is this
	// many standard deviations above it.
	noiseAlpha     = 0.02
	noiseClip      = 2.5
	noiseClipMinDB = 3
	noiseSigmas    = 3
	// minSNRDB: the detector's floor (docs/audio.md, "Where it stops"); it
	// judges only after minSNRFrames (1 s) of speech and of quiet.
	minSNRDB     = 10
	minSNRFrames = 100
	// pairNoiseFrames: pairs of frames follow a fading end only after this
	// many (1 s) of their noise are learned; before, its spread is a guess.
	pairNoiseFrames = 100
	// nBands: the user's speech band is also measured in four parts
	// (200–400 Hz, 400 Hz–1 kHz, 1–2 kHz, 2–4 kHz), each against its own
	// noise: a fading voice that sinks under a noise in the whole band can
	// still stand out of it where the noise is weak and the voice is not
	// (a hum's harmonics crowd the low bands, a white noise the high ones).
	// A band follows a fading end bandSigmas standard deviations above
	// its noise: each band alone is narrower than the whole and its noise
	// flickers more, and its runs of two frames (followBands) keep the
	// flicker out (on the grid, 2 let it stretch ends 136–158 ms late;
	// 3 missed an end 2.5 did not).
	nBands     = 4
	bandSigmas = 2.5
	// The bleed guard's estimate of how much quieter the agent is on the
	// user's microphone: the bleedQuantile of the difference over at least
	// minBleedFrames frames where the agent is within loudAgentDB of its
	// loudest, and until there are that many, defaultSepDB (an echo
	// canceller's usual 30 dB).
	loudAgentDB    = 10
	minBleedFrames = 10
	defaultSepDB   = 30.0
	bleedQuantile  = 0.1
	// sepBins: level differences in 0.5 dB bins from −60 to +120 dB.
	sepBins = 360
)

// Analyze reads a stereo Ogg/Opus recording (user left, agent right) and
// measures it. A recording that cannot be measured is a Result with
// Refused set, not an error; the error is for reading r.
func Analyze(r io.Reader, cfg Config) (*Result, error) {
	cfg = cfg.withDefaults()
	res := &Result{}
	refuse := func(code string, err error) (*Result, error) {
		res.Refused, res.Reason = code, err.Error()
		return res, nil
	}
	og := newOggReader(r)
	p, _, _, err := og.nextPacket()
	if err != nil {
		return refuseOrFail(res, err)
	}
	head, err := parseOpusHead(p)
	if err != nil {
		return refuse("corrupt", err)
	}
	res.Channels, res.PreSkip = head.Channels, head.PreSkip
	switch {
	case head.Channels != 2:
		return refuse("not_stereo", fmt.Errorf("%d channel(s): the user and the agent need one each", head.Channels))
	case head.MappingFam != 0:
		return refuse("not_stereo", fmt.Errorf("channel mapping family %d: only plain stereo is supported", head.MappingFam))
	case head.InputRate > 384000:
		return refuse("sample_rate", fmt.Errorf("input sample rate %d Hz is not plausible", head.InputRate))
	}
	if p, _, _, err = og.nextPacket(); err != nil { // OpusTags
		return refuseOrFail(res, err)
	}
	dec, err := opus.NewDecoderWithOutput(sampleRate, 2)
	if err != nil {
		return nil, err
	}
	a := newAnalyzer(cfg)
	pcm := make([]float32, 2*5760)
	skip := head.PreSkip
	maxSamples := int64(cfg.MaxDuration.Seconds() * sampleRate)
	for {
		p, granule, last, err := og.nextPacket()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return refuseOrFail(res, err)
		}
		n, err := dec.DecodeToFloat32(p, pcm)
		if err != nil {
			return refuse("corrupt", fmt.Errorf("%w: opus packet at sample %d: %v", ErrCorrupt, a.samples, err))
		}
		s := pcm[:2*n]
		if skip > 0 {
			k := min(skip, n)
			s, skip = s[2*k:], skip-k
		}
		if last && granule > uint64(head.PreSkip) {
			// The final granule position says how many samples are real.
			if keep := int64(granule) - int64(head.PreSkip) - a.samples; keep >= 0 && keep < int64(len(s)/2) {
				s = s[:2*keep]
			}
		}
		a.add(s)
		if a.samples > maxSamples {
			return refuse("too_long", fmt.Errorf("longer than the %s limit", cfg.MaxDuration))
		}
		if last {
			break
		}
	}
	a.finish()
	return a.result(res), nil
}

// result fills in what the analysis measured, or the refusal its figures
// call for: too_noisy before channels_leak, since noise on the user's
// microphone also blurs how far apart the channels are.
func (a *analyzer) result(res *Result) *Result {
	cfg := a.cfg
	res.DurationMs = a.samples * 1000 / sampleRate
	res.UserSegments, res.AgentSegments = a.segs[0], a.segs[1]
	if sep := a.separation(); !math.IsInf(sep, 0) {
		res.Metrics.SeparationDB = round1(sep)
	}
	snr, known := a.userSNR()
	if known {
		res.Metrics.UserSNRDB = round1(snr)
	}
	switch {
	case known && snr < cfg.MinSNRDB:
		res.Refused, res.Reason = "too_noisy", fmt.Sprintf("the user's speech stands only %.1f dB above the noise of the user's microphone "+
			"(at least %.0f dB needed): turns found in it would be guesses", snr, cfg.MinSNRDB)
	case a.agentFrames > 50 && a.separation() < cfg.MinSeparationDB:
		res.Refused, res.Reason = "channels_leak", fmt.Sprintf("the agent is only %.1f dB quieter on the user channel than on its own "+
			"(at least %.0f dB needed): the channels carry the same signal, as low-bitrate stereo encodes them", a.separation(), cfg.MinSeparationDB)
	default:
		res.Turns, res.Silences, res.Metrics = turns(res.UserSegments, res.AgentSegments, cfg, res.Metrics)
	}
	return res
}

// refuseOrFail turns a structural problem into a refusal and passes a
// reader's own failure through.
func refuseOrFail(res *Result, err error) (*Result, error) {
	if errors.Is(err, io.EOF) {
		err = fmt.Errorf("%w: the file ends before its Opus headers", ErrCorrupt)
	}
	if errors.Is(err, ErrCorrupt) {
		res.Refused, res.Reason = "corrupt", err.Error()
		return res, nil
	}
	return nil, fmt.Errorf("read recording: %w", err)
}

func round1(v float64) float64 { return math.Round(v*10) / 10 }

// analyzer runs voice activity detection frame by frame on both channels.
type analyzer struct {
	cfg     Config
	samples int64 // per channel, after pre-skip
	hp      [2]biquad
	lp      biquad // the user channel's low-pass (lowPassHz)
	// The user channel's speech band in nBands parts: each part's filters
	// (a high-pass and a low-pass), its power so far in this frame, the
	// frame's level (dB), its noise, learned as noise is, and its loudest
	// frame; bandHit: some part of this frame stands out of its noise,
	// bandRun: so many frames in a row.
	bands     [nBands][2]biquad
	bandPower [nBands]float64
	bandE     [nBands]float64
	bandNoise [nBands]noiseTracker
	bandLevel [nBands]float64
	bandHit   bool
	bandRun   int
	frame     [2]float64
	inFrame   int
	index     int64 // frames done
	// The last floorFrames energies per channel (a ring), and their
	// histogram for the floor's percentile.
	ring   [2][floorFrames]float64
	hist   [2][histBins]int
	nFloor int
	level  [2]float64 // each channel's loudest frame so far (dBFS)
	// noise: the level (dB) of each channel's frames that are not speech,
	// and its variance, as moving averages (noiseAlpha): the noise's own
	// flicker sets how far above it an utterance's fading end must be.
	noise [2]noiseTracker
	// pairNoise: the same for the mean of each two frames in a row, and
	// lastPower each channel's last frame (linear): a mains hum beats
	// against the 10 ms frame and evens out over two, so a fading end
	// that sinks into the swing of single frames still stands out of it.
	pairNoise [2]noiseTracker
	lastPower [2]float64
	pairRun   [2]int // pairs in a row over the pairs' noise
	// the agent's last frames (dBFS), for its delayed bleed
	agentRecent [bleedFrames]float64
	run         [2]int   // consecutive active frames
	tail        [2]int64 // where the utterance's fading end stops (tailMs)
	// open segments and their last active frame
	open     [2]bool
	segStart [2]int64
	lastOn   [2]int64
	segs     [2][]Segment
	// bleedHist bins the same difference over the frames where the agent
	// is loud (within loudAgentDB of its loudest), where its bleed stands
	// out of the user's noise, for the guard's estimate of the bleed.
	bleedHist   [sepBins]int
	bleedFrames int
	// speechHist and quietHist bin the user channel's frames (0.5 dB from
	// −150 dBFS) where the user speaks and where nobody does, for the
	// user's speech-to-noise ratio (userSNR).
	speechHist, quietHist [histBins]int
	speechN, quietN       int
	// agentFrames counts frames where the agent spoke loudly; sepHist bins
	// their separation (0.5 dB bins from −60 to +120 dB) for its median, in
	// memory that does not grow with the call.
	agentFrames int
	sepHist     [sepBins]int
}

// newBand is the filters of the user's speech band's part b (nBands).
func newBand(b int) [2]biquad {
	edges := [nBands + 1]float64{highPassHz, 400, 1000, 2000, lowPassHz}
	return [2]biquad{newHighPass(edges[b], sampleRate), newLowPass(edges[b+1], sampleRate)}
}

func newAnalyzer(cfg Config) *analyzer {
	a := &analyzer{cfg: cfg}
	for ch := range 2 {
		a.hp[ch] = newHighPass(highPassHz, sampleRate)
	}
	a.lp = newLowPass(lowPassHz, sampleRate)
	for b := range nBands {
		a.bands[b] = newBand(b)
	}
	return a
}

func (a *analyzer) add(s []float32) {
	for i := 0; i+1 < len(s); i += 2 {
		l, r := a.lp.filter(a.hp[0].filter(float64(s[i]))), a.hp[1].filter(float64(s[i+1]))
		a.frame[0] += l * l
		for b := range nBands {
			y := a.bands[b][1].filter(a.bands[b][0].filter(l))
			a.bandPower[b] += y * y
		}
		a.frame[1] += r * r
		a.inFrame++
		a.samples++
		if a.inFrame == frameSamples {
			a.endFrame()
		}
	}
}

func histBin(db float64) int { return min(max(int((db+150)*2), 0), histBins-1) }

// floorOf is the channel's noise floor: the floorPercentile of its recent frames.
func (a *analyzer) floorOf(ch int) float64 {
	return levelOf(quantileBin(a.hist[ch][:], a.nFloor, floorPercentile))
}

// quantileBin is the bin of a histogram of n values that holds its
// q-quantile (len(h) when it holds fewer than that many).
func quantileBin(h []int, n int, q float64) int {
	seen := 0
	for i, c := range h {
		if seen += c; float64(seen) > q*float64(n) {
			return i
		}
	}
	return len(h)
}

// levelOf is the level (dBFS) at the middle of a histBin bin.
func levelOf(bin int) float64 { return float64(bin)/2 - 150 + 0.25 }

// sepOf is the level difference (dB) at the middle of a sepBin bin.
func sepOf(bin int) float64 { return float64(bin)/2 - 60 + 0.25 }

// excess is how far a frame's power rises above the floor's, in dB: the
// part of it that is not the noise.
func excess(e, floor float64) float64 {
	p := math.Pow(10, e/10) - math.Pow(10, floor/10)
	if p <= 1e-15 {
		return -150
	}
	return 10 * math.Log10(p)
}

func (a *analyzer) endFrame() {
	e, pair := a.frameEnergies()
	on, weak, weakPair, floor := a.activity(e, pair)
	a.bleedGuard(e, pair, floor, &on, &weak, &weakPair)
	quiet := !on[0] && !weak[0] && !on[1] && !a.open[0]
	a.segments(on, weak, weakPair)
	switch {
	case a.run[0] >= onsetFrames: // speech, not a lone frame over the threshold
		a.speechHist[histBin(e[0])]++
		a.speechN++
	case quiet:
		a.quietHist[histBin(e[0])]++
		a.quietN++
	}
	a.index++
}

// frameEnergies are the frame's energy on each channel, in dB, entered in
// the noise floor's ring and histogram, and the mean energy of the frame
// and the one before it (pair); the user's bands' levels go to bandE.
func (a *analyzer) frameEnergies() (e, pair [2]float64) {
	slot := a.index % floorFrames
	for ch := range 2 {
		p := a.frame[ch]/float64(a.inFrame) + 1e-15
		e[ch] = 10 * math.Log10(p)
		pair[ch] = 10 * math.Log10((p+a.lastPower[ch])/2)
		a.frame[ch], a.lastPower[ch] = 0, p
		if a.nFloor == floorFrames {
			a.hist[ch][histBin(a.ring[ch][slot])]--
		}
		a.ring[ch][slot] = e[ch]
		a.hist[ch][histBin(e[ch])]++
	}
	for b := range nBands {
		a.bandE[b] = 10 * math.Log10(a.bandPower[b]/float64(a.inFrame)+1e-15)
		a.bandPower[b] = 0
		if a.index == 0 || a.bandE[b] > a.bandLevel[b] {
			a.bandLevel[b] = a.bandE[b]
		}
	}
	a.nFloor = min(a.nFloor+1, floorFrames)
	a.inFrame = 0
	return e, pair
}

// activity says, per channel, whether the frame is speech (on), whether it
// is loud enough to follow an utterance's fading end (weak), whether the
// last two frames together are (weakPair), and the noise floor it was
// judged against.
func (a *analyzer) activity(e, pair [2]float64) (on, weak, weakPair [2]bool, floor [2]float64) {
	dynRange := [2]float64{dynamicRangeDB, agentDynamicRangeDB}
	for ch := range 2 {
		floor[ch] = a.floorOf(ch)
		if a.index == 0 || e[ch] > a.level[ch] {
			a.level[ch] = e[ch]
		}
		// Speech edges are where the voice rises out of the noise, or falls
		// below the speaker's own level by dynamicRangeDB, whichever is
		// higher: in a quiet room the noise floor alone would stretch
		// every utterance into its breathing.
		th := max(floor[ch]+a.cfg.ThresholdDB, a.level[ch]-dynRange[ch])
		on[ch] = e[ch] > a.cfg.MinLevelDB && e[ch] > th
		// Half the margin follows an utterance's fading end (hysteresis),
		// above the noise's own flicker (noiseTop).
		tailFloor := max(a.cfg.MinLevelDB, floor[ch]+a.cfg.ThresholdDB/2, a.level[ch]-dynRange[ch]-tailRangeDB)
		weak[ch] = e[ch] > max(tailFloor, a.noise[ch].top())
		// The same for the last two frames, once pairNoiseFrames of their noise are known.
		weakPair[ch] = a.pairNoise[ch].n >= pairNoiseFrames && pair[ch] > max(tailFloor, a.pairNoise[ch].top())
		if ch == 0 {
			a.bandHit = a.bandStandsOut()
		}
		// Every frame outside an utterance is noise, the ones above the
		// threshold too (a hum beats against the frame and flickers across
		// it); on the user's channel, not while the agent's bleed may be in it.
		if !a.open[ch] && (ch == 1 || slices.Max(a.agentRecent[:]) <= -150) {
			a.noise[ch].learn(e[ch])
			if ch == 0 {
				for b := range nBands {
					a.bandNoise[b].learn(a.bandE[b])
				}
			}
			if a.index > 0 {
				a.pairNoise[ch].learn(pair[ch])
			}
		}
	}
	return on, weak, weakPair, floor
}

// bandExcess is the user's power over the noise (dB) in the band where it
// stands out most: no more than the whole band's, so the bleed guard may
// judge it against the agent's bleed in the whole band.
func (a *analyzer) bandExcess() float64 {
	x := -150.0
	for b := range nBands {
		x = max(x, excess(a.bandE[b], a.bandNoise[b].mean))
	}
	return x
}

// bandStandsOut says whether some band of the user's frame is loud enough
// to follow an utterance's fading end, as weak is for the whole band:
// bandSigmas standard deviations over the band's noise once pairNoiseFrames
// of it are learned, and no further below the band's loudest frame than
// the whole band's tail may be below its own.
func (a *analyzer) bandStandsOut() bool {
	for b := range nBands {
		if a.bandNoise[b].n >= pairNoiseFrames &&
			a.bandE[b] > max(a.cfg.MinLevelDB, a.bandLevel[b]-dynamicRangeDB-tailRangeDB, a.bandNoise[b].topAt(bandSigmas)) {
			return true
		}
	}
	return false
}

// noiseLevel is the channel's learned noise level, or floor before any.
func (a *analyzer) noiseLevel(ch int, floor float64) float64 {
	if a.noise[ch].n == 0 {
		return floor
	}
	return a.noise[ch].mean
}

// noiseTracker is a noise's level (dB) and its variance, from the frames
// that are not speech.
type noiseTracker struct {
	mean, variance float64
	n              int
}

// learn enters a frame that is not speech.
func (t *noiseTracker) learn(e float64) {
	t.n++
	if t.n == 1 {
		t.mean = e
		return
	}
	// Until 1/noiseAlpha frames, a plain running mean and variance: the
	// first second of a call is often all the noise there is before the
	// user speaks. Winsorized: a frame far from the noise (an utterance's
	// first frames, a cough) moves it no more than noiseClip deviations.
	alpha := max(noiseAlpha, 1/float64(t.n))
	c := max(noiseClip*math.Sqrt(t.variance), noiseClipMinDB)
	d := min(max(e-t.mean, -c), c)
	t.mean += alpha * d
	t.variance = (1 - alpha) * (t.variance + alpha*d*d)
}

// top is how far the noise reaches: noiseSigmas standard deviations, and at
// least 1 dB, above its level; −150 before any frame.
func (t *noiseTracker) top() float64 { return t.topAt(noiseSigmas) }

// topAt is the same, sigmas standard deviations above it.
func (t *noiseTracker) topAt(sigmas float64) float64 {
	if t.n == 0 {
		return -150
	}
	return t.mean + max(sigmas*math.Sqrt(t.variance), 1)
}

// bleedGuard clears the user's frame where it is only the agent's voice
// reaching the user's microphone, and learns how much quieter that bleed is.
func (a *analyzer) bleedGuard(e, pair, floor [2]float64, on, weak, weakPair *[2]bool) {
	// The agent as it reaches the user's microphone: its loudest frame of
	// the last bleedFrames (the bleed arrives late).
	a.agentRecent[a.index%bleedFrames] = e[1]
	if !on[1] {
		a.agentRecent[a.index%bleedFrames] = -150
	}
	recent := slices.Max(a.agentRecent[:])
	userExcess := excess(e[0], floor[0])
	if on[1] && e[1] >= a.level[1]-loudAgentDB {
		// How much quieter the agent is on the user's channel, the user's
		// noise (its mean level) taken out: the median over the frames where
		// the agent is loud (the user rarely speaks at the same time). Where
		// the agent is quiet, its bleed sinks into the user's noise and the
		// difference only says how loud that noise is.
		a.agentFrames++
		a.sepHist[sepBin(e[1]-excess(e[0], a.noiseLevel(0, floor[0])))]++
	}
	if on[1] {
		// The guard compares the user's frame with the agent's loudest frame
		// of the last bleedFrames, so it learns that difference.
		if d := recent - userExcess; d > a.cfg.BleedMarginDB && recent >= a.level[1]-loudAgentDB {
			a.bleedHist[sepBin(d)]++
			a.bleedFrames++
		}
	}
	if (on[0] || weak[0] || weakPair[0] || a.bandHit) && recent > -150 {
		// The cross-channel guard: while the agent speaks (and just after),
		// the user's channel carries the agent too, sep dB quieter. A user
		// frame is the user only when clearly louder than that bleed.
		sep := defaultSepDB
		if a.bleedFrames >= minBleedFrames {
			sep = sepOf(quantileBin(a.bleedHist[:], a.bleedFrames, bleedQuantile))
		}
		bleed := recent - sep + bleedHeadroomDB
		if userExcess < bleed {
			on[0], weak[0] = false, false
		}
		if excess(pair[0], floor[0]) < bleed {
			weakPair[0] = false
		}
		if a.bandHit && a.bandExcess() < bleed {
			a.bandHit = false
		}
	}
}

// segments opens, extends and closes each channel's utterance.
func (a *analyzer) segments(on, weak, weakPair [2]bool) {
	t := a.index * frameMs
	for ch := range 2 {
		// Speech is a run of onsetFrames active frames at least: a lone
		// frame of noise above the threshold neither starts an utterance
		// nor keeps one open across a pause.
		if on[ch] {
			a.run[ch]++
		} else {
			a.run[ch] = 0
		}
		// The fading end: this frame above half the margin, or else the
		// last two frames together (reaching the previous frame's end),
		// when the pair before was too: a lone pair over the top is the
		// noise's own swing (a 60 Hz hum's beat recurs every 50 ms).
		if weakPair[ch] {
			a.pairRun[ch]++
		} else {
			a.pairRun[ch] = 0
		}
		followed := weak[ch] && a.followTail(ch, t)
		if !followed && a.pairRun[ch] >= 2 {
			followed = a.followTail(ch, t-frameMs)
		}
		// On the user's channel, else a band of the frame that stands out.
		if ch == 0 {
			a.bandRun++
			if !a.bandHit {
				a.bandRun = 0
			} else if !followed {
				a.followBands(t)
			}
		}
		switch {
		case a.run[ch] >= onsetFrames:
			if !a.open[ch] {
				a.open[ch], a.segStart[ch], a.tail[ch] = true, t-(onsetFrames-1)*frameMs, 0
			}
			a.lastOn[ch] = t + frameMs
		case a.open[ch] && t-a.lastOn[ch] >= a.cfg.MergeGapMs:
			a.close(ch)
		}
	}
}

// followBands extends the user's fading end over the frame that starts at
// t where one of its bands stands out of that band's noise: straight on
// from the end so far, or across a gap when two frames in a row do (a lone
// frame over a band's noise is as likely its flicker: four bands flicker
// four times as often as one).
func (a *analyzer) followBands(t int64) {
	switch {
	case a.bandRun >= 2:
		a.followTail(0, t-frameMs)
		a.followTail(0, t)
	case a.open[0] && max(a.lastOn[0], a.tail[0]) == t:
		a.followTail(0, t)
	}
}

// followTail extends an open utterance's fading end over the frame that
// starts at s, frame after frame: at most tailMs after its last speech
// frame, across gaps of at most tailGapMs.
func (a *analyzer) followTail(ch int, s int64) bool {
	if !a.open[ch] || s-a.lastOn[ch] > tailMs || s-max(a.lastOn[ch], a.tail[ch]) > tailGapMs {
		return false
	}
	a.tail[ch] = max(a.tail[ch], s+frameMs)
	return true
}

func (a *analyzer) close(ch int) {
	a.open[ch] = false
	end := max(a.lastOn[ch], a.tail[ch])
	if d := end - a.segStart[ch]; d >= a.cfg.MinSpeechMs {
		a.segs[ch] = append(a.segs[ch], Segment{StartMs: a.segStart[ch], EndMs: end})
	}
}

func (a *analyzer) finish() {
	if a.inFrame > 0 {
		a.endFrame()
	}
	for ch := range 2 {
		if a.open[ch] {
			a.close(ch)
		}
	}
}

// separation is the median level difference between the agent's channel and
// the user's while only the agent speaks.
func (a *analyzer) separation() float64 {
	if a.agentFrames == 0 {
		return math.Inf(1)
	}
	return sepOf(quantileBin(a.sepHist[:], a.agentFrames, 0.5))
}

// userSNR is how far the user's speech stands above the noise of the
// user's microphone, in the speech band: the median level of the frames
// where the user speaks less the median of those where nobody does. Not a
// number (false) before minSNRFrames of each.
func (a *analyzer) userSNR() (float64, bool) {
	if a.speechN < minSNRFrames || a.quietN < minSNRFrames {
		return 0, false
	}
	return levelOf(quantileBin(a.speechHist[:], a.speechN, 0.5)) - levelOf(quantileBin(a.quietHist[:], a.quietN, 0.5)), true
}

// sepBin is a level difference's bin: 0.5 dB from −60 to +120 dB.
func sepBin(d float64) int { return min(max(int((d+60)*2), 0), sepBins-1) }

// Scoring is the result as the scoring model takes it.
func (r *Result) Scoring() *session.Audio { return &r.Audio }

// biquad is a second-order IIR filter (RBJ's audio EQ cookbook).
type biquad struct {
	b0, b1, b2, a1, a2 float64
	x1, x2, y1, y2     float64
}

// newHighPass is the second-order Butterworth high-pass (Q = 1/√2).
func newHighPass(hz, rate float64) biquad {
	w := 2 * math.Pi * hz / rate
	alpha := math.Sin(w) / math.Sqrt2 // Q = 1/√2
	cw := math.Cos(w)
	a0 := 1 + alpha
	return biquad{b0: (1 + cw) / 2 / a0, b1: -(1 + cw) / a0, b2: (1 + cw) / 2 / a0, a1: -2 * cw / a0, a2: (1 - alpha) / a0}
}

// newLowPass is the second-order Butterworth low-pass (Q = 1/√2).
func newLowPass(hz, rate float64) biquad {
	w := 2 * math.Pi * hz / rate
	alpha := math.Sin(w) / math.Sqrt2
	cw := math.Cos(w)
	a0 := 1 + alpha
	return biquad{b0: (1 - cw) / 2 / a0, b1: (1 - cw) / a0, b2: (1 - cw) / 2 / a0, a1: -2 * cw / a0, a2: (1 - alpha) / a0}
}

func (h *biquad) filter(x float64) float64 {
	y := h.b0*x + h.b1*h.x1 + h.b2*h.x2 - h.a1*h.y1 - h.a2*h.y2
	h.x2, h.x1, h.y2, h.y1 = h.x1, x, h.y1, y
	return y
}
