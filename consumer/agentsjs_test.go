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
)

// TestRealAgentsJS: the real agents-js SDK (npm @livekit/agents 1.9.0, in
// testdata/agents-js) sends a session's end to lkscore the way it does in
// production: OTLP/JSON chat logs, the multipart upload, its own "AgentSession
// closed" log. With LiveKit's agent_job_ended, the session is scored with the
// close reason from the SDK's log and the agent name from the webhook.
//
// It needs Node 20 and `npm ci` in testdata/agents-js; .ci/run does both and
// sets LKSCORE_REQUIRE_AGENTS_JS=1 so that a missing SDK fails instead of
// skipping.
func TestRealAgentsJS(t *testing.T) {
	dir, _ := filepath.Abs("testdata/agents-js")
	node, err := exec.LookPath("node")
	if _, statErr := os.Stat(filepath.Join(dir, "node_modules", "@livekit", "agents")); err != nil || statErr != nil {
		if os.Getenv("LKSCORE_REQUIRE_AGENTS_JS") != "" {
			t.Fatalf("the agents-js SDK is required: node %v, node_modules %v (run npm ci in %s)", err, statErr, dir)
		}
		t.Skipf("SKIPPING the real agents-js test: run `npm ci` in %s (needs node)", dir)
	}
	ns := startNATS(t)
	d, _ := startDaemon(t, pipelineConfig(t, ns.URL()))

	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, node, "session.mjs")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "LKSCORE_URL=http://"+d.IngestAddr(), "ROOM_ID=RM_AgentsJS", "JOB_ID=AJ_AgentsJS",
		"LIVEKIT_API_KEY="+testKey, "LIVEKIT_API_SECRET="+testSecret)
	out, err := cmd.CombinedOutput()
	if err != nil || !strings.Contains(string(out), "session sent") || strings.Contains(string(out), "Failed") {
		t.Fatalf("agents-js: %v\n%s", err, out)
	}
	sendWebhook(t, d, jobEnded("EV_js", "RM_AgentsJS", "AJ_AgentsJS", "js-agent", livekit.JobStatus_JS_SUCCESS))
	waitFor(t, "the scorecard", func() bool { return len(streamMsgs(t, ns.URL(), "LKSCORE_RESULTS")) == 1 })
	c := results(t, ns.URL())[0]
	if c.Session.Key != "RM_AgentsJS/AJ_AgentsJS" || c.Session.AgentName != "js-agent" || c.Completion.CloseReason != "CR_USER_INITIATED" ||
		c.Completion.CloseReasonSource != sourceOTLPLog || c.Session.SDK == nil || c.Session.SDK.Language != "nodejs" {
		t.Fatalf("scorecard session %+v completion %+v", c.Session, c.Completion)
	}
	if c.Components[0].Name == "" || c.Overall.Verdict == "" {
		t.Fatalf("not scored: %+v", c.Overall)
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
	dir, _ := filepath.Abs("testdata/agents-js")
	node, err := exec.LookPath("node")
	if _, statErr := os.Stat(filepath.Join(dir, "node_modules", "@livekit", "agents")); err != nil || statErr != nil {
		if os.Getenv("LKSCORE_REQUIRE_AGENTS_JS") != "" {
			t.Fatalf("the agents-js SDK is required: node %v, node_modules %v (run npm ci in %s)", err, statErr, dir)
		}
		t.Skipf("SKIPPING the agents-js observer test: run `npm ci` in %s (needs node)", dir)
	}
	// The example as users copy it, next to the SDK it imports.
	gen := filepath.Join(dir, "lkscore-observer.gen.mjs")
	if err := os.WriteFile(gen, mustReadFile(t, "../examples/agents-js/lkscore-observer.mjs"), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.Remove(gen) })

	ns := startNATS(t)
	d, _ := startDaemon(t, pipelineConfig(t, ns.URL()))
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, node, "observer-session.mjs")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "LKSCORE_URL=http://"+d.IngestAddr(), "ROOM_ID=RM_Observer", "JOB_ID=AJ_Observer",
		"CLOSE_REASON=participant_disconnected", "LIVEKIT_API_KEY="+testKey, "LIVEKIT_API_SECRET="+testSecret)
	out, err := cmd.CombinedOutput()
	if err != nil || !strings.Contains(string(out), "session sent") || strings.Contains(string(out), "Failed") {
		t.Fatalf("agents-js: %v\n%s", err, out)
	}
	f := readFacts(t, ns.URL(), "RM_Observer", "AJ_Observer")
	if !slices.ContainsFunc(f.Observations, func(o Observation) bool {
		return o.Field == fieldCloseReason && o.Evidence == "otlp_log: lk.close_reason=participant_disconnected"
	}) {
		t.Fatalf("the observer's record did not reach the facts: %+v", f.Observations)
	}
	ev := jobEnded("EV_obs", "RM_Observer", "AJ_Observer", "", livekit.JobStatus_JS_FAILED)
	ev.Job.State.Error = "agent worker left the room"
	sendWebhook(t, d, ev)
	waitFor(t, "the scorecard", func() bool { return len(streamMsgs(t, ns.URL(), "LKSCORE_RESULTS")) == 1 })
	c := results(t, ns.URL())[0]
	if c.Completion.CloseReason != "CR_PARTICIPANT_DISCONNECTED" || c.Completion.CloseReasonSource != sourceOTLPLog ||
		c.Session.AgentName != "observer-agent" || !slices.Contains(c.Session.Tags, "version:1.4.2") ||
		c.Session.JobError != "agent worker left the room" || c.Overall.Verdict == "fail" {
		t.Fatalf("scorecard session %+v completion %+v overall %+v", c.Session, c.Completion, c.Overall)
	}
}
