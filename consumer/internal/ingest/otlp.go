package ingest

import (
	"bytes"
	"cmp"
	"compress/gzip"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"mime"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/livekit/protocol/auth"
	collogs "go.opentelemetry.io/proto/otlp/collector/logs/v1"
	coltrace "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	common "go.opentelemetry.io/proto/otlp/common/v1"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"

	"github.com/lkscore/lkscore/consumer/internal/facts"
	"github.com/lkscore/lkscore/consumer/internal/failure"
	"github.com/lkscore/lkscore/consumer/internal/forward"
	"github.com/lkscore/lkscore/consumer/internal/metrics"
	"github.com/lkscore/lkscore/consumer/internal/seen"
	"github.com/lkscore/lkscore/internal/retrylog"
	"github.com/lkscore/lkscore/recording"
	"github.com/lkscore/lkscore/scoring"
	"github.com/lkscore/lkscore/session"
)

// The OTLP receiver reads the logs and traces both agents SDKs export to
// {base}/observability/{logs,traces}/otlp/v0 and keeps only the session
// facts in them (close reason, agent name, SDK, deployment, flags, tags,
// outcome); raw OTLP is never stored. Metrics are read and dropped.
// docs/formats.md, "OTLP logs and traces", says what the SDKs send.

// otlpRecursionLimit bounds message nesting (AnyValue in AnyValue…): the
// SDKs nest a few levels; a hostile body cannot make decoding recurse deep.
const otlpRecursionLimit = 32

// otlpSlotWait is how long an authenticated OTLP request waits for one of
// http.max_inflight_otlp decoders before its 503.
const otlpSlotWait = 5 * time.Second

// spooler keeps facts while NATS is down (spool.Spool).
type spooler interface {
	Put(ctx context.Context, signal string, updates []facts.Update) error
}

// factSink is where the receiver puts what it learned.
type factSink interface {
	Add(ctx context.Context, u facts.Update) error
}

// otlpReceiver serves one OTLP signal.
type otlpReceiver struct {
	signal string // logs, traces, metrics
	keys   auth.KeyProvider
	// connected says whether NATS is. When it is not, the facts a logs or
	// traces request carries go to spool (the recording store), or, with no
	// spool, the request gets 503 at once, before its body is read.
	connected func() bool
	spool     spooler
	refusals  *refusalLog
	facts     factSink // nil for metrics
	maxBody   int64    // both compressed and decompressed
	// maxElements caps the messages a body decodes into (limits.otlp_elements),
	// counted as it is read (readCounted).
	maxElements int
	// inflight caps the bodies read and decoded at once, all signals
	// together (http.max_inflight_otlp).
	inflight *slots
	bufs     *bodyBuffers // shared by the signals, like inflight
	metrics  *metrics.Ingest
	log      *slog.Logger
	seen     *seen.Tracker
	retries  *retrylog.Log
	// alwaysRedact is privacy.redaction: always; ids hashes a redacted
	// session's room name (facts.IdentityKeys.StoredRoomName).
	alwaysRedact bool
	ids          *facts.IdentityKeys
	rooms        *RedactedRooms
	timeout      time.Duration // one redacted-rooms request (nats.publish_timeout)
}

func (o *otlpReceiver) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	outcome := "stored"
	if err := o.serve(w, r); err != nil {
		f := failure.Classify(err)
		outcome = failure.HTTPReason(f.Status)
		o.metrics.Rejected.WithLabelValues("otlp", outcome).Inc()
		switch {
		case errors.Is(err, errBusy):
			w.Header().Set("Retry-After", "1")
			http.Error(w, err.Error(), f.Status)
		case f.Status == http.StatusServiceUnavailable:
			o.retries.Failed("otlp "+o.signal, "otlp facts not stored", err)
			w.Header().Set("Retry-After", "2")
			http.Error(w, "facts not stored, retry later", f.Status)
		default:
			// Never mention "disabled": the Python SDK stops exporting for good on it.
			http.Error(w, err.Error(), f.Status)
		}
	}
	o.metrics.Requests.WithLabelValues("otlp", outcome).Inc()
}

