package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/livekit/protocol/livekit"
	"github.com/nats-io/nats.go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"google.golang.org/protobuf/proto"

	"github.com/lkscore/lkscore/config"
	"github.com/lkscore/lkscore/consumer/broker"
	"github.com/lkscore/lkscore/internal/testenv"
	"github.com/lkscore/lkscore/scenarios"
)

// TestEmbeddedNATSNeedsItsToken: the embedded server refuses a client
// without credentials, and with a wrong token; its token file is 0600 in the
// data dir; and every operator command (tail, dlq, forget, baseline, bench)
// finds the token by itself, given only the config the daemon runs with.
func TestEmbeddedNATSNeedsItsToken(t *testing.T) {
	dataDir := t.TempDir()
	d, snd, _ := startTestDaemonIn(t, dataDir)
	sendScenario(t, snd, "1_clean_call")
	testenv.WaitFor(t, 20*time.Second, "the scorecard", func() bool { return len(resultKeys(t, d.NATSURL())) == 1 })

	plain := d.NATSURLRedacted()
	for name, opts := range map[string][]nats.Option{"no credentials": nil, "a wrong token": {nats.Token(strings.Repeat("0", 64))}} {
		if nc, err := nats.Connect(plain, append(opts, nats.MaxReconnects(0))...); err == nil {
			nc.Close()
			t.Errorf("the embedded server let a client in with %s", name)
		} else if !strings.Contains(strings.ToLower(err.Error()), "authorization") {
			t.Errorf("%s: %v, want an authorization violation", name, err)
		}
	}
	fi, err := os.Stat(filepath.Join(dataDir, broker.TokenFile))
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("token file: %v %v", fi, err)
	}

	// The config the daemon runs with: its data dir and its port, nothing else.
	port := plain[strings.LastIndex(plain, ":")+1:]
	cfgFile := filepath.Join(t.TempDir(), "lkscore.yaml")
	testenv.WriteFile(t, cfgFile, fmt.Sprintf("data_dir: %s\nnats:\n  embedded_port: %s\n", dataDir, port))
	env := func(k string) string {
		return map[string]string{"LIVEKIT_API_KEY": "APItail", "LIVEKIT_API_SECRET": "tail-secret-0123456789"}[k]
	}
	for _, c := range []struct {
		args []string
		code int
		says string // in stdout or stderr: the command reached the daemon's NATS
	}{
		{[]string{"tail", "--since", "1h", "--limit", "1"}, 0, "RM_CleanCall01/AJ_CleanCall01"},
		{[]string{"dlq", "list"}, 0, "no dead letters"}, // an empty list says it is empty
		{[]string{"baseline", "show", "--agent", "tail-agent"}, 1, "no sealed baseline for agent tail-agent"},
		{[]string{"bench", "--sessions", "1", "--concurrency", "1", "--url", "http://" + d.IngestAddr()}, 0, "lost"},
		{[]string{"forget", "--session", "RM_CleanCall01/AJ_CleanCall01"}, 0, "LKSCORE_RESULTS"},
	} {
		var out, errb bytes.Buffer
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		code := run(ctx, append(append([]string{"lkscore"}, c.args...), "--config", cfgFile), env, &out, &errb)
		cancel()
		if code != c.code || !strings.Contains(out.String()+errb.String(), c.says) {
			t.Errorf("lkscore %s: exit %d, want %d and %q\n%s\n%s", strings.Join(c.args, " "), code, c.code, c.says, out.String(), errb.String())
		}
	}

	// Without the data dir, a command says where the token should be.
	other := filepath.Join(t.TempDir(), "other.yaml")
	testenv.WriteFile(t, other, fmt.Sprintf("data_dir: %s\nnats:\n  embedded_port: %s\n", t.TempDir(), port))
	var out, errb bytes.Buffer
	if code := run(context.Background(), []string{"lkscore", "dlq", "list", "--config", other}, env, &out, &errb); code == 0 ||
		!strings.Contains(errb.String(), broker.TokenFile) {
		t.Errorf("dlq with a data dir that has no token: exit %d: %s", code, errb.String())
	}
}

// TestAgentMetricsCapped: 60 sessions, each of its own agent name and
// version (agents choose both): no metric family on /metrics has more than
// metrics.max_agents agent label values, plus "other" and "unknown".
func TestAgentMetricsCapped(t *testing.T) {
	const maxAgents = 5
	d, snd, _ := startTestDaemonIn(t, t.TempDir(), func(c *config.Config) { c.Metrics.MaxAgents = maxAgents })
	all, _ := scenarios.All()
	chat := all[0].Chat
	ctx := context.Background()
	for i := range 60 {
		room, job, agent := fmt.Sprintf("RM_Agent%02d", i), fmt.Sprintf("AJ_Agent%02d", i), fmt.Sprintf("agent-%02d", i)
		header, _ := proto.Marshal(&livekit.MetricsRecordingHeader{RoomId: room, JobId: job})
		ev := &livekit.WebhookEvent{Event: "agent_job_ended", Id: "EV_" + job, Job: &livekit.Job{Id: job, AgentName: agent,
			Deployment: fmt.Sprintf("v%d", i), Room: &livekit.Room{Sid: room}, State: &livekit.JobState{Status: livekit.JobStatus_JS_SUCCESS}}}
		for _, err := range []error{snd.Upload(ctx, header, chat), snd.Webhook(ctx, ev), snd.CloseLog(ctx, room, job, agent, "user_initiated")} {
			if err != nil {
				t.Fatal(err)
			}
		}
	}
	testenv.WaitFor(t, 60*time.Second, "60 scorecards", func() bool { return len(resultKeys(t, d.NATSURL())) == 60 })
	families := map[string]map[string]bool{}
	testenv.WaitFor(t, 20*time.Second, "the regression metric", func() bool {
		resp, err := http.Get("http://" + d.OpsAddr() + "/metrics")
		if err != nil {
			return false
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		p := expfmt.NewTextParser(model.UTF8Validation)
		mfs, err := p.TextToMetricFamilies(bytes.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		families = map[string]map[string]bool{}
		for name, mf := range mfs {
			for _, m := range mf.GetMetric() {
				for _, l := range m.GetLabel() {
					if l.GetName() == "agent" {
						if families[name] == nil {
							families[name] = map[string]bool{}
						}
						families[name][l.GetValue()] = true
					}
				}
			}
		}
		return len(families["lkscore_regression_sessions_total"]) > 0 && len(families["lkscore_scorecards_total"]) > 0
	})
	for name, agents := range families {
		t.Logf("%s: %d agent label values", name, len(agents))
		if len(agents) > maxAgents+2 {
			t.Errorf("%s has %d agent label values, over max_agents (%d) + other + unknown", name, len(agents), maxAgents)
		}
		if !agents["other"] {
			t.Errorf("%s counts no agent as other: 60 agents, max_agents %d", name, maxAgents)
		}
	}
}
