package ingest

import (
	"bytes"
	"compress/gzip"
	"fmt"
	"io"
	"testing"

	collogs "go.opentelemetry.io/proto/otlp/collector/logs/v1"
	coltrace "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	common "go.opentelemetry.io/proto/otlp/common/v1"
	resourcepb "go.opentelemetry.io/proto/otlp/resource/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"

	"github.com/lkscore/lkscore/consumer/internal/facts"
	"github.com/lkscore/lkscore/internal/testenv"
)

func FuzzOTLPLogs(f *testing.F) {
	f.Add(testenv.JSLogs("RM_f", "AJ_f", "agent", map[string]any{"msg": "AgentSession closed", "reason": "user_initiated"}), true)
	var req collogs.ExportLogsServiceRequest
	_ = otlpJSON.Unmarshal(testenv.JSLogs("RM_f", "AJ_f", "agent", map[string]any{"msg": "session report", "sdk_version": "1.7.0"}), &req)
	pb, _ := proto.Marshal(&req)
	f.Add(pb, false)
	f.Add([]byte(`{"resourceLogs":[{"scopeLogs":[{"logRecords":[{"body":{"kvlistValue":{"values":[]}}}]}]}]}`), true)
	f.Fuzz(func(t *testing.T, body []byte, isJSON bool) {
		var req collogs.ExportLogsServiceRequest
		if err := decodeOTLP(body, isJSON, &req); err != nil {
			return
		}
		checkBounded(t, logFacts(&req, isJSON))
	})
}

func FuzzOTLPTraces(f *testing.F) {
	req := &coltrace.ExportTraceServiceRequest{ResourceSpans: []*tracepb.ResourceSpans{{
		Resource: &resourcepb.Resource{Attributes: []*common.KeyValue{testenv.StrKV("room_id", "RM_f"), testenv.StrKV("job_id", "AJ_f")}},
		ScopeSpans: []*tracepb.ScopeSpans{{Spans: []*tracepb.Span{{Name: "session_close",
			Attributes: []*common.KeyValue{testenv.StrKV("lk.close_reason", "error"), testenv.StrKV("lk.agent_name", "a")}}}}},
	}}}
	pb, _ := proto.Marshal(req)
	f.Add(pb, false)
	js, _ := protojson.Marshal(req)
	f.Add(js, true)
	for _, lang := range []string{"python", "nodejs"} {
		pb, _ = proto.Marshal(pySpanRequest(lang, 0.5))
		f.Add(pb, false)
	}
	f.Fuzz(func(t *testing.T, body []byte, isJSON bool) {
		var req coltrace.ExportTraceServiceRequest
		if err := decodeOTLP(body, isJSON, &req); err != nil {
			return
		}
		checkBounded(t, traceFacts(&req))
	})
}

func checkBounded(t *testing.T, m map[sessionID]*facts.Update) {
	for _, u := range m {
		if u.RoomID == "" || len(u.Observations) > facts.MaxObservations || len(u.Spans) > facts.MaxSpans {
			t.Fatalf("unbounded update: room %q, %d observations, %d spans", u.RoomID, len(u.Observations), len(u.Spans))
		}
		for _, s := range u.Spans {
			if len(s.Name) > 64 || len(s.Tool) > 64 || len(s.Error) > 160 || len(s.ID) > 64 || len(s.Parent) > 64 {
				t.Fatalf("unbounded span %+v", s)
			}
		}
		for _, o := range u.Observations {
			if len(o.Evidence) > 2*facts.MaxEvidence || len(o.Value) > facts.MaxEvidence {
				t.Fatalf("unbounded observation %d/%d bytes", len(o.Value), len(o.Evidence))
			}
		}
	}
}

// BenchmarkOTLPDecode compares the receiver's whole decode (gunzip, the
// body read and counted within its limits, unmarshal with limits, fact
// extraction) with proto.Unmarshal alone, on a realistic batch: one
// session's 200-turn chat history as agents-js exports it (one record per
// item) plus its session report and close log.
func BenchmarkOTLPDecode(b *testing.B) {
	var recs []map[string]any
	recs = append(recs, map[string]any{"msg": "session report", "agent_name": "booking-agent", "sdk_version": "1.7.2"})
	for i := range 600 {
		recs = append(recs, map[string]any{"msg": "chat item", "chat.item": fmt.Sprintf(`{"id":"item_%012x","type":"message","role":"user","content":["I would like to move my booking to Friday at ten, please"],"created_at":%d}`, i, 1764417600+i)})
	}
	recs = append(recs, map[string]any{"msg": "AgentSession closed", "reason": "user_initiated"})
	jsonBody := testenv.JSLogs("RM_bench", "AJ_bench", "booking-agent", recs...)
	var req collogs.ExportLogsServiceRequest
	if err := otlpJSON.Unmarshal(jsonBody, &req); err != nil {
		b.Fatal(err)
	}
	pb, _ := proto.Marshal(&req)
	var gz bytes.Buffer
	zw := gzip.NewWriter(&gz)
	_, _ = zw.Write(pb)
	_ = zw.Close()

	md := req.ProtoReflect().Descriptor()
	var buf bytes.Buffer // pooled in the receiver
	receive := func(b *testing.B, body []byte, gz, isJSON bool) *collogs.ExportLogsServiceRequest {
		var r io.Reader = bytes.NewReader(body)
		if gz {
			zr, err := gzip.NewReader(r)
			if err != nil {
				b.Fatal(err)
			}
			r = zr
		}
		buf.Reset()
		if err := readCounted(r, isJSON, md, 100_000, 16<<20, &buf); err != nil {
			b.Fatal(err)
		}
		var req collogs.ExportLogsServiceRequest
		if err := decodeOTLP(buf.Bytes(), isJSON, &req); err != nil {
			b.Fatal(err)
		}
		return &req
	}
	b.Run("proto.Unmarshal", func(b *testing.B) {
		b.SetBytes(int64(len(pb)))
		b.ReportAllocs()
		for b.Loop() {
			var r collogs.ExportLogsServiceRequest
			if err := proto.Unmarshal(pb, &r); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("receiver/protobuf", func(b *testing.B) {
		b.SetBytes(int64(len(pb)))
		b.ReportAllocs()
		for b.Loop() {
			if len(logFacts(receive(b, pb, false, false), false)) != 1 {
				b.Fatal("no facts")
			}
		}
	})
	b.Run("receiver/protobuf+gzip", func(b *testing.B) {
		b.SetBytes(int64(len(pb))) // decoded bytes, to compare with the others
		b.ReportAllocs()
		for b.Loop() {
			_ = logFacts(receive(b, gz.Bytes(), true, false), false)
		}
	})
	b.Run("receiver/json", func(b *testing.B) {
		b.SetBytes(int64(len(jsonBody)))
		b.ReportAllocs()
		for b.Loop() {
			_ = logFacts(receive(b, jsonBody, false, true), true)
		}
	})
}