func (o *otlpReceiver) serve(w http.ResponseWriter, r *http.Request) error {
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", http.MethodPost)
		return failure.Refuse(http.StatusMethodNotAllowed, "use POST")
	}
	apiKey, err := verifyObservabilityToken(r.Header.Get("Authorization"), o.keys)
	if err != nil {
		reason, key := authReason(err)
		o.refusals.refused("otlp", reason, "OTLP "+o.signal+" refused: "+err.Error(), "path", cleanPath(r.URL.Path), "api_key", cleanPath(key),
			"hint", tokenHint(reason))
		return failure.Refuse(http.StatusUnauthorized, "%s", "refused: "+err.Error())
	}
	if o.facts != nil && o.spool == nil && !o.connected() {
		// Without NATS the facts cannot be stored, and waiting out the KV's
		// request timeout outlasted the SDK exporters' own 10 s. 503 at
		// once is the answer the OTLP exporters retry.
		return errors.New("nats not connected")
	}
	if err := o.inflight.takeWithin(r.Context(), otlpSlotWait, nil); err != nil {
		return failure.Refuse(http.StatusServiceUnavailable, "%w", errBusy)
	}
	defer o.inflight.give()
	if o.facts == nil { // metrics: read within the limit and dropped, never decoded
		if _, err := io.Copy(io.Discard, http.MaxBytesReader(w, r.Body, o.maxBody)); err != nil {
			return failure.Refuse(http.StatusRequestEntityTooLarge, "body exceeds %d bytes", o.maxBody)
		}
		o.metrics.OTLPDiscarded.WithLabelValues(o.signal).Inc()
		o.seen.Accept("otlp_"+o.signal, apiKey)
		w.WriteHeader(http.StatusOK)
		return nil
	}
	var logs collogs.ExportLogsServiceRequest
	var traces coltrace.ExportTraceServiceRequest
	var req proto.Message = &traces
	if o.signal == "logs" {
		req = &logs
	}
	buf := o.bufs.get()
	defer o.bufs.put(buf)
	body, isJSON, err := readOTLPBody(r, w, o.maxBody, o.maxElements, req.ProtoReflect().Descriptor(), buf)
	if err != nil {
		return fmt.Errorf("OTLP %s: %w", o.signal, err)
	}
	if err := o.decode(o.signal, body, isJSON, req); err != nil {
		return err
	}
	var updates map[sessionID]*facts.Update
	if o.signal == "logs" {
		updates = logFacts(&logs, isJSON)
	} else {
		updates = traceFacts(&traces)
	}
	hostile := dropHostile(updates)
	if hostile != nil && len(updates) == 0 {
		return o.answerRejected(w, req, isJSON, 0, hostile) // 400: nothing kept
	}
	o.hashRoomNames(r.Context(), updates)
	if err := o.store(r.Context(), sortedUpdates(updates), apiKey); err != nil {
		return err
	}
	o.retries.OK("otlp "+o.signal, "otlp facts stored again")
	o.seen.Accept("otlp_"+o.signal, apiKey)
	if hostile != nil {
		return o.answerRejected(w, req, isJSON, len(updates), hostile)
	}
	if isJSON {
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte("{}"))
		return nil
	}
	w.Header().Set("Content-Type", "application/x-protobuf")
	w.WriteHeader(http.StatusOK) // an empty Export*ServiceResponse
	return nil
}

// hashRoomNames keeps the room name of a session the request says is
// redacted (lk.redaction.enabled: its room is marked, RedactedRooms), of a
// room an earlier signal marked, or of every session under
// privacy.redaction: always, only as its keyed hash. A session whose
// redaction another signal tells later loses the name from its facts then
// (facts.Merge).
//
// While NATS is down (the facts go to the spool) the bucket cannot be
// asked: a name is then hashed whatever the room (no clear name is kept for
// want of an answer), and a mark is lost (the room's later webhooks, which
// need NATS too, are not hashed for it; its facts still drop clear names).
func (o *otlpReceiver) hashRoomNames(ctx context.Context, updates map[sessionID]*facts.Update) {
	ctx, cancel := context.WithTimeout(ctx, o.timeout)
	defer cancel()
	for _, u := range updates {
		redacted := o.alwaysRedact
		if slices.ContainsFunc(u.Observations, func(ob facts.Observation) bool { return ob.Field == facts.FieldRedaction && ob.Value == "true" }) {
			redacted = true
			if err := o.rooms.Mark(ctx, u.RoomID); err != nil {
				o.retries.Failed("otlp "+o.signal+" redacted rooms", "otlp: the room's redaction not recorded", err)
			}
		}
		named := slices.ContainsFunc(u.Observations, func(ob facts.Observation) bool { return ob.Field == facts.FieldRoomName })
		if !redacted && named {
			var err error
			if redacted, err = o.rooms.Redacted(ctx, u.RoomID); err != nil {
				redacted = true // unknown: hashed
			}
		}
		if !redacted {
			continue
		}
		for i, ob := range u.Observations {
			if ob.Field == facts.FieldRoomName {
				u.Observations[i].Value = o.ids.StoredRoomName(ob.Value)
			}
		}
	}
}

