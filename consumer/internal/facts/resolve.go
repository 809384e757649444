package facts

import (
	"encoding/json"
	"slices"
	"unicode/utf8"

	"github.com/livekit/protocol/livekit"
	"github.com/livekit/protocol/livekit/agent"

	"github.com/lkscore/lkscore/recording"
	"github.com/lkscore/lkscore/scoring"
	"github.com/lkscore/lkscore/session"
)

// Fact fields.
const (
	FieldCloseReason  = "close_reason"
	FieldAgentName    = "agent_name"
	FieldSDKLanguage  = "sdk_language"
	FieldSDKVersion   = "sdk_version"
	FieldDeploymentID = "deployment_id"
	FieldCloudAgentID = "cloud_agent_id"
	FieldSimulated    = "simulated"
	FieldRedaction    = "redaction_enabled"
	FieldTag          = "tag"
	FieldOutcome      = "outcome"
	FieldEvaluation   = "evaluation"
	FieldJobStatus    = "job_status"
	// FieldRoomName is the room's name, from any webhook or the SDK's logs.
	FieldRoomName = "room_name"
	// FieldErrorText is the SDK's own error message for an error close.
	FieldErrorText = "error_text"
	// FieldInput names a signal that said something: traces or logs.
	FieldInput = "input"
	// FieldRecordingExpected is the session report's word on whether a
	// recording upload follows ("true", "false").
	FieldRecordingExpected = "recording_expected"
	// FieldAPIKey is the LiveKit API key that signed a signal (its project).
	FieldAPIKey = "api_key"
	// FieldUsage is the session report's usage: a JSON list of
	// session.ModelUsage.
	FieldUsage = "usage"
)

// Fact sources, in the order close reasons are trusted (docs/facts.md).
const (
	SourceSummary        = recording.SourceSummary // the header's session_summary
	SourceOTLPSpan       = "otlp_span"             // a span's lk.close_reason
	SourceOTLPLog        = "otlp_log"              // a log record that names the reason
	SourceOTLPLogImplied = "otlp_log_implied"      // a log record that implies it
	SourceJobStatus      = "job_status"            // agent_job_ended: JS_FAILED (not a departure) → CR_ERROR
	SourceAbsent         = recording.SourceAbsent  // no signal said anything
	SourceHeader         = "header"                // other header fields
	SourceWebhook        = "webhook"               // agent_job_ended's job
	SourceOTLP           = "otlp"                  // other OTLP attributes
)

// closeReasonRank orders close-reason sources: higher wins.
var closeReasonRank = map[string]int{
	SourceSummary: 6, SourceOTLPSpan: 5, SourceOTLPLog: 4, SourceOTLPLogImplied: 3, SourceJobStatus: 2, SourceRoom: 1,
}

// fieldRank orders the sources of the other fields: higher wins.
var fieldRank = map[string]int{SourceWebhook: 3, SourceHeader: 2, SourceOTLP: 1}

// notKeptRedacted is what a redacted session's facts do not keep: the SDK's
// error text, and its room's name unless it is a keyed hash.
func notKeptRedacted(o Observation) bool {
	return o.Field == FieldErrorText || (o.Field == FieldRoomName && !IsKeyedHash(o.Value))
}

// MaxObservations bounds one session's facts: a hostile or chatty agent
// cannot grow an entry without limit.
const MaxObservations = 256

// factUpdate is what one signal adds to a session's facts.
type Update struct {
	RoomID, JobID string
	Observations  []Observation
	Recording     *RecordingRef
	JobEnded      bool
	Spans         []scoring.Span
}

func hasField(obs []Observation, field string) bool {
	return slices.ContainsFunc(obs, func(o Observation) bool { return o.Field == field })
}

// Merge adds u to f and reports whether anything changed. A session any
// signal says is redacted keeps no error text (an error can quote what was
// said) and its room's name only as a keyed hash: none is added, and any
// added before is dropped.
func Merge(f *SessionFacts, u Update) bool {
	changed := false
	redacted := redactedIn(f.Observations) || redactedIn(u.Observations)
	if redacted {
		n := len(f.Observations)
		f.Observations = slices.DeleteFunc(f.Observations, notKeptRedacted)
		changed = len(f.Observations) != n
	}
	for _, o := range u.Observations {
		if redacted && notKeptRedacted(o) {
			continue
		}
		i, found := slices.BinarySearchFunc(f.Observations, o, Observation.Compare)
		if found || len(f.Observations) >= MaxObservations || (o.Field == FieldUsage && hasField(f.Observations, FieldUsage)) {
			// A session has one usage report: the first kept, so a chatty
			// or hostile sender cannot grow the entry by kilobytes a time.
			continue
		}
		f.Observations = slices.Insert(f.Observations, i, o)
		changed = true
	}
	// The first recording found stays: a re-upload of the same session has
	// the same key, and the dedup of session work made the first one win
	// before facts existed too.
	if u.Recording != nil && f.Recording == nil {
		f.Recording, changed = u.Recording, true
	}
	if u.JobEnded && !f.JobEnded {
		f.JobEnded, changed = true, true
	}
	if len(u.Spans) > 0 {
		var added bool
		if f.Spans, added = MergeSpans(f.Spans, u.Spans); added {
			changed = true
		}
	}
	return changed
}

// redactedIn reports whether any observation says the session is redacted.
func redactedIn(obs []Observation) bool {
	return slices.ContainsFunc(obs, func(o Observation) bool { return o.Field == FieldRedaction && o.Value == "true" })
}

