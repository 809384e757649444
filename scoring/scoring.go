// Package scoring turns one parsed agent session into a reliability
// scorecard. It is pure: standard library only, no I/O, no clock, no maps
// iterated into output, so the same session always gives the same bytes.
// See docs/scoring.md for every rule and default.
package scoring

import (
	"errors"
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"
	"sync"

	"github.com/lkscore/lkscore/session"
)

// ModelVersion is the version of the scoring rules. Bump it with any change
// that can change a score; Config.Version adds the config hash.
// 1.1.0: sessions without a recording are scored from their spans, with
// the components the spans cannot measure marked not measured; spans add
// findings and metrics that deduct nothing to sessions with a recording.
// 1.2.0: a reply whose text to speech failed before any audio (the spans
// say so) costs turn handling, with or without a recording (silent_reply).
// 1.3.0: heard turn-taking measured by the detector of docs/audio.md as of
// this version (the speech band, a learned noise level and bleed, a stated
// SNR floor, back-channels that end in the agent's pause between sentences):
// the same recording can give other turns, and a recording below the floor
// is refused too_noisy (audio_not_measured).
// 1.3.1: an utterance's fading end is also followed over two frames
// together (a mains hum's swing evens out): ends under hum come later.
// 1.3.2: only over two such pairs in a row (a lone one is the hum's beat).
// 1.3.3: and over the parts of the speech band (200–400 Hz, 400 Hz–1 kHz,
// 1–2 kHz, 2–4 kHz), each against its own noise: ends under a hum, or a
// voice low in pitch under white noise, come later.
// 1.4.0: no verdict without evidence: a recorded session's component with
// no input (no chat history, no assistant or user turn, no tool call, no
// latency reported or heard) is not measured instead of 100; a session no
// component measured is unscored; a chat history without a user turn
// (no_user_turn) is at most warn.
const ModelVersion = "1.4.0"

// Item types and roles, as the recording parser normalizes them.
const (
	TypeMessage            = "message"
	TypeFunctionCall       = "function_call"
	TypeFunctionCallOutput = "function_call_output"
	TypeAgentHandoff       = "agent_handoff"
	TypeAgentConfigUpdate  = "agent_config_update"

	RoleUser      = "user"
	RoleAssistant = "assistant"
)

// Session is the scoring input: what consumer maps a parsed recording into.
type Session struct {
	session.Identity // the key, room, job and agent
	session.Close    // the close reason, its source and evidence
	// Facts are what the daemon learned from the other signals (webhooks,
	// OTLP); nil when scoring a recording alone.
	Facts *Facts
	// SummaryError is the error the header's session summary names.
	SummaryError string
	// Redacted forbids quoting anything the user or a tool said in
	// findings (the session asked for redaction, or config forces it).
	Redacted bool
	// Source points back at the recording (s3://…, file://…).
	Source string
	Items  []Item
	// Audio is what the stereo recording showed (nil without one).
	Audio *Audio
	// Spans are the SDK's voice-pipeline spans (nil without traces). A
	// session without Items is scored from them (ItemsFromSpans).
	Spans []Span
	// Inputs name the signals the session was scored from (InputRecording,
	// InputTraces, InputLogs); empty means a recording alone.
	Inputs []string
}

// hasRecording reports whether the items came from a chat history.
func (s Session) hasRecording() bool {
	if len(s.Inputs) == 0 {
		return true
	}
	for _, in := range s.Inputs {
		if in == InputRecording {
			return true
		}
	}
	return false
}

// Item is one chat item. Times are Unix seconds and delays seconds, as the
// SDKs report them; nil means "not reported", never zero.
type Item struct {
	ID        string
	Type      string
	CreatedAt float64 // 0 when absent

	Role                 string
	Text                 string // content strings joined with " "
	Interrupted          bool
	TranscriptConfidence *float64
	HasMetrics           bool
	StartedSpeakingAt    *float64
	StoppedSpeakingAt    *float64
	TranscriptionDelay   *float64
	EndOfTurnDelay       *float64
	LLMNodeTTFT          *float64
	TTSNodeTTFB          *float64
	E2ELatency           *float64

	CallID    string
	Name      string
	Arguments string
	Output    string
	IsError   bool

	OldAgentID string
	NewAgentID string
}

