package main

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"github.com/lkscore/lkscore/internal/testenv"
)

func TestServeEmbeddedStartsAndStops(t *testing.T) {
	env := map[string]string{
		"LIVEKIT_API_KEY": "devkey", "LIVEKIT_API_SECRET": "devsecret-0123456789",
		"LKSCORE_LISTEN": "127.0.0.1:0", "LKSCORE_OPS_LISTEN": "127.0.0.1:0", "LKSCORE_DATA_DIR": t.TempDir(),
	}
	ctx, cancel := context.WithCancel(context.Background())
	var stderr testenv.SyncBuffer
	done := make(chan int)
	// Port -1 keeps the embedded NATS off 4222 in tests.
	cfgFile := t.TempDir() + "/c.yml"
	testenv.WriteFile(t, cfgFile, "nats:\n  embedded_port: -1\n")
	go func() {
		done <- run(ctx, []string{"lkscore", "serve", "--config", cfgFile}, func(k string) string { return env[k] }, &bytes.Buffer{}, &stderr)
	}()
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("log:\n%s", stderr.String())
		}
	})
	testenv.WaitFor(t, 20*time.Second, "lkscore ready", func() bool { return strings.Contains(stderr.String(), "lkscore ready") })
	if !strings.Contains(stderr.String(), `"msg":"embedded nats started","url":"nats://127.0.0.1:`) {
		t.Errorf("embedded NATS URL not logged:\n%s", stderr.String())
	}
	if strings.Contains(stderr.String(), "devsecret") {
		t.Errorf("secret logged")
	}
	cancel()
	select {
	case code := <-done:
		if code != 0 {
			t.Fatalf("exit %d; log:\n%s", code, stderr.String())
		}
	case <-time.After(30 * time.Second):
		t.Fatal("did not stop")
	}
}

func TestServeConfigErrorExits2(t *testing.T) {
	var stderr bytes.Buffer
	code := run(context.Background(), []string{"lkscore", "serve", "--listen", "nope"}, func(string) string { return "" }, &bytes.Buffer{}, &stderr)
	if code != 2 {
		t.Fatalf("exit %d, want 2", code)
	}
	for _, want := range []string{"listen:", "livekit keys: none configured"} {
		if !strings.Contains(stderr.String(), want) {
			t.Errorf("stderr %q lacks %q", stderr.String(), want)
		}
	}
}

// TestServeRefusesAWeakDashboardToken: `lkscore serve` with a 6-character
// dashboard token does not start (exit 2), and says why.
func TestServeRefusesAWeakDashboardToken(t *testing.T) {
	env := map[string]string{"LIVEKIT_API_KEY": "devkey", "LIVEKIT_API_SECRET": "devsecret-0123456789", "LKSCORE_DASHBOARD_TOKEN": "Ab3$xy",
		"LKSCORE_DATA_DIR": t.TempDir()}
	var stderr bytes.Buffer
	code := run(context.Background(), []string{"lkscore", "serve"}, func(k string) string { return env[k] }, &bytes.Buffer{}, &stderr)
	if code != 2 || !strings.Contains(stderr.String(), "LKSCORE_DASHBOARD_TOKEN: too weak to guard the dashboard: 6 characters, at least 16") {
		t.Fatalf("exit %d, stderr %q", code, stderr.String())
	}
}

// TestVersionAndUnknownCommand: `lkscore version` prints the versions and
// exits 0; an unknown command is a one-line usage error, exit 2.
func TestVersionAndUnknownCommand(t *testing.T) {
	var stdout, stderr bytes.Buffer
	if code := run(context.Background(), []string{"lkscore", "version"}, func(string) string { return "" }, &stdout, &stderr); code != 0 ||
		!strings.HasPrefix(stdout.String(), "lkscore dev (scoring model ") {
		t.Errorf("version: exit %d, %q %q", code, stdout.String(), stderr.String())
	}
	stdout.Reset()
	stderr.Reset()
	code := run(context.Background(), []string{"lkscore", "foo"}, func(string) string { return "" }, &stdout, &stderr)
	if code != 2 || strings.Count(stderr.String(), "\n") != 1 || !strings.Contains(stderr.String(), `unknown command "foo"`) || stdout.Len() != 0 {
		t.Errorf("unknown command: exit %d, stdout %q, stderr %q", code, stdout.String(), stderr.String())
	}
}

