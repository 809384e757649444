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
	return Config{ThresholdDB: 4, MinLevelDB: -60, BleedMarginDB: 12, MinSeparationDB: 12, MergeGapMs: 500,
		MinSpeechMs: 60, BackchannelMaxMs: 1000, AwkwardSilenceMs: 2000, MaxDuration: 4 * time.Hour}
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
		{&c.BleedMarginDB, &d.BleedMarginDB}, {&c.MinSeparationDB, &d.MinSeparationDB}} {
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
type Segment = scoring.AudioSegment

// Turn is a user utterance and the agent's answer as the caller heard it.
type Turn = scoring.AudioTurn

// Metrics summarize the call, named as LiveKit's conversation metrics
// where they exist; the scorecard's audio block carries the same type.
type Metrics = scoring.AudioMetrics

// Result is what Analyze measured, or why it refused to: the scorecard's
// audio block (scoring.Audio: refusal, segments per channel, turns, awkward
// silences, metrics) and the file's own figures.
type Result struct {
	scoring.Audio
	DurationMs int64 `json:"duration_ms"`
	Channels   int   `json:"channels"`
	PreSkip    int   `json:"pre_skip"`
}

const (
	sampleRate   = 48000
	frameSamples = sampleRate / 100 // 10 ms
	frameMs      = 10
	floorFrames  = 500 // the noise floor is the quietest frame of the last 5 s
	// bleedHeadroomDB: how far above the agent's predicted bleed a user frame
	// must be to count as the user.
	bleedHeadroomDB = 3
	// dynamicRangeDB: speech edges sit at most this far below the
	// speaker's loudest frame.
	dynamicRangeDB = 35
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
	res.DurationMs = a.samples * 1000 / sampleRate
	res.UserSegments, res.AgentSegments = a.segs[0], a.segs[1]
	if sep := a.separation(); !math.IsInf(sep, 0) {
		res.Metrics.SeparationDB = round1(sep)
	}
	if a.agentFrames > 50 && a.separation() < cfg.MinSeparationDB {
		return refuse("channels_leak", fmt.Errorf("the agent is only %.1f dB quieter on the user channel than on its own (at least %.0f dB needed): "+
			"the channels carry the same signal, as low-bitrate stereo encodes them", a.separation(), cfg.MinSeparationDB))
	}
	res.Turns, res.Silences, res.Metrics = turns(res.UserSegments, res.AgentSegments, cfg, res.Metrics)
	return res, nil
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
	frame   [2]float64
	inFrame int
	index   int64                   // frames done
	floor   [2][floorFrames]float64 // the last frames' energies, a ring
	nFloor  int
	level   [2]float64 // each channel's loudest frame so far (dBFS)
	// open segments and their last active frame
	open      [2]bool
	segStart  [2]int64
	lastOn    [2]int64
	segs      [2][]Segment
	sepSum    float64
	sepFrames int
	// agentFrames counts frames where the agent spoke; sepHist bins their
	// separation (0.5 dB bins from −60 to +120 dB) for its median, in
	// memory that does not grow with the call.
	agentFrames int
	sepHist     [360]int
}

func newAnalyzer(cfg Config) *analyzer { return &analyzer{cfg: cfg} }

func (a *analyzer) add(s []float32) {
	for i := 0; i+1 < len(s); i += 2 {
		l, r := float64(s[i]), float64(s[i+1])
		a.frame[0] += l * l
		a.frame[1] += r * r
		a.inFrame++
		a.samples++
		if a.inFrame == frameSamples {
			a.endFrame()
		}
	}
}

func (a *analyzer) endFrame() {
	var e [2]float64
	for ch := range 2 {
		e[ch] = 10 * math.Log10(a.frame[ch]/float64(a.inFrame)+1e-12)
		a.frame[ch] = 0
		a.floor[ch][a.index%floorFrames] = e[ch]
	}
	a.nFloor = min(a.nFloor+1, floorFrames)
	a.inFrame = 0
	var on [2]bool
	for ch := range 2 {
		floor := slices.Min(a.floor[ch][:a.nFloor])
		if a.index == 0 || e[ch] > a.level[ch] {
			a.level[ch] = e[ch]
		}
		// Speech edges are where the voice rises out of the noise, or falls
		// below the speaker's own level by dynamicRangeDB, whichever is
		// higher: in a quiet room the noise floor alone would stretch
		// every utterance into its breathing.
		th := max(floor+a.cfg.ThresholdDB, a.level[ch]-dynamicRangeDB)
		on[ch] = e[ch] > a.cfg.MinLevelDB && e[ch] > th
	}
	if on[1] {
		a.agentFrames++
		// How much quieter the agent is on the user's channel: its median
		// over the frames the agent speaks (the user rarely speaks at the
		// same time), a running mean for the guard below.
		d := e[1] - e[0]
		a.sepHist[min(max(int((d+60)*2), 0), len(a.sepHist)-1)]++
		if d > a.cfg.BleedMarginDB {
			a.sepSum += d
			a.sepFrames++
		}
		// The cross-channel guard: while the agent speaks, the user's
		// channel carries the agent too, sep dB quieter. A user frame is the
		// user only when clearly louder than that bleed.
		sep := 20.0
		if a.sepFrames >= 20 {
			sep = a.sepSum / float64(a.sepFrames)
		}
		if on[0] && e[0] < e[1]-sep+bleedHeadroomDB {
			on[0] = false
		}
	}
	t := a.index * frameMs
	for ch := range 2 {
		if on[ch] {
			if !a.open[ch] {
				a.open[ch], a.segStart[ch] = true, t
			}
			a.lastOn[ch] = t + frameMs
		} else if a.open[ch] && t-a.lastOn[ch] >= a.cfg.MergeGapMs {
			a.close(ch)
		}
	}
	a.index++
}

func (a *analyzer) close(ch int) {
	a.open[ch] = false
	if d := a.lastOn[ch] - a.segStart[ch]; d >= a.cfg.MinSpeechMs {
		a.segs[ch] = append(a.segs[ch], Segment{StartMs: a.segStart[ch], EndMs: a.lastOn[ch]})
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
	seen := 0
	for i, n := range a.sepHist {
		if seen += n; seen*2 > a.agentFrames {
			return float64(i)/2 - 60 + 0.25
		}
	}
	return 120
}

// Scoring is the result as the scoring model takes it.
func (r *Result) Scoring() *scoring.Audio { return &r.Audio }