// Scorer scores sessions with one validated config: its policies and
// compiled rules.
type Scorer struct {
	cfg     Config
	rules   CompiledRules // nil without rules
	def     *policy
	agents  map[string]*policy
	named   bool   // the config has policies or rules: scorecards name theirs
	version string // the whole config's (ConfigVersion)
	// versions are the agents' scoring versions (VersionFor): one per
	// agent with a policy or named by a rule's when.agents; every other
	// agent has defaultVersion.
	versions       map[string]string
	defaultVersion string
	pool           sync.Pool // of *scratch
}

// NewScorer validates cfg and precomputes its scoring version. A config
// with rules needs a rule engine: NewScorerWith (rules.NewScorer).
func NewScorer(cfg Config) (*Scorer, error) { return NewScorerWith(cfg, nil) }

// NewScorerWith is NewScorer with the engine that compiles and evaluates
// the config's rules.
func NewScorerWith(cfg Config, engine RuleEngine) (*Scorer, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	var compiled CompiledRules
	if len(cfg.Rules) > 0 {
		if engine == nil {
			return nil, errors.New("scoring.rules: a config with rules is scored with a rule engine (rules.NewScorer)")
		}
		var err error
		if compiled, err = engine.Compile(cfg.Rules); err != nil {
			return nil, err
		}
	}
	def, agents := resolvePolicies(cfg)
	versions, defaultVersion := agentVersions(cfg)
	return &Scorer{cfg: cfg, rules: compiled, def: def, agents: agents, named: len(cfg.Agents) > 0 || len(cfg.Rules) > 0,
		version: cfg.Version(), versions: versions, defaultVersion: defaultVersion,
		pool: sync.Pool{New: func() any { return newScratch() }}}, nil
}

// VersionTag is the prefix the scorer reads versions by
// (regression.version_tag; session.Version).
func (sc *Scorer) VersionTag() string { return sc.cfg.VersionTag }

// policyFor picks the session's policy: its agent's, when its match takes
// the session, else the default.
func (sc *Scorer) policyFor(s Session) *policy {
	if p, ok := sc.agents[s.AgentName]; ok && (p.match.empty() || p.match.matches(sessionTags(s), sessionVersion(s, sc.cfg.VersionTag))) {
		return p
	}
	return sc.def
}

// Audio is the model's audio settings (the audio measurement uses its
// awkward silence).
func (sc *Scorer) Audio() AudioConfig { return sc.def.cfg.Audio }

// Config is the config the scorer was made with (its policies and rules
// included): what a worker needs to score under its version.
func (sc *Scorer) Config() Config { return sc.cfg }

// Version is the whole config's version (Config.Version): what names the
// config itself, e.g. in the scoring bucket `lkscore rescore` fills. A
// scorecard carries its agent's version (VersionFor).
func (sc *Scorer) Version() string { return sc.version }

// Versions are the scoring versions this scorer gives, for the start-up
// log and the dashboard: each agent's with a policy of its own or named by
// a rule's when.agents, and under "" every other agent's.
func (sc *Scorer) Versions() map[string]string {
	out := make(map[string]string, len(sc.versions)+1)
	for a, v := range sc.versions {
		out[a] = v
	}
	out[""] = sc.defaultVersion
	return out
}

// VersionFor is the scoring version of an agent's scorecards: the model's
// version and a hash of what can score that agent's sessions (the scoring
// section, the agent's own policy with its match, the rules whose when can
// name the agent). A change to one agent's policy, or to a rule of other
// agents, leaves every other agent's version, and so its baselines,
// regression history and threshold windows, as they were. A config with
// no policies and no rules gives every agent Config.Version().
func (sc *Scorer) VersionFor(agent string) string {
	if v, ok := sc.versions[agent]; ok {
		return v
	}
	return sc.defaultVersion
}

