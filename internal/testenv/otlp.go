package testenv

import (
	"encoding/json"
	"fmt"
	"time"

	common "go.opentelemetry.io/proto/otlp/common/v1"
)

// StrKV is a string OTLP attribute.
func StrKV(k, v string) *common.KeyValue {
	return &common.KeyValue{Key: k, Value: &common.AnyValue{Value: &common.AnyValue_StringValue{StringValue: v}}}
}

// IntKV is an integer OTLP attribute.
func IntKV(k string, v int64) *common.KeyValue {
	return &common.KeyValue{Key: k, Value: &common.AnyValue{Value: &common.AnyValue_IntValue{IntValue: v}}}
}

// JSLogs builds an OTLP/JSON logs body exactly as agents-js 1.9.0's pino
// exporter does (agents/src/telemetry/pino_otel_transport.ts): resource and
// scope attributes room_id and job_id, scope "livekit.agents", records with
// room_id, job_id, logger.name, the session metadata and the pino fields,
// intValue as strings, empty trace and span ids.
func JSLogs(roomID, jobID, agentName string, records ...map[string]any) []byte {
	str := func(k, v string) map[string]any {
		return map[string]any{"key": k, "value": map[string]any{"stringValue": v}}
	}
	var recs []any
	for _, r := range records {
		attrs := []any{str("room_id", roomID), str("job_id", jobID), str("logger.name", "livekit.agents"),
			str("lk.agent_name", agentName), map[string]any{"key": "process.pid", "value": map[string]any{"intValue": "4242"}}}
		for k, v := range r {
			if k != "msg" {
				attrs = append(attrs, str(k, fmt.Sprint(v)))
			}
		}
		recs = append(recs, map[string]any{
			"timeUnixNano": fmt.Sprint(time.Now().UnixNano()), "observedTimeUnixNano": fmt.Sprint(time.Now().UnixNano()),
			"severityNumber": 9, "severityText": "INFO", "body": map[string]any{"stringValue": r["msg"]},
			"attributes": attrs, "traceId": "", "spanId": "",
		})
	}
	b, _ := json.Marshal(map[string]any{"resourceLogs": []any{map[string]any{
		"resource": map[string]any{"attributes": []any{str("service.name", "livekit-agents"), str("room_id", roomID), str("job_id", jobID)}},
		"scopeLogs": []any{map[string]any{
			"scope":      map[string]any{"name": "livekit.agents", "attributes": []any{str("room_id", roomID), str("job_id", jobID)}},
			"logRecords": recs,
		}},
	}}})
	return b
}
