package facts

import (
	"fmt"
	"math/rand/v2"
	"reflect"
	"slices"
	"testing"
)

func TestResolvePrecedence(t *testing.T) {
	t.Parallel()
	cr := func(value, source string) Observation {
		return Observation{Field: FieldCloseReason, Value: value, Source: source, Evidence: source + ": x"}
	}
	for _, tc := range []struct {
		name       string
		obs        []Observation
		want, from string
	}{
		{"nothing", nil, "CR_UNKNOWN", SourceAbsent},
		{"job failed only", []Observation{cr("CR_ERROR", SourceJobStatus)}, "CR_ERROR", SourceJobStatus},
		{"implied beats job status", []Observation{cr("CR_ERROR", SourceJobStatus), cr("CR_PARTICIPANT_DISCONNECTED", SourceOTLPLogImplied)}, "CR_PARTICIPANT_DISCONNECTED", SourceOTLPLogImplied},
		{"named log beats implied", []Observation{cr("CR_PARTICIPANT_DISCONNECTED", SourceOTLPLogImplied), cr("CR_USER_INITIATED", SourceOTLPLog)}, "CR_USER_INITIATED", SourceOTLPLog},
		{"span beats log", []Observation{cr("CR_USER_INITIATED", SourceOTLPLog), cr("CR_JOB_SHUTDOWN", SourceOTLPSpan)}, "CR_JOB_SHUTDOWN", SourceOTLPSpan},
		{"summary beats all", []Observation{cr("CR_JOB_SHUTDOWN", SourceOTLPSpan), cr("CR_COMPLETED", SourceSummary), cr("CR_ERROR", SourceJobStatus)}, "CR_COMPLETED", SourceSummary},
		{"unknown says nothing", []Observation{cr("CR_UNKNOWN", SourceSummary), cr("CR_ERROR", SourceJobStatus)}, "CR_ERROR", SourceJobStatus},
		{"tie: the more serious", []Observation{cr("CR_PARTICIPANT_DISCONNECTED", SourceOTLPLogImplied), cr("CR_ERROR", SourceOTLPLogImplied)}, "CR_ERROR", SourceOTLPLogImplied},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := Resolve(tc.obs)
			if r.CloseReason != tc.want || r.CloseReasonSource != tc.from {
				t.Errorf("resolved %s from %s, want %s from %s", r.CloseReason, r.CloseReasonSource, tc.want, tc.from)
			}
		})
	}
	r := Resolve([]Observation{{Field: FieldAgentName, Value: "from-otlp", Source: SourceOTLP}, {Field: FieldAgentName, Value: "from-webhook", Source: SourceWebhook}})
	if r.AgentName != "from-webhook" || r.Provenance[FieldAgentName] != SourceWebhook {
		t.Errorf("agent name %q from %q", r.AgentName, r.Provenance[FieldAgentName])
	}
}

// TestMergeOrderIndependent: the same updates merged in any order, with
// duplicates, give the same facts.
func TestMergeOrderIndependent(t *testing.T) {
	t.Parallel()
	updates := []Update{
		{Observations: []Observation{{Field: FieldAgentName, Value: "a", Source: SourceOTLP}, {Field: FieldCloseReason, Value: "CR_ERROR", Source: SourceOTLPLogImplied, Evidence: "e1"}}},
		{Observations: []Observation{{Field: FieldAgentName, Value: "b", Source: SourceWebhook}, {Field: FieldJobStatus, Value: "JS_FAILED", Source: SourceWebhook}}, JobEnded: true},
		{Observations: []Observation{{Field: FieldCloseReason, Value: "CR_USER_INITIATED", Source: SourceOTLPLog, Evidence: "e2"}, {Field: FieldTag, Value: "t2", Source: SourceOTLP}}},
		{Observations: []Observation{{Field: FieldTag, Value: "t1", Source: SourceOTLP}, {Field: FieldSimulated, Value: "true", Source: SourceHeader}}, Recording: &RecordingRef{SessionKey: "RM/AJ"}},
	}
	var want *SessionFacts
	for i := range 200 {
		order := slices.Clone(updates)
		order = append(order, updates[i%len(updates)]) // a duplicate
		rand.Shuffle(len(order), func(a, b int) { order[a], order[b] = order[b], order[a] })
		f := &SessionFacts{}
		for _, u := range order {
			Merge(f, u)
		}
		if want == nil {
			want = f
			continue
		}
		if !reflect.DeepEqual(f, want) || !reflect.DeepEqual(Resolve(f.Observations), Resolve(want.Observations)) {
			t.Fatalf("order %d gave different facts:\n%+v\n%+v", i, f, want)
		}
	}
	r := Resolve(want.Observations)
	if r.CloseReason != "CR_USER_INITIATED" || r.AgentName != "b" || !r.Simulated || fmt.Sprint(r.Tags) != "[t1 t2]" || !NamedOutright(r.CloseReasonSource) {
		t.Errorf("resolved %+v, named outright %v", r, NamedOutright(r.CloseReasonSource))
	}
}

// Fuzz targets for both OTLP decoders (JSON and protobuf, logs and traces):
// no panic, and whatever decodes yields bounded facts.