// Score scores one session. It is safe for concurrent use.
func (sc *Scorer) Score(s Session) Scorecard {
	scr := sc.pool.Get().(*scratch)
	defer sc.pool.Put(scr)
	return score(s, sc, sc.policyFor(s), scr)
}

// Score scores one session with cfg, which must be valid (Config.Validate)
// and have no rules (those need a rule engine: rules.NewScorer); it panics
// otherwise. Use a Scorer to score many.
func Score(s Session, cfg Config) Scorecard {
	sc, err := NewScorer(cfg)
	if err != nil {
		panic("scoring.Score: invalid config: " + err.Error())
	}
	return sc.Score(s)
}

func score(s Session, sc *Scorer, p *policy, scr *scratch) Scorecard {
	cfg, version := p.cfg, sc.VersionFor(s.AgentName)
	recorded := s.hasRecording()
	if !recorded && len(s.Items) == 0 {
		s.Items = ItemsFromSpans(s.Spans)
	}
	a := analyze(s, scr)
	spanOnly := spanFindings(s)
	comps := []Component{
		component(TurnHandling, cfg.Weights.TurnHandling, append(append(turnFindings(a, cfg), audioTurnFindings(s.Audio, cfg)...), spanOnly...), cfg),
		component(TranscriptIntegrity, cfg.Weights.TranscriptIntegrity, transcriptFindings(a, cfg), cfg),
		component(ToolReliability, cfg.Weights.ToolReliability, toolFindings(a, cfg), cfg),
		component(ResponseLatency, cfg.Weights.ResponseLatency, append(latencyFindings(a, cfg), audioLatencyFindings(s.Audio, a, cfg)...), cfg),
	}
	if !recorded {
		for i := range comps {
			if why := unmeasured(comps[i].Name, a); why != "" {
				comps[i] = Component{Name: comps[i].Name, Verdict: NotMeasured, Weight: comps[i].Weight, Findings: []Finding{}, NotMeasured: why}
			}
		}
	} else {
		heard := s.Audio != nil && s.Audio.Refused == "" && len(s.Audio.Turns) > 0
		for i := range comps {
			// A component with no input is not measured, never 100; one
			// whose findings deducted something measured something.
			if why := unmeasuredRecorded(comps[i].Name, a, heard); why != "" && comps[i].Deducted == 0 {
				comps[i] = Component{Name: comps[i].Name, Verdict: NotMeasured, Weight: comps[i].Weight, Findings: comps[i].Findings, NotMeasured: why}
			}
		}
	}
	inputs := s.Inputs
	if len(inputs) == 0 {
		inputs = []string{InputRecording}
	}
	card := Scorecard{
		Schema: Schema, ScoringVersion: version, ModelVersion: ModelVersion, Inputs: inputs,
		Session:    sessionRef(s),
		Completion: completion(s),
		Components: comps,
		Metrics:    a.metrics(cfg),
		Audio:      s.Audio,
		Spans:      spanMetrics(s.Spans),
	}
	card.Usage = session.UsageOf(s.Facts, card.Metrics.UserTurns)
	card.Cost = sc.cfg.Pricing.costOf(card.Usage, callTime(s), card.Metrics.DurationS)
	if sc.named {
		ref := p.ref
		card.Policy = &ref
		card.Rules = applyRules(p, sc.rules, sc.cfg.Rules, s, a, comps, &card, cfg)
	}
	card.Overall = overall(comps, card.Completion, cfg)
	ruleVerdict(&card.Overall, card.Rules)
	for i := range card.Components {
		boundFindings(&card.Components[i])
	}
	return card
}

