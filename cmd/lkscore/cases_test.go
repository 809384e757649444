package main

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/livekit/protocol/livekit"
	"google.golang.org/protobuf/proto"

	"github.com/lkscore/lkscore/consumer"
	"github.com/lkscore/lkscore/consumer/cases"
	"github.com/lkscore/lkscore/internal/testenv"
	"github.com/lkscore/lkscore/scenarios"
)

// casesDaemon scores the eight acceptance scenarios on a daemon and returns
// it, its data dir and the scenarios' session keys by name.
func casesDaemon(t *testing.T) (*consumer.Daemon, string, map[string]string) {
	t.Helper()
	dataDir := t.TempDir()
	d, snd, _ := startTestDaemonIn(t, dataDir)
	all, err := scenarios.All()
	if err != nil {
		t.Fatal(err)
	}
	keys := map[string]string{}
	for _, sc := range all {
		sendScenario(t, snd, sc.Name)
		var hdr livekit.MetricsRecordingHeader
		if err := proto.Unmarshal(sc.Header, &hdr); err != nil {
			t.Fatal(err)
		}
		keys[sc.Name] = hdr.RoomId + "/" + hdr.JobId
	}
	if len(keys) != 8 {
		t.Fatalf("%d acceptance scenarios, want 8", len(keys))
	}
	testenv.WaitFor(t, 30*time.Second, "the eight scorecards", func() bool { return len(resultKeys(t, d.NATSURL())) >= len(keys) })
	return d, dataDir, keys
}

func runLkscore(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	var stdout, stderr bytes.Buffer
	code := run(context.Background(), append([]string{"lkscore"}, args...), func(string) string { return "" }, &stdout, &stderr)
	return code, stdout.String(), stderr.String()
}

// TestCaseExportAndCheck: each of the eight acceptance scenarios, scored by
// the daemon, exported as a case and checked again against its own
// unchanged recording, gets what it got (exit 0). One case's recording
// changed so that its tool no longer fails: check --cases reports the
// finding that disappeared and the verdict that moved (exit 3).
func TestCaseExportAndCheck(t *testing.T) {
	d, dataDir, keys := casesDaemon(t)
	dir := t.TempDir()
	for name, key := range keys {
		code, out, errOut := runLkscore(t, "case", "export", "--session", key, "--out", filepath.Join(dir, name),
			"--nats-url", d.NATSURL(), "--data-dir", dataDir)
		if code != 0 {
			t.Fatalf("export %s: exit %d\n%s%s", name, code, out, errOut)
		}
	}
	code, out, errOut := runLkscore(t, "check", "--cases", dir)
	t.Logf("check --cases:\n%s", out)
	if code != 0 || !strings.Contains(out, "8 cases: 8 as expected") {
		t.Fatalf("the unchanged cases: exit %d\n%s%s", code, out, errOut)
	}
	// The team's fix, in the recording: the tool that failed now answers.
	chatPath := filepath.Join(dir, "4_tool_trouble", "recording", "chat_history.json")
	var chat map[string]any
	if err := json.Unmarshal(mustRead(t, chatPath), &chat); err != nil {
		t.Fatal(err)
	}
	fixed := 0
	for _, it := range chat["items"].([]any) {
		m := it.(map[string]any)
		if m["is_error"] == true {
			m["is_error"], m["output"] = false, `{"slots":["10:00"]}`
			fixed++
		}
	}
	if fixed != 1 {
		t.Fatalf("the tool-trouble call has %d failed tool outputs, want 1", fixed)
	}
	b, _ := json.Marshal(chat)
	if err := os.WriteFile(chatPath, b, 0o644); err != nil {
		t.Fatal(err)
	}
	code, out, _ = runLkscore(t, "check", "--cases", dir)
	t.Logf("check --cases after the change:\n%s", out)
	if code != 3 || !strings.Contains(out, "case RM_ToolTrouble04/AJ_ToolTrouble04") || !strings.Contains(out, "DIFFERS") ||
		!strings.Contains(out, "findings expected, not found: tool_error") || !strings.Contains(out, "8 cases: 7 as expected, 1 differ") {
		t.Fatalf("a changed turn: exit %d\n%s", code, out)
	}
	// The expectation edited to what the fixed agent gets: it passes again.
	casePath := filepath.Join(dir, "4_tool_trouble", cases.FileCase)
	var kept []string
	for _, line := range strings.Split(string(mustRead(t, casePath)), "\n") {
		if strings.TrimSpace(line) != "- tool_error" {
			kept = append(kept, line)
		}
	}
	edited := strings.Join(kept, "\n")
	var res []struct {
		Got struct {
			Verdict string `json:"verdict"`
		} `json:"got"`
	}
	_, jout, _ := runLkscore(t, "check", "--cases", filepath.Join(dir, "4_tool_trouble"), "--format", "json")
	if err := json.Unmarshal([]byte(jout), &res); err != nil || len(res) != 1 {
		t.Fatalf("check --format json: %v\n%s", err, jout)
	}
	edited = strings.Replace(edited, "verdict: warn", "verdict: "+res[0].Got.Verdict, 1)
	if err := os.WriteFile(casePath, []byte(edited), 0o644); err != nil {
		t.Fatal(err)
	}
	if code, out, _ := runLkscore(t, "check", "--cases", dir); code != 0 {
		t.Fatalf("the expectation edited to the fix: exit %d\n%s", code, out)
	}
}

