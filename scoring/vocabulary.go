package scoring

import "github.com/lkscore/lkscore/session"

// The scorecard and the session's facts are the session vocabulary's
// (package session, docs/architecture.md): the engine names them here so
// its own code reads as before. Readers of scorecards import session.
type (
	Facts     = session.Facts
	Departure = session.Departure

	Scorecard  = session.Scorecard
	SessionRef = session.SessionRef
	SDKRef     = session.SDKRef
	Completion = session.Completion
	Overall    = session.Overall
	Component  = session.Component
	Finding    = session.Finding
	PolicyRef  = session.PolicyRef
	RuleResult = session.RuleResult
	RuleValue  = session.RuleValue

	Metrics      = session.Metrics
	Usage        = session.Usage
	Cost         = session.Cost
	SpanMetrics  = session.SpanMetrics
	Audio        = session.Audio
	AudioSegment = session.AudioSegment
	AudioTurn    = session.AudioTurn
	AudioMetrics = session.AudioMetrics

	Opt[T int | float64] = session.Opt[T]
)

// Schema names the scorecard JSON contract (docs/scorecard.schema.json).
const Schema = session.Schema

// Component names, verdicts, severities, inputs and rule statuses: the
// vocabulary's.
const (
	TurnHandling        = session.TurnHandling
	TranscriptIntegrity = session.TranscriptIntegrity
	ToolReliability     = session.ToolReliability
	ResponseLatency     = session.ResponseLatency

	Pass        = session.Pass
	Warn        = session.Warn
	Fail        = session.Fail
	NotMeasured = session.NotMeasured
	Unscored    = session.Unscored

	Info     = session.Info
	Warning  = session.Warning
	Critical = session.Critical

	InputRecording = session.InputRecording
	InputTraces    = session.InputTraces
	InputLogs      = session.InputLogs

	RuleViolated     = session.RuleViolated
	RulePassed       = session.RulePassed
	RuleNotEvaluated = session.RuleNotEvaluated
)

func some[T int | float64](v T) Opt[T] { return Opt[T]{V: v, Set: true} }