// store adds a request's facts, each session's with the signing key, to
// the facts bucket; while NATS is down it spools them (package spool).
func (o *otlpReceiver) store(ctx context.Context, sorted []*facts.Update, apiKey string) error {
	for _, u := range sorted {
		if u.JobID != "" && u.JobID != facts.RoomKeyJob {
			forward.NoteSessions(ctx, u.RoomID+"/"+u.JobID)
			u.Observations = append(u.Observations, facts.Observation{Field: facts.FieldAPIKey, Value: apiKey, Source: facts.SourceOTLP,
				Evidence: "OTLP token"})
		}
	}
	if o.spool != nil && !o.connected() {
		// agents-js sends a session's report logs once, and gives its
		// recording upload up when they are refused: keep the facts in the
		// store until NATS is back (package spool).
		kept := make([]facts.Update, len(sorted))
		for i, u := range sorted {
			kept[i] = *u
		}
		if err := o.spool.Put(ctx, o.signal, kept); err != nil {
			return err
		}
		o.log.Warn("otlp facts spooled: NATS is down", "signal", o.signal, "sessions", len(kept))
		return nil
	}
	for _, u := range sorted {
		if err := o.facts.Add(ctx, *u); err != nil {
			return err
		}
		o.metrics.OTLPFacts.WithLabelValues(o.signal).Add(float64(len(u.Observations)))
	}
	return nil
}

// readOTLPBody reads a request body within maxBody bytes, compressed and
// decompressed alike, counting its messages as it comes (413 past
// maxElements, readCounted), and says whether it is OTLP/JSON. The
// decompressed body is read into buf (a pooled buffer: decoding copies what
// it keeps).
func readOTLPBody(r *http.Request, w http.ResponseWriter, maxBody int64, maxElements int, md protoreflect.MessageDescriptor,
	buf *bytes.Buffer) ([]byte, bool, error) {
	mt, _, err := mime.ParseMediaType(r.Header.Get("Content-Type"))
	var isJSON bool
	switch {
	case err != nil:
		return nil, false, failure.Refuse(http.StatusUnsupportedMediaType, "Content-Type must be application/x-protobuf or application/json")
	case mt == "application/x-protobuf" || mt == "application/protobuf":
	case mt == "application/json":
		isJSON = true
	default:
		return nil, false, failure.Refuse(http.StatusUnsupportedMediaType, "Content-Type %q is not application/x-protobuf or application/json", mt)
	}
	if r.ContentLength > maxBody {
		return nil, false, failure.Refuse(http.StatusRequestEntityTooLarge, "body exceeds %d bytes", maxBody)
	}
	var body io.Reader = http.MaxBytesReader(w, r.Body, maxBody)
	switch enc := strings.ToLower(strings.TrimSpace(r.Header.Get("Content-Encoding"))); enc {
	case "", "identity":
	case "gzip":
		zr, err := gzip.NewReader(body)
		if err != nil {
			return nil, false, bodyError(err, maxBody)
		}
		body = zr
	default:
		return nil, false, failure.Refuse(http.StatusUnsupportedMediaType, "Content-Encoding %q is not gzip", enc)
	}
	if err := readCounted(body, isJSON, md, maxElements, maxBody, buf); err != nil {
		return nil, false, bodyError(err, maxBody)
	}
	return buf.Bytes(), isJSON, nil
}

// bodyError classifies an error met reading a body: over a limit (413),
// else bad framing, bad gzip or a client that stalled (400).
func bodyError(err error, maxBody int64) error {
	var tooLarge *http.MaxBytesError
	var elements *ElementsError
	switch {
	case errors.As(err, &elements):
		return failure.Refuse(http.StatusRequestEntityTooLarge, "%w", err)
	case errors.As(err, &tooLarge), errors.Is(err, errBodyTooLarge):
		return failure.Refuse(http.StatusRequestEntityTooLarge, "body exceeds %d bytes (limits.otlp_bytes)", maxBody)
	}
	return failure.Refuse(http.StatusBadRequest, "read body: %v", err)
}

