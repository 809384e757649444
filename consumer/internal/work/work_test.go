package work_test

import (
	"encoding/json"
	"testing"

	"github.com/lkscore/lkscore/consumer/internal/work"
)

// previousItem is a work item as the release before this one wrote it on
// lkscore.session.CR_USER_INITIATED (a session with an upload, its facts
// resolved): the recording reference's fields and the scoring model's facts
// are the item's and its facts' own (embedded), not nested objects. A stream
// holding such items is read by the next release, so the form must stay.
const previousItem = `{"session_key":"RM_a/AJ_b","room_name":"support-1","dir":"RM_a/AJ_b/",
"location":"file:///data/recordings/RM_a/AJ_b/","origin":"upload",
"problems":[{"part":"chat_history","code":"unknown_item_type","item":3,"message":"item 3 has type \"x\""}],
"room_id":"RM_a","job_id":"AJ_b","agent_name":"support","close_reason":"CR_USER_INITIATED",
"close_reason_source":"otlp_log","located_at":"2026-12-03T10:00:00Z",
"facts":{"close_reason":"CR_USER_INITIATED","close_reason_source":"otlp_log","agent_name":"support",
"inputs":["logs"],"recording_expected":"true","sdk_language":"nodejs","sdk_version":"1.9.0","room_name":"support-1",
"ended_by":"caller"}}`

func TestItemReadsThePreviousForm(t *testing.T) {
	t.Parallel()
	var w work.Item
	if err := json.Unmarshal([]byte(previousItem), &w); err != nil {
		t.Fatal(err)
	}
	switch {
	case w.SessionKey != "RM_a/AJ_b" || w.Dir != "RM_a/AJ_b/" || w.Origin != "upload" || w.RoomName != "support-1":
		t.Errorf("recording reference not read from the item's own fields: %+v", w.RecordingRef)
	case len(w.Problems) != 1 || w.Problems[0].Item != 3 || w.Problems[0].Code != "unknown_item_type":
		t.Errorf("problems %+v", w.Problems)
	case w.CloseReason != "CR_USER_INITIATED" || w.CloseReasonSource != "otlp_log" || w.AgentName != "support":
		t.Errorf("close reason and agent %+v", w)
	case w.Facts == nil || w.Facts.SDKLanguage != "nodejs" || w.Facts.SDKVersion != "1.9.0" || w.Facts.EndedBy != "caller" ||
		w.Facts.RecordingExpected != "true" || len(w.Facts.Inputs) != 1:
		t.Errorf("facts not read from the facts' own fields: %+v", w.Facts)
	}

	// Written again, it has the same fields: nothing renamed or nested.
	out, err := json.Marshal(w)
	if err != nil {
		t.Fatal(err)
	}
	var want, got map[string]any
	if err := json.Unmarshal([]byte(previousItem), &want); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(out, &got); err != nil {
		t.Fatal(err)
	}
	for k := range want {
		if _, ok := got[k]; !ok {
			t.Errorf("field %q not written again (got %s)", k, out)
		}
	}
	wf, gf := want["facts"].(map[string]any), got["facts"].(map[string]any)
	for k := range wf {
		if _, ok := gf[k]; !ok {
			t.Errorf("facts field %q not written again", k)
		}
	}
}

// TestUploadNoticeFields: the notice ingest publishes carries the objects'
// digests under "objects" by name, and the store identity workers check.
func TestUploadNoticeFields(t *testing.T) {
	t.Parallel()
	n := work.UploadNotice{SessionKey: "RM_a/AJ_b", RoomID: "RM_a", Dir: "RM_a/AJ_b/", Store: "file:abc",
		Objects: map[string]work.ObjectDigest{"header.pb": {Size: 12, SHA256: "00"}}}
	data, err := json.Marshal(n)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(data, &m); err != nil {
		t.Fatal(err)
	}
	obj, _ := m["objects"].(map[string]any)
	if d, _ := obj["header.pb"].(map[string]any); d == nil || d["size"] != float64(12) || d["sha256"] != "00" || m["store"] != "file:abc" {
		t.Errorf("notice %s", data)
	}
}