// unmeasured says why a session without a recording cannot measure a
// component from its spans ("" when it can): docs/scoring.md has the table.
func unmeasured(name string, a *analysis) string {
	switch name {
	case TurnHandling:
		if len(a.agents) == 0 {
			return "no agent_turn span"
		}
	case TranscriptIntegrity:
		for _, i := range a.users {
			if a.s.Items[i].TranscriptConfidence != nil {
				return ""
			}
		}
		return "no recorded transcript and no user_turn span reported lk.transcript_confidence"
	case ToolReliability:
		if len(a.tools) == 0 {
			return "no function_tool span: no tool was called, or the SDK did not trace it"
		}
	case ResponseLatency:
		if len(a.e2e.vals)+len(a.ttft.vals)+len(a.ttfb.vals) == 0 {
			return "no span reported lk.e2e_latency, lk.response.ttft or lk.response.ttfb"
		}
	}
	return ""
}

// unmeasuredRecorded says why a session with a recording cannot measure a
// component ("" when it can): no chat history, no turns, no tool call, no
// latency reported or heard. docs/scoring.md has the table.
func unmeasuredRecorded(name string, a *analysis, heard bool) string {
	if len(a.s.Items) == 0 && !heard {
		return "no chat history: the upload has none, or an empty one"
	}
	switch name {
	case TurnHandling:
		if len(a.agents) == 0 && !heard {
			return "no assistant turn in the chat history"
		}
	case TranscriptIntegrity:
		if len(a.users) == 0 {
			return "no user turn in the chat history: no transcript to check"
		}
	case ToolReliability:
		if len(a.tools) == 0 {
			return "no tool was called"
		}
	case ResponseLatency:
		if len(a.e2e.vals)+len(a.ttft.vals)+len(a.ttfb.vals) == 0 && !heard {
			return "no turn reported e2e_latency, llm_node_ttft or tts_node_ttfb, and no turn was heard"
		}
	}
	return ""
}

// sessionRef is the scorecard's session block.
func sessionRef(s Session) SessionRef {
	r := SessionRef{Identity: s.Identity, Source: s.Source}
	r.Error = errorText(s.SummaryError, s.Redacted)
	f := s.Facts
	if f == nil {
		return r
	}
	c := completion(s)
	r.CloseReason, r.CloseReasonSource, r.CloseReasonEvidence = c.CloseReason, c.CloseReasonSource, c.CloseReasonEvidence
	if f.SDKLanguage != "" || f.SDKVersion != "" {
		r.SDK = &SDKRef{Language: f.SDKLanguage, Version: f.SDKVersion}
	}
	r.DeploymentID, r.CloudAgentID, r.Simulated, r.RedactionEnabled = f.DeploymentID, f.CloudAgentID, f.Simulated, f.RedactionEnabled
	r.APIKey = f.APIKey
	r.Tags, r.Outcome, r.JobStatus, r.Provenance = f.Tags, f.Outcome, f.JobStatus, f.Provenance
	r.JobError, r.EndedBy, r.RoomEndReason, r.Departures = f.JobError, f.EndedBy, f.RoomEndReason, f.Departures
	if r.RoomName == "" {
		r.RoomName = f.RoomName // the header's, else any webhook's or log's
	}
	// The SDK's own message first, then the summary's, then the job's.
	if f.ErrorText != "" {
		r.Error = errorText(f.ErrorText, s.Redacted)
	}
	if r.Error == "" && c.CloseReason == "CR_ERROR" {
		r.Error = f.JobError
	}
	return r
}

// errorText is an error message as a card may show it: its length alone
// when the session is redacted (an error can quote what was said).
func errorText(e string, redacted bool) string {
	if e != "" && redacted {
		return fmt.Sprintf("[redacted: %d characters]", len([]rune(e)))
	}
	return e
}

func completion(s Session) Completion {
	c := Completion{Close: s.Close, Status: "completed"}
	switch s.CloseReason {
	case "CR_ERROR":
		c.Status = "failed"
	case "", "CR_UNKNOWN":
		c.Status = "unknown"
	}
	if c.CloseReason == "" {
		c.CloseReason = "CR_UNKNOWN"
	}
	if c.CloseReasonSource == "" {
		c.CloseReasonSource = "absent"
	}
	return c
}

