package session

import (
	"encoding/json"
	"slices"
	"strconv"
	"unicode/utf8"
)

// AppendJSON appends the scorecard's JSON to b: byte for byte what
// encoding/json's Marshal writes for it (TestScorecardJSONMatchesEncodingJSON,
// FuzzScorecardJSON), without reflection. The error is encoding/json's:
// a NaN or infinite number. Scoring a short call spent about as long in
// json.Marshal as in reading its chat history (docs/performance.md).
func (sc *Scorecard) AppendJSON(b []byte) ([]byte, error) {
	e := cardEncoder{b: b}
	e.raw(`{"schema":`)
	e.str(sc.Schema)
	e.raw(`,"scoring_version":`)
	e.str(sc.ScoringVersion)
	e.raw(`,"model_version":`)
	e.str(sc.ModelVersion)
	e.raw(`,"inputs":`)
	e.strs(sc.Inputs)
	e.raw(`,"session":`)
	e.sessionRef(&sc.Session)
	e.raw(`,"completion":{"close_reason":`)
	e.closeFields(&sc.Completion.Close)
	e.raw(`,"status":`)
	e.str(sc.Completion.Status)
	e.raw(`},"overall":{"score":`)
	e.float(sc.Overall.Score)
	e.raw(`,"verdict":`)
	e.str(sc.Overall.Verdict)
	e.raw(`,"reasons":`)
	e.strs(sc.Overall.Reasons)
	e.raw(`},"components":`)
	e.components(sc.Components)
	e.raw(`,"metrics":`)
	e.metrics(&sc.Metrics)
	if sc.Audio != nil {
		e.raw(`,"audio":`)
		e.audio(sc.Audio)
	}
	if sc.Spans != nil {
		e.raw(`,"spans":`)
		e.spans(sc.Spans)
	}
	if sc.Policy != nil {
		e.raw(`,"policy":{"name":`)
		e.str(sc.Policy.Name)
		e.raw(`,"hash":`)
		e.str(sc.Policy.Hash)
		e.raw(`}`)
	}
	if len(sc.Rules) > 0 {
		e.raw(`,"rules":`)
		e.rules(sc.Rules)
	}
	if sc.Usage != nil {
		e.raw(`,"usage":`)
		e.usage(sc.Usage)
	}
	if sc.Cost != nil {
		e.raw(`,"cost":`)
		e.cost(sc.Cost)
	}
	e.raw(`}`)
	return e.b, e.err
}

// cardEncoder appends JSON the way encoding/json writes it; err is the
// first number it could not write.
type cardEncoder struct {
	b   []byte
	err error
}

func (e *cardEncoder) raw(s string) { e.b = append(e.b, s...) }

// field writes an object's key, after a comma unless it is the first.
func (e *cardEncoder) field(first *bool, key string) {
	if !*first {
		e.b = append(e.b, ',')
	}
	*first = false
	e.b = append(e.b, '"')
	e.b = append(e.b, key...)
	e.b = append(e.b, '"', ':')
}

func (e *cardEncoder) int(v int64) { e.b = strconv.AppendInt(e.b, v, 10) }

func (e *cardEncoder) float(f float64) {
	b, err := AppendFloat(e.b, f)
	if err != nil {
		if e.err == nil {
			e.err = &json.MarshalerError{Err: err}
		}
		return
	}
	e.b = b
}

func (e *cardEncoder) bool(v bool) { e.b = strconv.AppendBool(e.b, v) }

func (e *cardEncoder) optInt(o Opt[int]) {
	if !o.Set {
		e.raw("null")
		return
	}
	e.int(int64(o.V))
}

func (e *cardEncoder) optFloat(o Opt[float64]) {
	if !o.Set {
		e.raw("null")
		return
	}
	e.float(o.V)
}

// array writes xs as a JSON array, each element by each, and null when xs
// is nil, as encoding/json does (an omitempty list is not written at all:
// its caller checks its length).
func array[T any](e *cardEncoder, xs []T, each func(*T)) {
	if xs == nil {
		e.raw("null")
		return
	}
	e.b = append(e.b, '[')
	for i := range xs {
		if i > 0 {
			e.b = append(e.b, ',')
		}
		each(&xs[i])
	}
	e.b = append(e.b, ']')
}

// strs writes a string slice.
func (e *cardEncoder) strs(s []string) { array(e, s, func(v *string) { e.str(*v) }) }