// bodyBuffers pools the buffers OTLP bodies are read into: at most
// http.max_inflight_otlp are in use at once, and reusing them spares the
// garbage a growing buffer leaves per request.
type bodyBuffers struct{ pool sync.Pool }

func (b *bodyBuffers) get() *bytes.Buffer {
	if v, ok := b.pool.Get().(*bytes.Buffer); ok {
		return v
	}
	return new(bytes.Buffer)
}

func (b *bodyBuffers) put(buf *bytes.Buffer) {
	buf.Reset()
	b.pool.Put(buf)
}

var (
	otlpProto = proto.UnmarshalOptions{RecursionLimit: otlpRecursionLimit, DiscardUnknown: true}
	otlpJSON  = protojson.UnmarshalOptions{RecursionLimit: otlpRecursionLimit, DiscardUnknown: true}
)

// decode decodes a body readOTLPBody counted.
func (o *otlpReceiver) decode(what string, body []byte, isJSON bool, m proto.Message) error {
	if err := decodeOTLP(body, isJSON, m); err != nil {
		return failure.Refuse(http.StatusBadRequest, "OTLP %s: %v", what, err)
	}
	return nil
}

// decodeOTLP decodes OTLP/protobuf or OTLP/JSON. The JSON form's trace and
// span ids are hex, not base64; lkscore does not use them, and the agents-js
// logs leave them empty.
func decodeOTLP(b []byte, isJSON bool, m proto.Message) error {
	if isJSON {
		return otlpJSON.Unmarshal(b, m)
	}
	return otlpProto.Unmarshal(b, m)
}

// sessionID names a session in OTLP attributes.
type sessionID struct{ room, job string }

// attrs is a view of OTLP attributes, innermost first (record, scope,
// resource): the first that has a key wins.
type attrs [][]*common.KeyValue

func (a attrs) get(key string) (*common.AnyValue, bool) {
	for _, level := range a {
		for _, kv := range level {
			if kv.GetKey() == key {
				return kv.GetValue(), true
			}
		}
	}
	return nil, false
}

// str returns an attribute as a bounded string.
func (a attrs) str(key string) string {
	v, ok := a.get(key)
	if !ok {
		return ""
	}
	return facts.Bounded(anyString(v), facts.MaxEvidence)
}

// session is the session the attributes name: room_id and job_id as the
// SDKs send them today, or lk.room_id and lk.job_id, the names LiveKit's
// OpenTelemetry registry (livekit/protocol otel/) moves the agents to
// (livekit/agents#7973), with no alias for the old ones.
func (a attrs) session() sessionID {
	return sessionID{room: cmp.Or(a.str("room_id"), a.str("lk.room_id")), job: cmp.Or(a.str("job_id"), a.str("lk.job_id"))}
}

// anyString renders a scalar attribute value.
func anyString(v *common.AnyValue) string {
	switch x := v.GetValue().(type) {
	case *common.AnyValue_StringValue:
		return x.StringValue
	case *common.AnyValue_BoolValue:
		return strconv.FormatBool(x.BoolValue)
	case *common.AnyValue_IntValue:
		return strconv.FormatInt(x.IntValue, 10)
	case *common.AnyValue_DoubleValue:
		return strconv.FormatFloat(x.DoubleValue, 'g', -1, 64)
	}
	return ""
}

// collector gathers observations per session.
type factCollector map[sessionID]*facts.Update

func (c factCollector) add(id sessionID, o facts.Observation) {
	if id.room == "" || o.Value == "" {
		return
	}
	u := c[id]
	if u == nil {
		u = &facts.Update{RoomID: id.room, JobID: id.job}
		c[id] = u
	}
	if len(u.Observations) < facts.MaxObservations {
		u.Observations = append(u.Observations, o)
	}
}

// span keeps one span of a session.
func (c factCollector) span(id sessionID, s scoring.Span) {
	c.add(id, facts.Observation{Field: facts.FieldInput, Value: session.InputTraces, Source: facts.SourceOTLP})
	if u := c[id]; u != nil && len(u.Spans) < facts.MaxSpans {
		u.Spans = append(u.Spans, s)
	}
}

