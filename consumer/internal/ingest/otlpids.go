package ingest

import (
	"net/http"

	collogs "go.opentelemetry.io/proto/otlp/collector/logs/v1"
	coltrace "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"

	"github.com/lkscore/lkscore/consumer/internal/facts"
	"github.com/lkscore/lkscore/consumer/internal/failure"
)

// An OTLP request's records each name their session by attributes
// (room_id, job_id): a record whose ids break the one id rule
// (wire.CheckID) is rejected, the rest of the request kept. The answer is
// OTLP's partial success (the count and the first reason), or 400 when
// nothing of the request was kept; nothing of a rejected record is stored.

// check is the id rule on a session's ids as OTLP attributes name them.
func (id sessionID) check() error {
	if id.room == "" {
		return nil // no session: the record adds nothing
	}
	return facts.CheckSession("OTLP attribute", id.room, id.job)
}

// dropHostile removes the sessions whose ids break the rule and returns
// the first reason, nil when none did.
func dropHostile(updates map[sessionID]*facts.Update) error {
	var first error
	for id := range updates {
		if err := id.check(); err != nil {
			first = err
			delete(updates, id)
		}
	}
	return first
}

// rejectedRecords counts the log records or spans of req whose session
// ids break the rule.
func rejectedRecords(req proto.Message) int64 {
	var n int64
	switch r := req.(type) {
	case *collogs.ExportLogsServiceRequest:
		for _, rl := range r.GetResourceLogs() {
			for _, sl := range rl.GetScopeLogs() {
				for _, rec := range sl.GetLogRecords() {
					if (attrs{rec.GetAttributes(), sl.GetScope().GetAttributes(), rl.GetResource().GetAttributes()}).session().check() != nil {
						n++
					}
				}
			}
		}
	case *coltrace.ExportTraceServiceRequest:
		for _, rs := range r.GetResourceSpans() {
			for _, ss := range rs.GetScopeSpans() {
				for _, sp := range ss.GetSpans() {
					if (attrs{sp.GetAttributes(), ss.GetScope().GetAttributes(), rs.GetResource().GetAttributes()}).session().check() != nil {
						n++
					}
				}
			}
		}
	}
	return n
}

// answerRejected answers a request some of whose records were rejected
// for reason: 400 when no session of it was kept (kept == 0), else 200
// with OTLP's partial success in the request's encoding.
func (o *otlpReceiver) answerRejected(w http.ResponseWriter, req proto.Message, isJSON bool, kept int, reason error) error {
	n := rejectedRecords(req)
	o.refusals.refused("otlp", refusedBadID, "OTLP "+o.signal+" records rejected: "+reason.Error(), "records", n)
	if kept == 0 {
		return failure.Refuse(http.StatusBadRequest, "OTLP %s: %d records rejected: %v", o.signal, n, reason)
	}
	msg := reason.Error()
	var resp proto.Message = &coltrace.ExportTraceServiceResponse{
		PartialSuccess: &coltrace.ExportTracePartialSuccess{RejectedSpans: n, ErrorMessage: msg}}
	if o.signal == "logs" {
		resp = &collogs.ExportLogsServiceResponse{PartialSuccess: &collogs.ExportLogsPartialSuccess{RejectedLogRecords: n, ErrorMessage: msg}}
	}
	var body []byte
	var err error
	if isJSON {
		w.Header().Set("Content-Type", "application/json")
		body, err = protojson.Marshal(resp) // OTLP/JSON is protobuf's JSON mapping
	} else {
		w.Header().Set("Content-Type", "application/x-protobuf")
		body, err = proto.Marshal(resp)
	}
	if err != nil {
		return err
	}
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(body)
	return nil
}
