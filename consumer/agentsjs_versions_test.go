package consumer

import (
	"context"
	"encoding/json"
	"net/http"
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/lkscore/lkscore/dashboard"
	"github.com/lkscore/lkscore/internal/testenv"
	"github.com/lkscore/lkscore/scoring"
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
	d, reg := startDaemon(t, pipelineConfig(t, ns.URL()))
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
	var versions []string
	for _, v := range agentsJSVersions {
		versions = append(versions, v.version)
	}
	checkCoverage(t, d, reg, "nodejs", versions, "otlp_log",
		scoring.SignalRecording, scoring.SignalLogs, scoring.SignalTraces, scoring.SignalCloseReason)
}

// checkCoverage reads the dashboard's signal coverage (/ui/signals, JSON)
// and /metrics once the index holds every room's scorecard: one row per
// release of sdk in versions, each with every signal in want at 100% and
// the close reason from source, and the same counts on /metrics.
func checkCoverage(t *testing.T, d *Daemon, reg *prometheus.Registry, sdk string, versions []string, source string, want ...string) {
	t.Helper()
	var rows []dashboard.CoverageRow
	testenv.WaitFor(t, settleWait, "the signal coverage view", func() bool {
		resp, err := http.Get("http://" + d.OpsAddr() + "/ui/signals?format=json")
		if err != nil {
			return false
		}
		defer resp.Body.Close()
		rows = nil
		if json.NewDecoder(resp.Body).Decode(&rows) != nil {
			return false
		}
		n := 0
		for _, r := range rows {
			n += r.Sessions
		}
		return n == len(versions)
	})
	for _, v := range versions {
		i := slices.IndexFunc(rows, func(r dashboard.CoverageRow) bool { return r.SDK == sdk && r.Version == v })
		if i < 0 {
			t.Errorf("no coverage row for %s %s: %+v", sdk, v, rows)
			continue
		}
		r := rows[i]
		for _, s := range want {
			if r.Shares[s] != 1 {
				t.Errorf("%s %s: %s share %v, want 100%%", sdk, v, s, r.Shares[s])
			}
		}
		if r.Sessions != 1 || len(r.Sources) != 1 || r.Sources[0].Source != source {
			t.Errorf("%s %s: %d sessions, close reason sources %+v", sdk, v, r.Sessions, r.Sources)
		}
		if n := counter(t, reg, "lkscore_sessions_by_sdk_total", map[string]string{"sdk": sdk, "sdk_version": v}); n != 1 {
			t.Errorf("lkscore_sessions_by_sdk_total{%s,%s} = %v", sdk, v, n)
		}
		for _, s := range want {
			if n := counter(t, reg, "lkscore_session_signals_total", map[string]string{"sdk": sdk, "sdk_version": v, "signal": s}); n != 1 {
				t.Errorf("lkscore_session_signals_total{%s,%s,%s} = %v", sdk, v, s, n)
			}
		}
	}
}