// common facts every record or span may carry.
func (c factCollector) identity(id sessionID, a attrs) {
	c.add(id, facts.Observation{Field: facts.FieldAgentName, Value: a.str("lk.agent_name"), Source: facts.SourceOTLP})
	c.add(id, facts.Observation{Field: facts.FieldCloudAgentID, Value: a.str("lk.cloud_agent_id"), Source: facts.SourceOTLP})
	c.add(id, facts.Observation{Field: facts.FieldDeploymentID, Value: a.str("lk.deployment_id"), Source: facts.SourceOTLP})
	if a.str("lk.simulation.enabled") == "true" {
		c.add(id, facts.Observation{Field: facts.FieldSimulated, Value: "true", Source: facts.SourceOTLP})
	}
	if a.str("lk.redaction.enabled") == "true" {
		c.add(id, facts.Observation{Field: facts.FieldRedaction, Value: "true", Source: facts.SourceOTLP})
	}
	if lang := a.str("telemetry.sdk.language"); lang != "" && a.str("service.name") != "" {
		c.add(id, facts.Observation{Field: facts.FieldSDKLanguage, Value: lang, Source: facts.SourceOTLP, Evidence: "resource telemetry.sdk.language"})
	}
	if v, ok := a.get("lk.close_reason"); ok {
		evidence := "lk.close_reason=" + facts.Bounded(anyString(v), 64)
		if e := a.str(attrCloseError); e != "" && e != "null" {
			evidence += " " + attrCloseError + "=" + facts.Bounded(e, 120)
		}
		c.closeReason(id, facts.SourceOTLPLog, anyString(v), evidence)
	}
	if e := a.str(attrCloseError); e != "" && e != "null" {
		c.add(id, facts.Observation{Field: facts.FieldErrorText, Value: e, Source: facts.SourceOTLP, Evidence: attrCloseError})
	}
	// The room's name: agents-js's chat_history logs carry it as "room",
	// agents-py's participant-disconnect record too. (The spans' name for
	// it is lk.pii.room_name: upstream counts it as personal, and
	// lkscore keeps no lk.pii.* attribute.)
	if v := a.str("room"); v != "" {
		c.add(id, facts.Observation{Field: facts.FieldRoomName, Value: v, Source: facts.SourceOTLP, Evidence: "log attribute room"})
	}
	if v := a.str(attrAgentVersion); v != "" {
		c.add(id, facts.Observation{Field: facts.FieldTag, Value: facts.Bounded(session.DefaultVersionTag+v, 128), Source: facts.SourceOTLP,
			Evidence: attrAgentVersion})
	}
}

// Attributes of the lkscore observer's record (examples/agents-js,
// examples/agents-python): the close event's error, and the agent's version,
// which becomes the version tag regression detection keys on.
const (
	attrCloseError   = "lk.close_error"
	attrAgentVersion = "lkscore.agent_version"
)

// closeReason records a close reason a signal named.
func (c factCollector) closeReason(id sessionID, source, raw, evidence string) {
	name, _ := recording.NormalizeCloseReasonString(raw)
	c.add(id, facts.Observation{Field: facts.FieldCloseReason, Value: name, Source: source,
		Evidence: source + ": " + facts.Bounded(evidence, facts.MaxEvidence)})
}

// Log bodies that say how a session closed (agents-js 1.9.0
// agent_session.js and room_io.js; agents-py 1.7 voice/agent_session.py and
// room_io.py).
const (
	logSessionClosed       = "AgentSession closed" // agents-js, INFO, attribute reason
	logSessionClosedPy     = "session closed"      // agents-py, DEBUG, attribute reason
	logParticipantGone     = "closing agent session due to participant disconnect"
	logUnrecoverable       = "AgentSession is closing due to unrecoverable error"
	logUnrecoverableJS     = "AgentSession is closing due to an unrecoverable error"
	logSessionReport       = "session report"
	logOutcome             = "outcome"
	logEvaluation          = "evaluation"
	sdkLanguageFromJSONLog = "nodejs"
)

// logFacts reads the facts out of an OTLP logs request.
func logFacts(req *collogs.ExportLogsServiceRequest, isJSON bool) map[sessionID]*facts.Update {
	c := factCollector{}
	for _, rl := range req.GetResourceLogs() {
		for _, sl := range rl.GetScopeLogs() {
			for _, rec := range sl.GetLogRecords() {
				a := attrs{rec.GetAttributes(), sl.GetScope().GetAttributes(), rl.GetResource().GetAttributes()}
				id := a.session()
				c.identity(id, a)
				c.add(id, facts.Observation{Field: facts.FieldInput, Value: session.InputLogs, Source: facts.SourceOTLP})
				body := facts.Bounded(anyString(rec.GetBody()), 1024)
				c.logRecord(id, a, body, isJSON)
			}
		}
	}
	return c
}