func component(name string, weight float64, findings []Finding, cfg Config) Component {
	sort.SliceStable(findings, func(i, j int) bool { return findingLess(findings[i], findings[j]) })
	var deducted float64
	for _, f := range findings {
		deducted += f.Deduction
	}
	deducted = round(deducted)
	score := round(math.Max(0, 100-deducted))
	if findings == nil {
		findings = []Finding{}
	}
	return Component{Name: name, Score: score, Verdict: verdict(score, cfg.Verdict), Weight: weight, Deducted: deducted, Findings: findings}
}

// findingLess orders findings by turn (session-level first), then code.
func findingLess(a, b Finding) bool {
	ai, bi := -1, -1
	if a.Turn.Set {
		ai = a.Turn.V
	}
	if b.Turn.Set {
		bi = b.Turn.V
	}
	if ai != bi {
		return ai < bi
	}
	return a.Code < b.Code
}

func verdict(score float64, v Verdict) string {
	switch {
	case score >= v.Pass:
		return Pass
	case score >= v.Warn:
		return Warn
	}
	return Fail
}

func overall(comps []Component, c Completion, cfg Config) Overall {
	var sum, wsum float64
	for _, comp := range comps {
		if comp.Verdict == NotMeasured {
			continue
		}
		sum += comp.Score * comp.Weight
		wsum += comp.Weight
	}
	if wsum == 0 {
		o := Overall{Verdict: Unscored, Reasons: []string{"unscored: no component could be measured"}}
		// One reason per distinct why, naming its components in order.
		var whys []string
		names := map[string][]string{}
		for _, comp := range comps {
			if names[comp.NotMeasured] == nil {
				whys = append(whys, comp.NotMeasured)
			}
			names[comp.NotMeasured] = append(names[comp.NotMeasured], comp.Name)
		}
		for _, why := range whys {
			o.Reasons = append(o.Reasons, strings.Join(names[why], ", ")+": "+why)
		}
		if c.Status == "failed" {
			o.Reasons = append(o.Reasons, "close reason "+c.CloseReason+" fails completion")
			o.Verdict = Fail
		}
		return o
	}
	score := round(sum / wsum)
	o := Overall{Score: score, Verdict: verdict(score, cfg.Verdict), Reasons: []string{}}
	o.Reasons = append(o.Reasons, fmt.Sprintf("weighted score %s (pass >= %s, warn >= %s)", num(score), num(cfg.Verdict.Pass), num(cfg.Verdict.Warn)))
	for _, comp := range comps {
		for _, f := range comp.Findings {
			if f.Code == CodeNoUserTurn {
				o.Reasons = append(o.Reasons, "no user turn: "+f.Message)
				if o.Verdict == Pass {
					o.Verdict = Warn
				}
			}
		}
	}
	for _, comp := range comps {
		if comp.Verdict == Fail && comp.Weight > 0 {
			o.Reasons = append(o.Reasons, fmt.Sprintf("%s fails with %s", comp.Name, num(comp.Score)))
			if o.Verdict == Pass {
				o.Verdict = Warn
			}
		}
	}
	if c.Status == "failed" {
		o.Reasons = append(o.Reasons, "close reason "+c.CloseReason+" fails completion")
		o.Verdict = Fail
	}
	return o
}

// round rounds to 2 decimals, half away from zero: the one rounding used
// for every number in a scorecard.
func round(v float64) float64 {
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return 0
	}
	return math.Round(v*100) / 100
}

// num formats a rounded number for messages without trailing zeros.
func num(v float64) string { return strconv.FormatFloat(round(v), 'g', -1, 64) }

// FormatNumber is how a scorecard's messages write a number: rounded to 2
// decimals, without trailing zeros (for a rule engine's values).
func FormatNumber(v float64) string { return num(v) }