// str writes a JSON string as encoding/json's Marshal does: HTML
// characters, control characters, U+2028 and U+2029 escaped, invalid UTF-8
// as U+FFFD.
func (e *cardEncoder) str(s string) {
	const hex = "0123456789abcdef"
	b := append(e.b, '"')
	start := 0
	for i := 0; i < len(s); {
		if c := s[i]; c < utf8.RuneSelf {
			if c >= 0x20 && c != '"' && c != '\\' && c != '<' && c != '>' && c != '&' {
				i++
				continue
			}
			b = append(b, s[start:i]...)
			switch c {
			case '\\', '"':
				b = append(b, '\\', c)
			case '\b':
				b = append(b, '\\', 'b')
			case '\f':
				b = append(b, '\\', 'f')
			case '\n':
				b = append(b, '\\', 'n')
			case '\r':
				b = append(b, '\\', 'r')
			case '\t':
				b = append(b, '\\', 't')
			default:
				b = append(b, '\\', 'u', '0', '0', hex[c>>4], hex[c&0xF])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size == 1:
			b = append(b, s[start:i]...)
			b = append(b, `\ufffd`...)
		case r == '\u2028' || r == '\u2029':
			b = append(b, s[start:i]...)
			b = append(b, '\\', 'u', '2', '0', '2', hex[r&0xF])
		default:
			i += size
			continue
		}
		i += size
		start = i
	}
	b = append(b, s[start:]...)
	e.b = append(b, '"')
}

func (e *cardEncoder) sessionRef(s *SessionRef) {
	e.raw(`{"key":`)
	e.str(s.Key)
	e.raw(`,"room_id":`)
	e.str(s.RoomID)
	e.raw(`,"room_name":`)
	e.str(s.RoomName)
	e.raw(`,"job_id":`)
	e.str(s.JobID)
	e.raw(`,"agent_name":`)
	e.str(s.AgentName)
	e.raw(`,"source":`)
	e.str(s.Source)
	if s.SDK != nil {
		e.raw(`,"sdk":`)
		first := true
		e.b = append(e.b, '{')
		e.optStr(&first, "language", s.SDK.Language)
		e.optStr(&first, "version", s.SDK.Version)
		e.b = append(e.b, '}')
	}
	first := false
	e.optStr(&first, "close_reason", s.CloseReason)
	e.optStr(&first, "close_reason_source", s.CloseReasonSource)
	e.optStr(&first, "close_reason_evidence", s.CloseReasonEvidence)
	e.optStr(&first, "deployment_id", s.DeploymentID)
	e.optStr(&first, "cloud_agent_id", s.CloudAgentID)
	e.optStr(&first, "api_key", s.APIKey)
	if s.Simulated {
		e.raw(`,"simulated":true`)
	}
	if s.RedactionEnabled {
		e.raw(`,"redaction_enabled":true`)
	}
	if len(s.Tags) > 0 {
		e.raw(`,"tags":`)
		e.strs(s.Tags)
	}
	e.optStr(&first, "outcome", s.Outcome)
	e.optStr(&first, "job_status", s.JobStatus)
	e.optStr(&first, "job_error", s.JobError)
	e.optStr(&first, "error", s.Error)
	e.optStr(&first, "ended_by", s.EndedBy)
	e.optStr(&first, "room_end_reason", s.RoomEndReason)
	if len(s.Departures) > 0 {
		e.raw(`,"departures":`)
		array(e, s.Departures, func(d *Departure) {
			e.raw(`{"role":`)
			e.str(d.Role)
			e.raw(`,"reason":`)
			e.str(d.Reason)
			e.b = append(e.b, '}')
		})
	}
	if len(s.Provenance) > 0 {
		e.raw(`,"provenance":`)
		e.strMap(s.Provenance)
	}
	e.b = append(e.b, '}')
}

// optStr writes an omitempty string field.
func (e *cardEncoder) optStr(first *bool, key, v string) {
	if v != "" {
		e.field(first, key)
		e.str(v)
	}
}

// strMap writes a map with its keys sorted, as encoding/json does.
func (e *cardEncoder) strMap(m map[string]string) {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	e.b = append(e.b, '{')
	for i, k := range keys {
		if i > 0 {
			e.b = append(e.b, ',')
		}
		e.str(k)
		e.b = append(e.b, ':')
		e.str(m[k])
	}
	e.b = append(e.b, '}')
}

// closeFields writes Close's fields after `"close_reason":`.
func (e *cardEncoder) closeFields(c *Close) {
	e.str(c.CloseReason)
	e.raw(`,"close_reason_source":`)
	e.str(c.CloseReasonSource)
	first := false
	e.optStr(&first, "close_reason_evidence", c.CloseReasonEvidence)
}

func (e *cardEncoder) components(cs []Component) {
	array(e, cs, func(c *Component) {
		e.raw(`{"name":`)
		e.str(c.Name)
		e.raw(`,"score":`)
		e.float(c.Score)
		e.raw(`,"verdict":`)
		e.str(c.Verdict)
		e.raw(`,"weight":`)
		e.float(c.Weight)
		e.raw(`,"deducted":`)
		e.float(c.Deducted)
		e.raw(`,"findings":`)
		e.findings(c.Findings)
		if c.FindingsOmitted != 0 {
			e.raw(`,"findings_omitted":`)
			e.int(int64(c.FindingsOmitted))
		}
		first := false
		e.optStr(&first, "not_measured", c.NotMeasured)
		e.b = append(e.b, '}')
	})
}

func (e *cardEncoder) findings(fs []Finding) {
	array(e, fs, func(f *Finding) {
		e.raw(`{"code":`)
		e.str(f.Code)
		e.raw(`,"severity":`)
		e.str(f.Severity)
		first := false
		e.optStr(&first, "item_id", f.ItemID)
		if f.Turn.Set {
			e.raw(`,"turn":`)
			e.int(int64(f.Turn.V))
		}
		if f.Value.Set {
			e.raw(`,"value":`)
			e.float(f.Value.V)
		}
		if f.Threshold.Set {
			e.raw(`,"threshold":`)
			e.float(f.Threshold.V)
		}
		e.raw(`,"deduction":`)
		e.float(f.Deduction)
		e.raw(`,"message":`)
		e.str(f.Message)
		e.b = append(e.b, '}')
	})
}
