package consumer

import (
	"context"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/lkscore/lkscore/internal/testenv"
)

// agentsJSVersions are the agents-js releases the version matrix runs: every
// minor line that can send to a self-hosted collector. 1.8.0 is the first
// that honours LIVEKIT_OBSERVABILITY_URL and takes an observabilityUrl
// (1.7.x posts only to https://<cloudHostname>, read in its
// dist/telemetry/traces.js); package.json installs 1.8.x under npm aliases
// beside @livekit/agents 1.9.0.
var agentsJSVersions = []struct{ version, pkg string }{
	{"1.8.0", "agents-1.8.0"},
	{"1.8.1", "agents-1.8.1"},
	{"1.9.0", "@livekit/agents"},
}

// TestAgentsJSVersions: each agents-js release in the matrix sends one call
// through its own code (its cloud tracer's spans, its session report and
// chat-history upload, its pino exporter's close log); lkscore scores each
// once with the SDK's close reason from its log, the agent's name, the SDK's
// language and that release's version, its spans and its recording.
func TestAgentsJSVersions(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: runs the real agents-js SDK in Node, three releases")
	}
	dir, node := agentsJS(t)
	ns := startNATS(t)
	d, _ := startDaemon(t, pipelineConfig(t, ns.URL()))
	var rooms []string
	for _, v := range agentsJSVersions {
		room, job := "RM_JSv"+strings.ReplaceAll(v.version, ".", ""), "AJ_JSv"+strings.ReplaceAll(v.version, ".", "")
		rooms = append(rooms, room)
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		cmd := exec.CommandContext(ctx, node, "spans-session.mjs")
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), "AGENTS_PKG="+v.pkg, "LKSCORE_URL=http://"+d.IngestAddr(), "ROOM_ID="+room, "JOB_ID="+job,
			"RECORD=on", "LIVEKIT_API_KEY="+testenv.Key, "LIVEKIT_API_SECRET="+testenv.Secret)
		out, err := cmd.CombinedOutput()
		cancel()
		if err != nil || !strings.Contains(string(out), "session sent") || strings.Contains(string(out), "Failed") {
			t.Fatalf("agents-js %s: %v\n%s", v.version, err, out)
		}
	}
	cards := oneCardEach(t, ns.URL(), rooms...)
	for i, v := range agentsJSVersions {
		c := cards[rooms[i]]
		if got := c.Completion.CloseReason + " " + c.Completion.CloseReasonSource; got != "CR_USER_INITIATED otlp_log" {
			t.Errorf("%s: close reason %s", v.version, got)
		}
		if c.Session.AgentName != "js-metadata-agent" || c.Session.SDK == nil || c.Session.SDK.Language != "nodejs" ||
			c.Session.SDK.Version != v.version {
			t.Errorf("%s: session %+v sdk %+v", v.version, c.Session, c.Session.SDK)
		}
		if got := strings.Join(c.Inputs, ","); got != "recording,logs,traces" {
			t.Errorf("%s: inputs %q, want recording,logs,traces", v.version, got)
		}
		if c.Spans == nil || !c.Spans.TTFTP50Ms.Set || c.Spans.ToolErrors != 1 || c.Metrics.UserTurns != 4 || c.Overall.Verdict == "" {
			t.Errorf("%s: spans %+v, user turns %d, verdict %q", v.version, c.Spans, c.Metrics.UserTurns, c.Overall.Verdict)
		}
	}
}
