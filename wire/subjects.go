package wire

import (
	"strconv"
	"strings"
)

// Default prefixes (config keys nats.subject_prefix and nats.stream_prefix).
const (
	DefaultSubjectPrefix = "lkscore."
	DefaultStreamPrefix  = "LKSCORE"
)

// Subjects names every NATS subject, stream and bucket lkscore uses. It is
// the one place where they are spelled; everything else asks it.
type Subjects struct {
	prefix       string // e.g. "lkscore."
	streamPrefix string // e.g. "LKSCORE"
}

// NewSubjects builds the naming scheme from the configured prefixes.
func NewSubjects(subjectPrefix, streamPrefix string) Subjects {
	return Subjects{prefix: subjectPrefix, streamPrefix: streamPrefix}
}

// Default is the naming scheme of a daemon with default prefixes.
func Default() Subjects { return NewSubjects(DefaultSubjectPrefix, DefaultStreamPrefix) }

// Webhook is the subject a webhook event of the given name is stored on.
func (s Subjects) Webhook(event string) string { return s.prefix + "webhook." + event }

// WebhookAll matches every stored webhook.
func (s Subjects) WebhookAll() string { return s.prefix + "webhook.>" }

// UploadStored is the subject announcing a stored recording upload.
func (s Subjects) UploadStored() string { return s.prefix + "upload.stored" }

// UploadAll matches every upload notice.
func (s Subjects) UploadAll() string { return s.prefix + "upload.>" }

// Session is the subject of session work with the given close reason.
func (s Subjects) Session(closeReason string) string { return s.prefix + "session." + closeReason }

// SessionAll matches all session work.
func (s Subjects) SessionAll() string { return s.prefix + "session.>" }

// Result is the subject of a scorecard for a session with the given close reason.
func (s Subjects) Result(closeReason string) string { return s.prefix + "result." + closeReason }

// ResultAll matches every scorecard on the results stream.
func (s Subjects) ResultAll() string { return s.prefix + "result.>" }

// AgentResult is the subject of a scorecard on the per-agent results
// stream (pipeline.agent_results): lkscore.agent.<AgentToken>.<close reason>.
func (s Subjects) AgentResult(agent, closeReason string) string {
	return s.prefix + "agent." + AgentToken(agent) + "." + closeReason
}

// AgentResultsOf matches every scorecard of one agent on the per-agent
// results stream.
func (s Subjects) AgentResultsOf(agent string) string {
	return s.prefix + "agent." + AgentToken(agent) + ".>"
}

// AgentResultAll matches the whole per-agent results stream.
func (s Subjects) AgentResultAll() string { return s.prefix + "agent.>" }

// DLQ is the dead-letter subject of a stage (locate, score).
func (s Subjects) DLQ(stage string) string { return s.prefix + "dlq." + stage }

// DLQAll matches every dead letter.
func (s Subjects) DLQAll() string { return s.prefix + "dlq.>" }

// Alert is the subject of an alert of kind about agent.
func (s Subjects) Alert(kind, agent string) string {
	return s.prefix + "alert." + kind + "." + Token(agent)
}

// AlertsOf matches every alert about agent.
func (s Subjects) AlertsOf(agent string) string { return s.prefix + "alert.*." + Token(agent) }

// AlertAll matches every alert.
func (s Subjects) AlertAll() string { return s.prefix + "alert.>" }

// Forget is where `lkscore forget` tells running dashboards to drop a
// session from their index (core NATS, request-reply; the body is the
// session key). No stream stores it.
func (s Subjects) Forget() string { return s.prefix + "control.forget" }

// Ingestion is where the dashboard asks every running process what its
// ingest saw (core NATS, one request, every process answers with a JSON
// report; docs/operations.md, "Is my webhook arriving?"). No stream stores it.
func (s Subjects) Ingestion() string { return s.prefix + "control.ingestion" }

// Forward is where the tee announces a copy to relay to one target (its
// consumer name, ForwardConsumer).
func (s Subjects) Forward(target string) string { return s.prefix + "forward." + target }

// ForwardAll matches every forward notice.
func (s Subjects) ForwardAll() string { return s.prefix + "forward.>" }

// ForwardStream holds the tee's notices until each is relayed (created
// only when forward.targets are configured).
func (s Subjects) ForwardStream() string { return s.streamPrefix + "_FORWARD" }

// WebhookStream holds received webhooks.
func (s Subjects) WebhookStream() string { return s.streamPrefix + "_WEBHOOKS" }

