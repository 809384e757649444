package consumer

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/livekit/protocol/livekit"

	"github.com/lkscore/lkscore/consumer/internal/facts"
	"github.com/lkscore/lkscore/internal/testenv"
	"github.com/lkscore/lkscore/session"
)

// TestRealAgentsJS: the real agents-js SDK (npm @livekit/agents 1.9.0, in
// testdata/agents-js) sends a session's end to lkscore the way it does in
// production: OTLP/JSON chat logs, the multipart upload, its own "AgentSession
// closed" log. With LiveKit's agent_job_ended, the session is scored with the
// close reason from the SDK's log and the agent name from the webhook; with
// the SDK's logs off, the job status decides, and livekit-server's "agent
// worker left the room" is not an error.
//
// It needs Node 20 and `npm ci` in testdata/agents-js; .ci/run does both and
// sets LKSCORE_REQUIRE_AGENTS_JS=1 so that a missing SDK fails instead of
// skipping.
func TestRealAgentsJS(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: runs the real agents-js SDK in Node")
	}
	dir, node := agentsJS(t)
	ns := startNATS(t)
	d, _ := startDaemon(t, pipelineConfig(t, ns.URL()))

	// LiveKit Cloud's JS_SUCCESS; a self-hosted server's JS_FAILED "agent
	// worker left the room" for a clean job with the SDK's logs off, which is
	// not an error; a crashed job process, which is.
	cases := []struct {
		room, job, logs string
		status          livekit.JobStatus
		jobErr, want    string
	}{
		{"RM_AgentsJS", "AJ_AgentsJS", "on", livekit.JobStatus_JS_SUCCESS, "", "CR_USER_INITIATED otlp_log pass"},
		{"RM_AgentsJSLeft", "AJ_AgentsJSLeft", "off", livekit.JobStatus_JS_FAILED, "agent worker left the room", "CR_UNKNOWN absent pass"},
		{"RM_AgentsJSCrash", "AJ_AgentsJSCrash", "off", livekit.JobStatus_JS_FAILED, "job process exited with code 1", "CR_ERROR job_status fail"},
	}
	for _, tc := range cases {
		// LiveKit ends the job when the agent leaves the room, before the SDK's
		// upload lands (sent after it, a slow node start could let the 500 ms
		// settle window of these tests close first).
		ev := jobEnded("EV_"+tc.job, tc.room, tc.job, "js-agent", tc.status)
		ev.Job.State.Error = tc.jobErr
		sendWebhook(t, d, ev)
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		cmd := exec.CommandContext(ctx, node, "session.mjs")
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), "LKSCORE_URL=http://"+d.IngestAddr(), "ROOM_ID="+tc.room, "JOB_ID="+tc.job, "LOGS="+tc.logs,
			"LIVEKIT_API_KEY="+testenv.Key, "LIVEKIT_API_SECRET="+testenv.Secret)
		out, err := cmd.CombinedOutput()
		cancel()
		if err != nil || !strings.Contains(string(out), "session sent") || strings.Contains(string(out), "Failed") {
			t.Fatalf("agents-js: %v\n%s", err, out)
		}
	}
	testenv.WaitFor(t, settleWait, "the scorecards", func() bool { return len(streamMsgs(t, ns.URL(), "LKSCORE_RESULTS")) == len(cases) })
	quiesce(t, ns.URL(), defaultConsumers)
	cards := results(t, ns.URL())
	if len(cards) != len(cases) {
		t.Fatalf("%d scorecards for %d sessions", len(cards), len(cases))
	}
	for _, tc := range cases {
		i := slices.IndexFunc(cards, func(c session.Scorecard) bool { return c.Session.RoomID == tc.room })
		if i < 0 {
			t.Fatalf("%s: no scorecard", tc.room)
		}
		c := cards[i]
		if got := c.Completion.CloseReason + " " + c.Completion.CloseReasonSource + " " + c.Overall.Verdict; got != tc.want ||
			(tc.status == livekit.JobStatus_JS_FAILED && !strings.Contains(c.Completion.CloseReasonEvidence, tc.jobErr)) {
			t.Errorf("%s: %s (%q), want %s", tc.room, got, c.Completion.CloseReasonEvidence, tc.want)
		}
		if c.Session.Key != tc.room+"/"+tc.job || c.Session.AgentName != "js-agent" || c.Session.JobError != tc.jobErr ||
			c.Session.SDK == nil || c.Session.SDK.Language != "nodejs" || c.Components[0].Name == "" {
			t.Errorf("%s: scorecard session %+v", tc.room, c.Session)
		}
	}
}