// TestUsageErrorsOneLine: a missing or bad flag on any command is one line
// on stderr, naming the command, and exit 2; the help is not printed.
func TestUsageErrorsOneLine(t *testing.T) {
	for _, args := range [][]string{{"forget"}, {"check"}, {"baseline", "seal"}, {"score", "--nope", "x"}, {"bench", "--sessions", "x"},
		{"forget", "--session", "nope"}} {
		var stdout, stderr bytes.Buffer
		code := run(context.Background(), append([]string{"lkscore"}, args...), func(string) string { return "" }, &stdout, &stderr)
		if code != 2 || strings.Count(stderr.String(), "\n") != 1 || stdout.Len() != 0 ||
			!strings.HasPrefix(stderr.String(), "lkscore: "+strings.Join(args[:1], " ")) {
			t.Errorf("%v: exit %d, stdout %q, stderr %q", args, code, stdout.String(), stderr.String())
		}
	}
}

// TestEnumFlagsRefused: an unknown --stage is a usage error naming the
// allowed values, notify included.
func TestEnumFlagsRefused(t *testing.T) {
	var stdout, stderr bytes.Buffer
	code := run(context.Background(), []string{"lkscore", "dlq", "list", "--stage", "nosuch"}, func(string) string { return "" }, &stdout, &stderr)
	if code != 2 || !strings.Contains(stderr.String(), "locate, score, regress, notify") {
		t.Errorf("dlq list --stage nosuch: exit %d, stderr %q", code, stderr.String())
	}
}

// TestFormatFlags: every reporting command takes --format json|table and
// refuses another value, or --json with --format table, as a usage error.
func TestFormatFlags(t *testing.T) {
	for _, args := range [][]string{{"tail", "--format", "xml"}, {"dlq", "list", "--format", "xml"}, {"bench", "--json", "--format", "table"},
		{"forget", "--session", "RM_a/AJ_b", "--format", "csv"}, {"check", "--baseline", "b.json", "--format", "yaml", "dir"},
		{"score", "--json", "--format", "table", "dir"}} {
		var stdout, stderr bytes.Buffer
		code := run(context.Background(), append([]string{"lkscore"}, args...), func(string) string { return "" }, &stdout, &stderr)
		if code != 2 || !strings.Contains(stderr.String(), "--format") || strings.Count(stderr.String(), "\n") != 1 {
			t.Errorf("%v: exit %d, stderr %q", args, code, stderr.String())
		}
	}
}

// TestServeRefusesATypoedRule: a rule whose expression names a measure
// that does not exist stops `lkscore serve` before it listens, naming the
// rule, the line and column in its expression, and the key it meant.
func TestServeRefusesATypoedRule(t *testing.T) {
	cfgFile := t.TempDir() + "/c.yml"
	testenv.WriteFile(t, cfgFile, `nats:
  embedded_port: -1
scoring:
  rules:
    - name: booking_latency_budget
      when: {agents: [booking]}
      expr: metrics.e2e_latency_p95 > 1500.0
      severity: critical
`)
	env := map[string]string{"LIVEKIT_API_KEY": "devkey", "LIVEKIT_API_SECRET": "devsecret-0123456789",
		"LKSCORE_LISTEN": "127.0.0.1:0", "LKSCORE_OPS_LISTEN": "127.0.0.1:0", "LKSCORE_DATA_DIR": t.TempDir()}
	var stderr bytes.Buffer
	code := run(context.Background(), []string{"lkscore", "serve", "--config", cfgFile}, func(k string) string { return env[k] }, &bytes.Buffer{}, &stderr)
	if code != 2 {
		t.Fatalf("exit %d, want 2; stderr %s", code, stderr.String())
	}
	for _, want := range []string{"scoring.rules[0] (booking_latency_budget)", "line 1, column 8", `metrics has no key "e2e_latency_p95"`,
		`did you mean "e2e_latency_p95_ms"`} {
		if !strings.Contains(stderr.String(), want) {
			t.Errorf("stderr %q lacks %q", stderr.String(), want)
		}
	}
	if strings.Contains(stderr.String(), "lkscore ready") {
		t.Error("started anyway")
	}
}
