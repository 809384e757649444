package main

import (
	"bytes"
	"context"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/lkscore/lkscore/config"
	"github.com/lkscore/lkscore/wire"
)

// TestExampleConsumer builds examples/scorecards, the consumer written on
// the wire contract alone, and runs it against a daemon with
// pipeline.agent_results: filtered by agent on the server, it gets that
// agent's scorecards only, also for two names that share an alert subject
// token (support.bot, support_bot); unfiltered, every one.
func TestExampleConsumer(t *testing.T) {
	t.Parallel()
	bin := filepath.Join(t.TempDir(), "scorecards")
	if out, err := exec.Command("go", "build", "-o", bin, "../../examples/scorecards").CombinedOutput(); err != nil {
		t.Fatalf("build the example: %v\n%s", err, out)
	}
	if wire.Token("support.bot") != wire.Token("support_bot") {
		t.Fatal("the two agents must share an alert subject token for this test to mean anything")
	}
	d, snd, _ := startTestDaemonIn(t, t.TempDir(), func(c *config.Config) { c.Pipeline.AgentResults = true })
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	run := func(args ...string) chan string {
		done := make(chan string, 1)
		cmd := exec.CommandContext(ctx, bin, append([]string{"--nats-url", d.NATSURL()}, args...)...)
		var out, stderr bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &stderr
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		go func() {
			err := cmd.Wait()
			if err != nil {
				done <- "error: " + err.Error() + ": " + stderr.String()
				return
			}
			done <- out.String()
		}()
		return done
	}
	dotted := run("--agent", "support.bot", "--limit", "1")
	under := run("--agent", "support_bot", "--limit", "1")
	every := run("--limit", "2")
	time.Sleep(time.Second) // the consumers exist: they start with the next new scorecard
	sendScenarioAs(t, snd, "1_clean_call", "support.bot")
	sendScenarioAs(t, snd, "6_error_close", "support_bot")

	got := map[string]string{"dotted": <-dotted, "under": <-under, "every": <-every}
	if l := got["dotted"]; strings.Count(l, "\n") != 1 || !strings.Contains(l, "RM_CleanCall01/AJ_CleanCall01\tsupport.bot\t") {
		t.Errorf("--agent support.bot: %q", l)
	}
	if l := got["under"]; strings.Count(l, "\n") != 1 || !strings.Contains(l, "\tsupport_bot\tfail\t") {
		t.Errorf("--agent support_bot: %q", l)
	}
	if l := got["every"]; strings.Count(l, "\n") != 2 || !strings.Contains(l, "support.bot") || !strings.Contains(l, "support_bot") {
		t.Errorf("every scorecard: %q", l)
	}
	// Replayed with --all and a close reason, filtered by the server too.
	code := run("--agent", "support_bot", "--close-reason", "CR_USER_INITIATED", "--all", "--limit", "1")
	select {
	case l := <-code:
		t.Errorf("support_bot has no CR_USER_INITIATED session, yet: %q", l)
	case <-time.After(2 * time.Second):
	}
	if l := <-run("--agent", "support_bot", "--close-reason", "CR_ERROR", "--all", "--limit", "1"); !strings.Contains(l, "\tCR_ERROR\t") {
		t.Errorf("--close-reason CR_ERROR --all: %q", l)
	}
}
