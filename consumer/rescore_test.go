package consumer

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/livekit/protocol/livekit"

	"github.com/lkscore/lkscore/config"
	"github.com/lkscore/lkscore/consumer/rescore"
	"github.com/lkscore/lkscore/internal/testenv"
	"github.com/lkscore/lkscore/rules"
	"github.com/lkscore/lkscore/session"
	"github.com/lkscore/lkscore/store"
	"github.com/lkscore/lkscore/wire"
)

// rescoreScenarios are the scenarios with a chat history and the close
// reason their summary names.
var rescoreScenarios = []struct{ name, closeReason string }{
	{"1_clean_call", "CR_PARTICIPANT_DISCONNECTED"}, {"2_slow_agent", "CR_USER_INITIATED"}, {"3_barge_in", "CR_PARTICIPANT_DISCONNECTED"},
	{"4_tool_trouble", "CR_COMPLETED"}, {"5_bad_hearing", "CR_PARTICIPANT_DISCONNECTED"}, {"6_error_close", "CR_ERROR"},
}

// scoreSessions runs n sessions through the daemon: each a scenario's
// chat history under its own room and job, its agent named by the job's
// webhook (booking or support in turn).
func scoreSessions(t *testing.T, d *Daemon, url string, n int) map[string]string {
	t.Helper()
	agents := map[string]string{}
	for i := range n {
		sc := rescoreScenarios[i%len(rescoreScenarios)]
		room, job := fmt.Sprintf("RM_rescore%03d", i), fmt.Sprintf("AJ_rescore%03d", i)
		agent := []string{"booking", "support"}[(i/len(rescoreScenarios))%2]
		dir := t.TempDir()
		writeScenarioCopy(t, dir, sc.name, room, job, `{"close_reason":"`+sc.closeReason+`"}`)
		uploadDir(t, d, dir)
		sendWebhook(t, d, jobEnded(fmt.Sprintf("EV_rescore%03d", i), room, job, agent, livekit.JobStatus_JS_SUCCESS))
		agents[room+"/"+job] = agent
	}
	testenv.WaitFor(t, settleWait, "every session scored", func() bool { return len(streamMsgs(t, url, "LKSCORE_RESULTS")) >= n })
	quiesce(t, url, defaultConsumers)
	return agents
}

// cardsByVersion counts the results stream's scorecards per session under
// their agent's scoring version (versionFor).
func cardsByVersion(t *testing.T, url string, versionFor func(agent string) string) map[string]int {
	t.Helper()
	out := map[string]int{}
	for _, m := range streamMsgs(t, url, "LKSCORE_RESULTS") {
		if m.Header.Get(wire.HeaderScoringVersion) == versionFor(m.Header.Get(wire.HeaderAgentName)) {
			out[m.Header.Get(wire.HeaderSessionKey)]++
		}
	}
	return out
}

