package session

// Schema names the scorecard JSON contract (docs/scorecard.schema.json).
const Schema = "lkscore.scorecard/v1"

// Component names, in scorecard order.
const (
	TurnHandling        = "turn_handling"
	TranscriptIntegrity = "transcript_integrity"
	ToolReliability     = "tool_reliability"
	ResponseLatency     = "response_latency"
)

// Verdicts.
const (
	Pass        = "pass"
	Warn        = "warn"
	Fail        = "fail"
	NotMeasured = "not_measured"
	// Unscored is the verdict of a session no component could measure (no
	// chat history, no turns, no spans): no evidence, so no pass and no
	// score. It is left out of pass rates, trends and regression history.
	Unscored = "unscored"
)

// Severities of findings.
const (
	Info     = "info"
	Warning  = "warning"
	Critical = "critical"
)

// Scorecard is the result for one session. Field order is the JSON order.
type Scorecard struct {
	Schema         string `json:"schema"`
	ScoringVersion string `json:"scoring_version"`
	ModelVersion   string `json:"model_version"`
	// Inputs are the signals scored: recording, traces, logs.
	Inputs     []string    `json:"inputs"`
	Session    SessionRef  `json:"session"`
	Completion Completion  `json:"completion"`
	Overall    Overall     `json:"overall"`
	Components []Component `json:"components"`
	Metrics    Metrics     `json:"metrics"`
	// Audio is the heard turn-taking, when the session had a recording.
	Audio *Audio `json:"audio,omitempty"`
	// Spans are the latency breakdown and errors of the SDK's spans.
	Spans *SpanMetrics `json:"spans,omitempty"`
	// Policy names the policy the session was scored with, when the config
	// has agents' policies or rules (docs/policies.md).
	Policy *PolicyRef `json:"policy,omitempty"`
	// Rules are the results of the rules whose when matched the session.
	Rules []RuleResult `json:"rules,omitempty"`
	// Usage is what the session's model calls used, as the SDK reported it
	// (left out when a recording is scored alone).
	Usage *Usage `json:"usage,omitempty"`
	// Cost is the usage priced by scoring.pricing (left out without a
	// price table, or without a usage report).
	Cost *Cost `json:"cost,omitempty"`
}

// SessionRef names the session scored.
type SessionRef struct {
	Identity
	Source string `json:"source"`
	// The rest is known when the daemon scored the session from every
	// signal; `lkscore score` on a recording alone leaves it out.
	SDK                 *SDKRef  `json:"sdk,omitempty"`
	CloseReason         string   `json:"close_reason,omitempty"`
	CloseReasonSource   string   `json:"close_reason_source,omitempty"`
	CloseReasonEvidence string   `json:"close_reason_evidence,omitempty"`
	DeploymentID        string   `json:"deployment_id,omitempty"`
	CloudAgentID        string   `json:"cloud_agent_id,omitempty"`
	APIKey              string   `json:"api_key,omitempty"` // the LiveKit key (project) that signed its signals
	Simulated           bool     `json:"simulated,omitempty"`
	RedactionEnabled    bool     `json:"redaction_enabled,omitempty"`
	Tags                []string `json:"tags,omitempty"`
	Outcome             string   `json:"outcome,omitempty"`
	JobStatus           string   `json:"job_status,omitempty"`
	JobError            string   `json:"job_error,omitempty"`
	// Error is the error text of an error close: the SDK's message, else
	// the job's error; "[redacted: N characters]" when the session is.
	Error         string            `json:"error,omitempty"`
	EndedBy       string            `json:"ended_by,omitempty"`
	RoomEndReason string            `json:"room_end_reason,omitempty"`
	Departures    []Departure       `json:"departures,omitempty"`
	Provenance    map[string]string `json:"provenance,omitempty"`
}

// SDKRef names the agents SDK that ran the session.
type SDKRef struct {
	Language string `json:"language,omitempty"`
	Version  string `json:"version,omitempty"`
}

// Completion is the close reason's effect: CR_ERROR fails the session.
type Completion struct {
	Close
	Status string `json:"status"` // completed, failed, unknown
}

// Overall is the weighted score and the verdict with its reasons.
type Overall struct {
	Score   float64  `json:"score"`
	Verdict string   `json:"verdict"`
	Reasons []string `json:"reasons"`
}

// Component is one scored aspect. Score = 100 − Deducted, floored at 0;
// every deducted point is in a finding.
type Component struct {
	Name     string    `json:"name"`
	Score    float64   `json:"score"`
	Verdict  string    `json:"verdict"`
	Weight   float64   `json:"weight"`
	Deducted float64   `json:"deducted"`
	Findings []Finding `json:"findings"`
	// FindingsOmitted is how many findings the list leaves out past
	// MaxFindings (boundFindings); the score counts them all.
	FindingsOmitted int `json:"findings_omitted,omitempty"`
	// NotMeasured says why no signal of the session could measure the
	// component (verdict not_measured, score 0, left out of the overall).
	NotMeasured string `json:"not_measured,omitempty"`
}

// Finding explains a deduction (or, with deduction 0, an observation).
type Finding struct {
	Code      string       `json:"code"`
	Severity  string       `json:"severity"`
	ItemID    string       `json:"item_id,omitempty"`
	Turn      Opt[int]     `json:"turn,omitzero"` // index of the item in the chat history
	Value     Opt[float64] `json:"value,omitzero"`
	Threshold Opt[float64] `json:"threshold,omitzero"`
	Deduction float64      `json:"deduction"`
	Message   string       `json:"message"`
}

// Comparable reports whether the card's overall score says how the agent
// did: some component was measured (not unscored, nor a CR_ERROR close
// with nothing else measured, whose 0 is no score), and the caller said
// something (no no_user_turn). Trends, medians and the regression history take only
// comparable scores; a session that is not comparable still counts by its
// verdict.
func (sc *Scorecard) Comparable() bool {
	measured := false
	for _, c := range sc.Components {
		measured = measured || c.Verdict != NotMeasured
	}
	if !measured { // unscored, or failed by its close reason alone: no score
		return false
	}
	for _, c := range sc.Components {
		for _, f := range c.Findings {
			if f.Code == CodeNoUserTurn {
				return false
			}
		}
	}
	return true
}

// PolicyRef names the policy a scorecard was scored with and its hash:
// the same name and hash mean the same weights, thresholds and rules.
type PolicyRef struct {
	Name string `json:"name"`
	Hash string `json:"hash"`
}

// RuleResult is what one rule said about a session whose when matched.
type RuleResult struct {
	Name     string `json:"name"`
	Severity string `json:"severity"`
	// Status is violated, passed, or not_evaluated (Error says why: a
	// measure the session does not have, or the cost limit).
	Status    string  `json:"status"`
	Component string  `json:"component,omitempty"`
	Deduction float64 `json:"deduction"`
	// Values are what the expression read, for a rule violated or not
	// evaluated (empty for one passed).
	Values []RuleValue `json:"values"`
	Error  string      `json:"error,omitempty"`
}

// RuleValue is one value a rule's expression read, as it saw it.
type RuleValue struct {
	Name  string `json:"name"`
	Value string `json:"value"`
}

// Rule statuses.
const (
	RuleViolated     = "violated"
	RulePassed       = "passed"
	RuleNotEvaluated = "not_evaluated"
)

// CodeNoUserTurn is the finding of a chat history in which the agent spoke
// and the caller never did: the score says nothing of how the agent did
// (Comparable).
const CodeNoUserTurn = "no_user_turn"