// TestAgentsJSObserver: lkscore's observer (examples/agents-js), added to a
// real agents-js AgentSession, logs the close event at INFO through the SDK's
// own logger and OTLP export (telemetry.setupCloudTracer pointed at lkscore).
// The session closes with participant_disconnected; LiveKit's agent_job_ended
// says JS_FAILED "agent worker left the room", as a self-hosted server ends
// every clean agents-js job. The scorecard has the exact close reason from the
// log, the observer's agent name and version tag, and does not fail.
func TestAgentsJSObserver(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: runs the real agents-js SDK in Node")
	}
	dir, node := agentsJS(t)
	// The example as users copy it, next to the SDK it imports.
	gen := filepath.Join(dir, "lkscore-observer.gen.mjs")
	if err := os.WriteFile(gen, mustReadFile(t, "../examples/agents-js/lkscore-observer.mjs"), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.Remove(gen) })

	ns := startNATS(t)
	d, _ := startDaemon(t, pipelineConfig(t, ns.URL()))
	// The job's end first: a session whose logs name its close reason is
	// published as soon as its upload is in, and the card must carry the
	// job's status (sent after the SDK, it raced the settler: a CI run lost).
	ev := jobEnded("EV_obs", "RM_Observer", "AJ_Observer", "", livekit.JobStatus_JS_FAILED)
	ev.Job.State.Error = "agent worker left the room"
	sendWebhook(t, d, ev)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, node, "observer-session.mjs")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "LKSCORE_URL=http://"+d.IngestAddr(), "ROOM_ID=RM_Observer", "JOB_ID=AJ_Observer",
		"CLOSE_REASON=participant_disconnected", "LIVEKIT_API_KEY="+testenv.Key, "LIVEKIT_API_SECRET="+testenv.Secret)
	out, err := cmd.CombinedOutput()
	if err != nil || !strings.Contains(string(out), "session sent") || strings.Contains(string(out), "Failed") {
		t.Fatalf("agents-js: %v\n%s", err, out)
	}
	f := readFacts(t, ns.URL(), "RM_Observer", "AJ_Observer")
	if !slices.ContainsFunc(f.Observations, func(o facts.Observation) bool {
		return o.Field == facts.FieldCloseReason && o.Evidence == "otlp_log: lk.close_reason=participant_disconnected"
	}) {
		t.Fatalf("the observer's record did not reach the facts: %+v", f.Observations)
	}
	testenv.WaitFor(t, settleWait, "the scorecard", func() bool { return len(streamMsgs(t, ns.URL(), "LKSCORE_RESULTS")) == 1 })
	c := results(t, ns.URL())[0]
	if c.Completion.CloseReason != "CR_PARTICIPANT_DISCONNECTED" || c.Completion.CloseReasonSource != facts.SourceOTLPLog ||
		c.Session.AgentName != "observer-agent" || !slices.Contains(c.Session.Tags, "version:1.4.2") ||
		c.Session.JobError != "agent worker left the room" || c.Overall.Verdict == "fail" {
		t.Fatalf("scorecard session %+v completion %+v overall %+v", c.Session, c.Completion, c.Overall)
	}
}

// agentsJS returns the agents-js client directory and node, or skips the
// test (fails it under LKSCORE_REQUIRE_AGENTS_JS) when the SDK is missing.
func agentsJS(t *testing.T) (dir, node string) {
	t.Helper()
	if dir, node = testenv.AgentsJS(t); dir == "" {
		t.Skip("SKIPPING the real agents-js test: run `npm ci` in consumer/testdata/agents-js (needs node)")
	}
	return dir, node
}
