package locate

import (
	"strings"
	"testing"

	"github.com/livekit/protocol/livekit"

	"github.com/lkscore/lkscore/consumer/broker"
	"github.com/lkscore/lkscore/consumer/internal/facts"
)

// TestJobStatusDeparture: livekit-server's "agent worker left the room" is a
// normal departure, not an error; any other JS_FAILED is.
func TestJobStatusDeparture(t *testing.T) {
	t.Parallel()
	l := &Locator{}
	for _, tc := range []struct {
		status    livekit.JobStatus
		err, want string
	}{
		{livekit.JobStatus_JS_FAILED, "agent worker left the room", "CR_UNKNOWN"},
		{livekit.JobStatus_JS_FAILED, "Agent worker left the room ", "CR_UNKNOWN"},
		{livekit.JobStatus_JS_FAILED, "job process exited with code 1", "CR_ERROR"},
		{livekit.JobStatus_JS_FAILED, "", "CR_ERROR"}, // the Python worker reports a failed process without an error
		{livekit.JobStatus_JS_SUCCESS, "", "CR_UNKNOWN"},
	} {
		job := &livekit.Job{Id: "AJ", State: &livekit.JobState{Status: tc.status, Error: tc.err}}
		r := facts.Resolve(l.jobObservations(job, ""))
		departed := tc.status == livekit.JobStatus_JS_FAILED && tc.want == "CR_UNKNOWN"
		if r.CloseReason != tc.want || r.JobStatus != tc.status.String() || r.JobError != tc.err ||
			departed != strings.Contains(r.CloseReasonEvidence, "not an error") {
			t.Errorf("%s %q: close reason %s (%s), job %s %q", tc.status, tc.err, r.CloseReason, r.CloseReasonEvidence, r.JobStatus, r.JobError)
		}
	}
}

// TestVersionFromMetadata: regression.version_metadata_key is the value
// ingest kept (wire.HeaderMetadataVersion) when there is one; an event
// stored with its metadata (before ingest kept the value) is read from the
// job's JSON metadata, else the room's.
func TestVersionFromMetadata(t *testing.T) {
	t.Parallel()
	v := versionFromMetadata{key: "agent_version", prefix: "version:"} // regress.MetadataVersionTag in the daemon
	for _, c := range []struct {
		stored, job, room, want string
	}{
		{"2.0", ``, ``, "version:2.0"},
		{"2.0", `{"agent_version": "1.4.2"}`, ``, "version:2.0"},
		{"", `{"agent_version": "1.4.2"}`, `{"agent_version": "0.9"}`, "version:1.4.2"},
		{"", ``, `{"agent_version": "0.9"}`, "version:0.9"},
		{"", `{"agent_version": 7}`, ``, "version:7"},
		{"", `not json`, `{"other": "x"}`, ""},
		{"", `{"agent_version": ""}`, ``, ""},
	} {
		job := &livekit.Job{Metadata: c.job, Room: &livekit.Room{Metadata: c.room}}
		if got := v.tag(job, c.stored); got != c.want {
			t.Errorf("stored %q job %q room %q: %q, want %q", c.stored, c.job, c.room, got, c.want)
		}
	}
	if got := (versionFromMetadata{}).tag(&livekit.Job{Metadata: `{"agent_version": "1"}`}, "1"); got != "" {
		t.Errorf("no key configured: %q", got)
	}
}

// TestNewSaysWhatIsMissing: a Locator built without its dependencies is an
// error naming each, not a nil dereference later.
func TestNewSaysWhatIsMissing(t *testing.T) {
	t.Parallel()
	_, err := New(broker.Env{}, Options{})
	if err == nil || err.Error() != "locator: facts, js, log, metrics, now, store required" {
		t.Fatalf("got %v", err)
	}
}