// closeReasonOrder breaks ties between equally trusted close reasons: the
// more serious one wins.
var closeReasonOrder = map[string]int{agent.CloseReason_CR_ERROR.String(): 0, agent.CloseReason_CR_PARTICIPANT_DISCONNECTED.String(): 1,
	agent.CloseReason_CR_USER_INITIATED.String(): 2, agent.CloseReason_CR_JOB_SHUTDOWN.String(): 3,
	agent.CloseReason_CR_COMPLETED.String(): 4, agent.CloseReason_CR_UNKNOWN.String(): 5}

// Resolve derives the facts from a set of observations. It is a pure
// function of the set: the same observations in any order resolve alike.
func Resolve(obs []Observation) Resolved {
	r := Resolved{Close: session.Close{CloseReason: agent.CloseReason_CR_UNKNOWN.String(), CloseReasonSource: SourceAbsent}}
	r.Provenance = map[string]string{}
	best := map[string]Observation{}
	tags := map[string]bool{}
	for _, o := range obs {
		if notBest(&r, tags, o) {
			continue
		}
		rank := fieldRank
		if o.Field == FieldCloseReason {
			rank = closeReasonRank
			if o.Value == agent.CloseReason_CR_UNKNOWN.String() {
				continue // says nothing
			}
		}
		if cur, ok := best[o.Field]; !ok || better(o, cur, rank) {
			best[o.Field] = o
		}
	}
	// Where each single-valued field lands.
	dst := map[string]*string{FieldAgentName: &r.AgentName, FieldSDKLanguage: &r.SDKLanguage, FieldSDKVersion: &r.SDKVersion,
		FieldDeploymentID: &r.DeploymentID, FieldCloudAgentID: &r.CloudAgentID, FieldOutcome: &r.Outcome, FieldJobStatus: &r.JobStatus,
		FieldJobError: &r.JobError, FieldRoomName: &r.RoomName, FieldErrorText: &r.ErrorText, FieldAPIKey: &r.APIKey}
	story := storyOf(obs)
	story.apply(&r)
	// The room's story reads as the SDK that ran the session would have
	// told it: the same ending, the same close reason.
	sdk := ""
	if o, ok := best[FieldSDKLanguage]; ok {
		sdk = o.Value
	}
	if reason, evidence := story.closeReason(sdk); reason != "" {
		o := Observation{Field: FieldCloseReason, Value: reason, Source: SourceRoom, Evidence: evidence}
		if cur, ok := best[FieldCloseReason]; !ok || better(o, cur, closeReasonRank) {
			best[FieldCloseReason] = o
		}
	}
	for field, o := range best {
		r.Provenance[field] = o.Source
		if field == FieldCloseReason {
			r.CloseReason, r.CloseReasonSource, r.CloseReasonEvidence = o.Value, o.Source, o.Evidence
		} else if p := dst[field]; p != nil {
			*p = o.Value
		}
	}
	if _, named := best[FieldCloseReason]; !named {
		r.CloseReasonEvidence = unnamedEvidence(r, story, sdk)
	}
	for t := range tags {
		r.Tags = append(r.Tags, t)
	}
	slices.Sort(r.Tags)
	slices.Sort(r.Inputs)
	if len(r.Provenance) == 0 {
		r.Provenance = nil
	}
	return r
}

// better reports whether o is trusted over cur: by its source's rank, then,
// between close reasons, the more serious, then by the observations' order.
func better(o, cur Observation, rank map[string]int) bool {
	if d := rank[o.Source] - rank[cur.Source]; d != 0 {
		return d > 0
	}
	if o.Field == FieldCloseReason {
		if d := closeReasonOrder[o.Value] - closeReasonOrder[cur.Value]; d != 0 {
			return d < 0
		}
	}
	return o.Compare(cur) < 0
}

// notBest applies to r an observation of a field that is not one value
// from its best source (tags, flags, inputs, the session report's word, the
// room's story, which Resolve reads apart) and reports whether o was one.
func notBest(r *Resolved, tags map[string]bool, o Observation) bool {
	switch o.Field {
	case FieldTag:
		tags[o.Value] = true
	case FieldSimulated:
		r.Simulated = r.Simulated || o.Value == "true"
	case FieldRedaction:
		r.RedactionEnabled = r.RedactionEnabled || o.Value == "true"
	case FieldEvaluation:
		// kept in the facts; the scorecard does not carry them yet
	case FieldInput:
		if !slices.Contains(r.Inputs, o.Value) {
			r.Inputs = append(r.Inputs, o.Value)
		}
	case FieldUsage:
		var models []session.ModelUsage
		if json.Unmarshal([]byte(o.Value), &models) == nil && !r.UsageReported {
			r.Usage, r.UsageReported = models, true // Merge keeps one report
		}
	case FieldRecordingExpected:
		if r.RecordingExpected != "true" { // any report that says a recording follows wins
			r.RecordingExpected = o.Value
		}
	case FieldDeparture, FieldRoomEnd, FieldAgentIdentity:
		// the room's story, read from the whole set
	default:
		return false
	}
	return true
}

// unnamedEvidence says why no close reason was named where a signal said
// something about the end: the agent left the room, by LiveKit's job status
// or the room's webhooks.
func unnamedEvidence(r Resolved, story roomStory, sdk string) string {
	if why := story.ambiguous(sdk); why != "" {
		return why
	}
	if r.JobStatus == livekit.JobStatus_JS_FAILED.String() && IsDepartureError(r.JobError) {
		return "job_status: JS_FAILED (" + r.JobError + ") is livekit-server's record of the agent leaving the room, not an error"
	}
	return ""
}

// NamedOutright reports whether a close reason from source was named
// outright (a summary, a span or a log record that names it), not implied.
func NamedOutright(source string) bool {
	return closeReasonRank[source] >= closeReasonRank[SourceOTLPLog]
}

// MaxEvidence bounds an evidence string (or a value) kept from a record.
const MaxEvidence = 200

// Bounded cuts s to at most n bytes on a character boundary.
func Bounded(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}