func mustRead(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestCaseOfRedactedSession: a session its header marks redacted, with a
// marker in every text of its chat history: its case holds no byte of any
// marker, says it is redacted, and check says it needs a recording; no
// test can be generated from it.
func TestCaseOfRedactedSession(t *testing.T) {
	dataDir := t.TempDir()
	d, snd, _ := startTestDaemonIn(t, dataDir)
	markers := []string{"MRKcaseUser", "MRKcaseAgent", "MRKcaseToolArgs", "MRKcaseToolOut"}
	chat, _ := json.Marshal(map[string]any{"items": []map[string]any{
		{"id": "i1", "type": "message", "role": "assistant", "content": []string{markers[1]}, "created_at": 1764417601.0},
		{"id": "i2", "type": "message", "role": "user", "content": []string{markers[0]}, "created_at": 1764417603.0},
		{"id": "i3", "type": "function_call", "call_id": "c1", "name": "lookup", "arguments": `{"q":"` + markers[2] + `"}`, "created_at": 1764417604.0},
		{"id": "i4", "type": "function_call_output", "call_id": "c1", "name": "lookup", "output": markers[3], "is_error": true, "created_at": 1764417605.0},
	}})
	header, _ := proto.Marshal(&livekit.MetricsRecordingHeader{RoomId: "RM_CaseRed", JobId: "AJ_CaseRed", RedactionEnabled: true,
		SessionSummary: `{"close_reason":"CR_USER_INITIATED"}`})
	if err := snd.Upload(context.Background(), header, chat); err != nil {
		t.Fatal(err)
	}
	testenv.WaitFor(t, 30*time.Second, "the scorecard", func() bool { return len(resultKeys(t, d.NATSURL())) == 1 })
	dir := filepath.Join(t.TempDir(), "red")
	args := []string{"--session", "RM_CaseRed/AJ_CaseRed", "--nats-url", d.NATSURL(), "--data-dir", dataDir}
	if code, out, errOut := runLkscore(t, append([]string{"case", "export", "--out", dir}, args...)...); code != 0 {
		t.Fatalf("export: exit %d\n%s%s", code, out, errOut)
	}
	f, err := cases.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for name, data := range f {
		for _, m := range markers {
			if bytes.Contains(data, []byte(m)) {
				t.Errorf("%s holds the marker %s", name, m)
			}
		}
	}
	c, err := f.Case()
	if err != nil || !c.Redacted || len(c.Notes) == 0 || f[cases.DirRecording+"chat_history.json"] != nil {
		t.Fatalf("case %+v (%v), files %v", c, err, keysOf(f))
	}
	if code, out, _ := runLkscore(t, "check", "--cases", dir); code != 1 || !strings.Contains(out, "redacted") {
		t.Errorf("check of a redacted case: exit %d\n%s", code, out)
	}
	if code, _, errOut := runLkscore(t, append([]string{"case", "export", "--format", "pytest", "--out", "-"}, args...)...); code == 0 ||
		!strings.Contains(errOut, "no chat history") {
		t.Errorf("pytest of a redacted session: exit %d, %s", code, errOut)
	}
}

func keysOf(f cases.Files) []string {
	var out []string
	for k := range f {
		out = append(out, k)
	}
	return out
}

// TestCaseAsAgentTests: the tool-trouble call (a tool that failed, a call
// that never returned) and the error-close call (a turn not answered) as
// tests for the agents SDKs' frameworks: the pytest file parses with
// Python's ast and calls AgentSession.run and RunResult.expect's
// contains_function_call / contains_function_call_output /
// contains_message; the vitest file parses with Node (node --check, the
// agents-js testdata's toolchain) and calls their agents-js names.
func TestCaseAsAgentTests(t *testing.T) {
	d, dataDir, keys := casesDaemon(t)
	python, err := exec.LookPath("python3")
	if err != nil {
		t.Fatal("python3 is required to parse the generated pytest file")
	}
	_, node := testenv.AgentsJS(t)
	if node == "" {
		if node, err = exec.LookPath("node"); err != nil {
			t.Fatal("node is required to parse the generated vitest file")
		}
	}
	dir := t.TempDir()
	for _, tc := range []struct {
		scenario string
		py, js   []string
	}{
		{"4_tool_trouble", []string{`session.run(user_input=`, `result.expect.contains_function_call(name="lookup_slots")`,
			`result.expect.contains_function_call_output(is_error=False)`, `result.expect.contains_function_call(name="send_confirmation")`,
			"livekit-agents 1.7.0", "cannot assert this"},
			[]string{`session.run({ userInput:`, `result.expect.containsFunctionCall({ name: "lookup_slots" })`,
				`result.expect.containsFunctionCallOutput({ isError: false })`, "@livekit/agents 1.9.0"}},
		{"6_error_close", []string{`result.expect.contains_message(role="assistant")`}, []string{`result.expect.containsMessage({ role: 'assistant' })`}},
	} {
		py := filepath.Join(dir, tc.scenario+"_test.py")
		js := filepath.Join(dir, tc.scenario+".test.mjs")
		for format, out := range map[string]string{"pytest": py, "vitest": js} {
			if code, o, e := runLkscore(t, "case", "export", "--session", keys[tc.scenario], "--format", format, "--out", out,
				"--nats-url", d.NATSURL(), "--data-dir", dataDir); code != 0 {
				t.Fatalf("%s %s: exit %d\n%s%s", tc.scenario, format, code, o, e)
			}
		}
		// Without --out the test is written to stdout, and nothing else is.
		code, stdoutPy, e := runLkscore(t, "case", "export", "--session", keys[tc.scenario], "--format", "pytest",
			"--nats-url", d.NATSURL(), "--data-dir", dataDir)
		if code != 0 || stdoutPy != string(mustRead(t, py)) {
			t.Errorf("%s: pytest without --out: exit %d, stdout is not the test alone\n%s%s", tc.scenario, code, stdoutPy, e)
		}
		if out, err := exec.Command(python, "-c", "import ast, sys; ast.parse(open(sys.argv[1]).read(), sys.argv[1])", py).CombinedOutput(); err != nil {
			t.Errorf("%s: the pytest file does not parse: %v\n%s\n%s", tc.scenario, err, out, mustRead(t, py))
		}
		if out, err := exec.Command(node, "--check", js).CombinedOutput(); err != nil {
			t.Errorf("%s: the vitest file does not parse: %v\n%s\n%s", tc.scenario, err, out, mustRead(t, js))
		}
		for file, want := range map[string][]string{py: tc.py, js: tc.js} {
			src := string(mustRead(t, file))
			for _, w := range want {
				if !strings.Contains(src, w) {
					t.Errorf("%s lacks %s\n%s", filepath.Base(file), w, src)
				}
			}
		}
	}
}

// TestCaseExportButton: in a real browser (headless Chromium), the session
// page's "Export as a test case" link downloads, byte for byte, the archive
// `lkscore case export --archive` writes for the same session.
func TestCaseExportButton(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: headless Chromium")
	}
	ctx := browser(t)
	dataDir := t.TempDir()
	d, snd, _ := startTestDaemonIn(t, dataDir)
	sendScenario(t, snd, "4_tool_trouble")
	const key = "RM_ToolTrouble04/AJ_ToolTrouble04"
	testenv.WaitFor(t, 30*time.Second, "the scorecard", func() bool { return len(resultKeys(t, d.NATSURL())) == 1 })
	base := "http://" + d.OpsAddr()
	testenv.WaitFor(t, 30*time.Second, "the session page", func() bool {
		navigate(t, ctx, base+"/ui/session?key="+key)
		return count(t, ctx, "#case-export-link") == 1
	})
	if dl := eval[bool](t, ctx, `document.querySelector("#case-export-link").hasAttribute("download")`); !dl {
		t.Error("the export link is not a download")
	}
	b64, err := chromedp.Run(ctx, chromedp.Evaluate[string](`(async () => {
		const r = await fetch(document.querySelector("#case-export-link").href);
		if (!r.ok) throw new Error("status " + r.status);
		const b = new Uint8Array(await r.arrayBuffer());
		let s = "";
		for (let i = 0; i < b.length; i += 8192) s += String.fromCharCode.apply(null, b.subarray(i, i + 8192));
		return btoa(s);
	})()`, chromedp.EvalAwaitPromise))
	if err != nil {
		t.Fatal(err)
	}
	fromPage, err := base64.StdEncoding.DecodeString(b64)
	if err != nil {
		t.Fatal(err)
	}
	code, fromCLI, errOut := runLkscore(t, "case", "export", "--session", key, "--archive", "-", "--nats-url", d.NATSURL(), "--data-dir", dataDir)
	if code != 0 {
		t.Fatalf("export --archive: exit %d: %s", code, errOut)
	}
	if len(fromPage) < 1024 || !bytes.Equal(fromPage, []byte(fromCLI)) {
		t.Fatalf("the button served %d bytes, the CLI wrote %d: not the same", len(fromPage), len(fromCLI))
	}
	t.Logf("the export button and the CLI: the same %d bytes", len(fromPage))
}