// UploadStream holds upload notices.
func (s Subjects) UploadStream() string { return s.streamPrefix + "_UPLOADS" }

// SessionStream holds session work, one message per session.
func (s Subjects) SessionStream() string { return s.streamPrefix + "_SESSIONS" }

// ResultStream holds scorecards, replayable by any number of consumers.
func (s Subjects) ResultStream() string { return s.streamPrefix + "_RESULTS" }

// AgentResultStream holds the scorecards again, by agent
// (pipeline.agent_results).
func (s Subjects) AgentResultStream() string { return s.streamPrefix + "_AGENT_RESULTS" }

// DLQStream holds dead letters.
func (s Subjects) DLQStream() string { return s.streamPrefix + "_DLQ" }

// AlertStream holds the alerts.
func (s Subjects) AlertStream() string { return s.streamPrefix + "_ALERTS" }

// SessionFacts is the key-value bucket of session facts (room_id.job_id).
func (s Subjects) SessionFacts() string { return s.streamPrefix + "_SESSION_FACTS" }

// EgressLinks is the key-value bucket of egress files by room.
func (s Subjects) EgressLinks() string { return s.streamPrefix + "_EGRESS_LINKS" }

// RedactedRooms is the key-value bucket of the rooms a signal said are
// redacted (room ids only): ingest hashes their later events' room names.
func (s Subjects) RedactedRooms() string { return s.streamPrefix + "_REDACTED_ROOMS" }

// RegressionBucket is the key-value bucket of the regression detector.
func (s Subjects) RegressionBucket() string { return s.streamPrefix + "_REGRESSION" }

// ScoringBucket is the key-value bucket of the scoring configs a rescore
// asks the workers to score with, by scoring version (lkscore rescore).
func (s Subjects) ScoringBucket() string { return s.streamPrefix + "_SCORING" }

// Token makes a name usable as one subject or key-value key token, the one
// mapping alert subjects and the facts and egress keys use: anything but
// letters, digits, '-' and '_' becomes '_', and the empty name is "_". It is
// readable but not one-to-one ("a.b" and "a_b" share a token): the
// Lk-Agent-Name header and the entries themselves carry the exact name.
// AgentToken is the one-to-one mapping.
func Token(name string) string {
	if name == "" {
		return "_"
	}
	return strings.Map(func(r rune) rune {
		if tokenByte(r) || r == '_' {
			return r
		}
		return '_'
	}, name)
}

// AgentToken makes an agent name one subject token, one-to-one: letters,
// digits and '-' stay, '_' becomes "__", any other byte "_XX" (its
// upper-case hex). "support-bot" stays "support-bot", "a.b" is "a_2Eb",
// "a_b" is "a__b", and the empty name is "_".
func AgentToken(name string) string {
	if name == "" {
		return "_"
	}
	var b strings.Builder
	for i := 0; i < len(name); i++ {
		c := name[i]
		switch {
		case c == '_':
			b.WriteString("__")
		case tokenByte(rune(c)):
			b.WriteByte(c)
		default:
			b.WriteByte('_')
			h := strings.ToUpper(strconv.FormatUint(uint64(c), 16))
			if len(h) == 1 {
				b.WriteByte('0')
			}
			b.WriteString(h)
		}
	}
	return b.String()
}

// AgentName reverses AgentToken; ok is false for a token AgentToken does
// not make.
func AgentName(token string) (name string, ok bool) {
	if token == "_" {
		return "", true
	}
	if token == "" {
		return "", false
	}
	var b strings.Builder
	for i := 0; i < len(token); i++ {
		c := token[i]
		switch {
		case c != '_':
			if !tokenByte(rune(c)) {
				return "", false
			}
			b.WriteByte(c)
		case i+1 < len(token) && token[i+1] == '_':
			b.WriteByte('_')
			i++
		case i+2 < len(token):
			v, err := strconv.ParseUint(token[i+1:i+3], 16, 8)
			if err != nil || strings.ToUpper(token[i+1:i+3]) != token[i+1:i+3] || tokenByte(rune(v)) || v == '_' {
				return "", false
			}
			b.WriteByte(byte(v))
			i += 2
		default:
			return "", false
		}
	}
	return b.String(), true
}

func tokenByte(r rune) bool {
	return r == '-' || (r >= '0' && r <= '9') || (r >= 'a' && r <= 'z') || (r >= 'A' && r <= 'Z')
}