// TestRescoreDryRunThenPublish: 24 sessions scored by the daemon under the
// default model, two of them with their recording removed; a dry run under
// examples/policies.yaml shows each agent's verdict changes and the rule
// violations, and publishes nothing; the publishing run has the daemon's
// own workers publish one scorecard per session under the new version,
// byte-identical to the dry run's; a second run publishes nothing more;
// both runs name the two removed sessions.
func TestRescoreDryRunThenPublish(t *testing.T) {
	t.Parallel()
	ns := startNATS(t)
	cfg := pipelineConfig(t, ns.URL())
	d, _ := startDaemon(t, cfg)
	t0 := time.Now()
	agents := scoreSessions(t, d, ns.URL(), 24)
	t.Logf("scored 24 sessions in %s", time.Since(t0))
	before := len(streamMsgs(t, ns.URL(), "LKSCORE_RESULTS"))
	st, err := store.Open(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	// Retention removes two sessions' recordings.
	removed := []string{"RM_rescore003/AJ_rescore003", "RM_rescore010/AJ_rescore010"}
	for _, key := range removed {
		room, job, _ := strings.Cut(key, "/")
		dirs, _ := filepath.Glob(filepath.Join(cfg.DataDir, "recordings", "*"+room+"*"))
		if len(dirs) == 0 {
			dirs, _ = filepath.Glob(filepath.Join(cfg.DataDir, "recordings", "*", "*"+job+"*"))
		}
		if len(dirs) != 1 {
			t.Fatalf("%s: recording dirs %v", key, dirs)
		}
		if err := os.RemoveAll(dirs[0]); err != nil {
			t.Fatal(err)
		}
	}

	newCfg := cfg
	newCfg.Scoring, err = config.LoadScoring("../examples/policies.yaml")
	if err != nil {
		t.Fatal(err)
	}
	js := testenv.JetStream(t, ns.URL())
	ctx := context.Background()
	opts := rescore.Options{Since: time.Now().Add(-time.Hour), DryRun: true, InFlight: 8, Wait: settleWait}
	t0 = time.Now()
	dry, err := rescore.Run(ctx, js, wire.NewSubjects(cfg.NATS.SubjectPrefix, cfg.NATS.StreamPrefix), newCfg, st, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("dry run in %s", time.Since(t0))
	scorer, _ := rules.NewScorer(newCfg.Scoring)
	if dry.ScoringVersion != scorer.Version() || dry.Sessions != 24 || dry.Rescored != 22 || len(dry.Removed) != 2 ||
		dry.Removed[0].Session != removed[0] || dry.Removed[1].Session != removed[1] || !strings.Contains(dry.Removed[0].Why, "recording is gone") {
		t.Fatalf("dry run: %d sessions, %d rescored, removed %+v", dry.Sessions, dry.Rescored, dry.Removed)
	}
	if got := len(streamMsgs(t, ns.URL(), "LKSCORE_RESULTS")); got != before {
		t.Fatalf("a dry run published %d scorecards", got-before)
	}
	// Each agent's diff adds up, and the rules show: booking's slow agent
	// (scenario 2) violates its latency budget, the support sessions that
	// hand over to nobody violate support_handoff, the error close
	// violates allowed_close_reason.
	total := 0
	for _, a := range dry.Agents {
		total += a.Sessions
		if a.Agent != "booking" && a.Agent != "support" {
			t.Errorf("agent %q", a.Agent)
		}
		if a.New != 0 {
			t.Errorf("%s: %d sessions without an earlier scorecard", a.Agent, a.New)
		}
	}
	if total != 22 {
		t.Errorf("agents' sessions add up to %d", total)
	}
	byAgent := map[string]rescore.AgentDiff{}
	for _, a := range dry.Agents {
		byAgent[a.Agent] = a
	}
	// Support's two clean calls (scenario 1) hand over to booking_agent.
	if byAgent["support"].Violations["support_handoff"] != byAgent["support"].Sessions-2 || byAgent["booking"].Violations["booking_latency_budget"] == 0 ||
		byAgent["booking"].Violations["allowed_close_reason"]+byAgent["support"].Violations["allowed_close_reason"] == 0 {
		t.Errorf("violations: booking %v, support %v", byAgent["booking"].Violations, byAgent["support"].Violations)
	}
	if len(dry.Movers) == 0 || dry.Movers[0].Old == nil || len(dry.Changed) < len(dry.Movers) {
		t.Fatalf("movers %+v", dry.Movers)
	}
	for _, m := range dry.Changed {
		if m.Agent != agents[m.Session] || m.New.Policy != m.Agent || m.Old.ScoringVersion == scorer.VersionFor(m.Agent) {
			t.Errorf("changed %+v (agent %s)", m, agents[m.Session])
		}
	}
	var text bytes.Buffer
	if err := rescore.WriteReport(&text, dry); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"verdicts by agent", "booking", "sessions that moved most", "2 sessions could not be rescored",
		removed[0], "dry run: nothing published"} {
		if !strings.Contains(text.String(), want) {
			t.Errorf("report lacks %q:\n%s", want, text.String())
		}
	}

	// Publish: the daemon's workers score the rescore items.
	opts.DryRun = false
	t0 = time.Now()
	pub, err := rescore.Run(ctx, js, wire.NewSubjects(cfg.NATS.SubjectPrefix, cfg.NATS.StreamPrefix), newCfg, st, opts)
	t.Logf("published in %s", time.Since(t0))
	if err != nil {
		t.Fatal(err)
	}
	if pub.Enqueued != 22 || pub.Published != 22 || len(pub.NotYetPublished) != 0 || len(pub.Mismatched) != 0 || pub.AlreadyPublished != 0 {
		t.Fatalf("publish: enqueued %d, published %d, not yet %v, mismatched %v", pub.Enqueued, pub.Published, pub.NotYetPublished, pub.Mismatched)
	}
	quiesce(t, ns.URL(), defaultConsumers)
	counts := cardsByVersion(t, ns.URL(), scorer.VersionFor)
	if len(counts) != 22 {
		t.Errorf("%d sessions have a scorecard under %s, want 22", len(counts), dry.ScoringVersion)
	}
	for key, n := range counts {
		if n != 1 {
			t.Errorf("%s: %d scorecards under the new version", key, n)
		}
	}
	for _, m := range streamMsgs(t, ns.URL(), "LKSCORE_RESULTS") {
		if m.Header.Get(wire.HeaderScoringVersion) != scorer.VersionFor(m.Header.Get(wire.HeaderAgentName)) {
			continue
		}
		var card session.Scorecard
		if err := json.Unmarshal(m.Data, &card); err != nil {
			t.Fatal(err)
		}
		if card.Policy == nil || card.Policy.Name != agents[card.Session.Key] {
			t.Errorf("%s: policy %+v", card.Session.Key, card.Policy)
		}
	}
	// Again: everything is there; nothing is enqueued.
	again, err := rescore.Run(ctx, js, wire.NewSubjects(cfg.NATS.SubjectPrefix, cfg.NATS.StreamPrefix), newCfg, st, opts)
	if err != nil {
		t.Fatal(err)
	}
	if again.AlreadyPublished != 22 || again.Enqueued != 0 || len(again.Removed) != 2 {
		t.Errorf("second run: already %d, enqueued %d, removed %d", again.AlreadyPublished, again.Enqueued, len(again.Removed))
	}
	quiesce(t, ns.URL(), defaultConsumers)
	if got := cardsByVersion(t, ns.URL(), scorer.VersionFor); len(got) != 22 {
		t.Errorf("after the second run: %d sessions under the new version", len(got))
	}
}