func (c factCollector) logRecord(id sessionID, a attrs, body string, isJSON bool) {
	switch {
	case body == logSessionClosed || body == logSessionClosedPy:
		if reason := a.str("reason"); reason != "" {
			c.closeReason(id, facts.SourceOTLPLog, reason, body+" reason="+reason)
		}
		c.errorText(id, a, body)
		if body == logSessionClosed && isJSON {
			// Only agents-js exports its logs as OTLP/JSON.
			c.add(id, facts.Observation{Field: facts.FieldSDKLanguage, Value: sdkLanguageFromJSONLog, Source: facts.SourceOTLP,
				Evidence: "OTLP/JSON log export"})
		}
	case strings.HasPrefix(body, logParticipantGone):
		c.closeReason(id, facts.SourceOTLPLogImplied, "participant_disconnected", logParticipantGone)
	case strings.HasPrefix(body, logUnrecoverable) || strings.HasPrefix(body, logUnrecoverableJS):
		c.closeReason(id, facts.SourceOTLPLogImplied, "error", body)
		c.errorText(id, a, body)
	case body == logSessionReport:
		c.add(id, facts.Observation{Field: facts.FieldAgentName, Value: a.str("agent_name"), Source: facts.SourceOTLP})
		if expected, known := recordingOptions(a); known {
			c.add(id, facts.Observation{Field: facts.FieldRecordingExpected, Value: strconv.FormatBool(expected), Source: facts.SourceOTLP,
				Evidence: "session report: recording options (transcript or audio on: a recording follows)"})
		}
		if v := a.str("sdk_version"); v != "" {
			c.add(id, facts.Observation{Field: facts.FieldSDKVersion, Value: v, Source: facts.SourceOTLP, Evidence: "session report sdk_version"})
			lang := "python"
			if isJSON { // only agents-js exports its logs as OTLP/JSON
				lang = sdkLanguageFromJSONLog
			}
			c.add(id, facts.Observation{Field: facts.FieldSDKLanguage, Value: lang, Source: facts.SourceOTLP, Evidence: "session report sdk_version"})
		}
		if v, ok := a.get("usage"); ok {
			if models, ok := usageOf(v); ok {
				c.add(id, usageObservation(models))
			}
		}
		if v, ok := a.get("session.tags"); ok {
			for _, t := range tagValues(v) {
				c.add(id, facts.Observation{Field: facts.FieldTag, Value: facts.Bounded(t, 128), Source: facts.SourceOTLP})
			}
		}
	case body == logOutcome:
		out := a.str("outcome")
		if v, ok := a.get("outcome"); ok && v.GetKvlistValue() != nil {
			out = facts.Bounded(anyString(kvGet(v.GetKvlistValue().GetValues(), "outcome")), 64)
		}
		c.add(id, facts.Observation{Field: facts.FieldOutcome, Value: out, Source: facts.SourceOTLP})
	case body == logEvaluation:
		if v, ok := a.get("evaluation"); ok && v.GetKvlistValue() != nil {
			kv := v.GetKvlistValue().GetValues()
			name, verdict := anyString(kvGet(kv, "name")), anyString(kvGet(kv, "verdict"))
			if name != "" {
				c.add(id, facts.Observation{Field: facts.FieldEvaluation, Value: facts.Bounded(name, 64) + "=" + facts.Bounded(verdict, 32),
					Source: facts.SourceOTLP})
			}
		}
	}
}

// errorText records the SDK's error message from a close record's
// attributes: agents-js's pino records carry the error object as "error"
// or "err" ({type, message}, or the SDK's error event with the error
// inside), agents-py's as exception.type and exception.message.
func (c factCollector) errorText(id sessionID, a attrs, body string) {
	text := ""
	for _, key := range []string{"error", "err"} {
		if v, ok := a.get(key); ok {
			if text = errorMessage(v, 3); text != "" {
				break
			}
		}
	}
	if text == "" {
		if m := a.str("exception.message"); m != "" {
			text = m
			if t := a.str("exception.type"); t != "" {
				text = t + ": " + m
			}
		}
	}
	if text != "" {
		c.add(id, facts.Observation{Field: facts.FieldErrorText, Value: facts.Bounded(text, facts.MaxEvidence), Source: facts.SourceOTLP,
			Evidence: facts.Bounded(body, 64)})
	}
}

