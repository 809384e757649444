package consumer

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
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