// errorMessage reads an error out of a log attribute: agents-js's
// transport sends an object as its JSON in a string (pino's err serializer
// made it {type, message, stack}; an SDK error event holds the error under
// "error"); a key-value list the same way; else the string itself.
func errorMessage(v *common.AnyValue, depth int) string {
	if kv := v.GetKvlistValue(); kv != nil {
		m := map[string]any{}
		for _, e := range kv.GetValues() {
			if inner := e.GetValue().GetKvlistValue(); inner != nil {
				m[e.GetKey()] = e.GetValue()
			} else {
				m[e.GetKey()] = anyString(e.GetValue())
			}
		}
		return errorOf(m, depth)
	}
	s := strings.TrimSpace(anyString(v))
	if strings.HasPrefix(s, "{") {
		var m map[string]any
		if json.Unmarshal([]byte(s), &m) == nil {
			return errorOf(m, depth)
		}
	}
	if s == "null" {
		return ""
	}
	return s
}

// errorOf is the "type: message" of a decoded error object, looking into
// its "error" at most depth levels down.
func errorOf(m map[string]any, depth int) string {
	msg, _ := m["message"].(string)
	typ, _ := m["type"].(string)
	if msg != "" {
		if typ != "" && !strings.HasPrefix(msg, typ) {
			return typ + ": " + msg
		}
		return msg
	}
	if depth <= 0 {
		return ""
	}
	switch inner := m["error"].(type) {
	case map[string]any:
		return errorOf(inner, depth-1)
	case *common.AnyValue:
		return errorMessage(inner, depth-1)
	}
	return ""
}

func kvGet(kvs []*common.KeyValue, key string) *common.AnyValue {
	for _, kv := range kvs {
		if kv.GetKey() == key {
			return kv.GetValue()
		}
	}
	return nil
}

// tagValues reads session.tags: an array of strings, or one string.
func tagValues(v *common.AnyValue) []string {
	if arr := v.GetArrayValue(); arr != nil {
		var out []string
		for i, e := range arr.GetValues() {
			if i >= 32 {
				break
			}
			if s := anyString(e); s != "" {
				out = append(out, s)
			}
		}
		return out
	}
	if s := anyString(v); s != "" {
		return []string{s}
	}
	return nil
}

// traceFacts reads the facts out of an OTLP traces request: identity
// attributes on any span, and lk.close_reason (the session_close span the
// protocol defines for newer SDKs).
func traceFacts(req *coltrace.ExportTraceServiceRequest) map[sessionID]*facts.Update {
	c := factCollector{}
	for _, rs := range req.GetResourceSpans() {
		for _, ss := range rs.GetScopeSpans() {
			for _, sp := range ss.GetSpans() {
				a := attrs{sp.GetAttributes(), ss.GetScope().GetAttributes(), rs.GetResource().GetAttributes()}
				id := a.session()
				if span, ok := spanOf(sp, a.str("telemetry.sdk.language")); ok && id.job != "" {
					c.span(id, span)
				}
				if v, ok := a.get("lk.close_reason"); ok {
					raw := anyString(v)
					c.closeReason(id, facts.SourceOTLPSpan, raw, fmt.Sprintf("span %s lk.close_reason=%s", facts.Bounded(sp.GetName(), 64), facts.Bounded(raw, 64)))
				}
				// identity without lk.close_reason: a span's reason is a span fact, not a log fact
				c.identity(id, attrs{withoutKey(sp.GetAttributes(), "lk.close_reason"), ss.GetScope().GetAttributes(), rs.GetResource().GetAttributes()})
			}
		}
	}
	return c
}

func withoutKey(kvs []*common.KeyValue, key string) []*common.KeyValue {
	out := make([]*common.KeyValue, 0, len(kvs))
	for _, kv := range kvs {
		if kv.GetKey() != key {
			out = append(out, kv)
		}
	}
	return out
}

// sortedUpdates orders updates by session, so writes happen in a stable order.
func sortedUpdates(m map[sessionID]*facts.Update) []*facts.Update {
	out := make([]*facts.Update, 0, len(m))
	for _, u := range m {
		out = append(out, u)
	}
	slices.SortFunc(out, func(a, b *facts.Update) int {
		return cmp.Or(strings.Compare(a.RoomID, b.RoomID), strings.Compare(a.JobID, b.JobID))
	})
	return out
}
