package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/livekit/protocol/livekit"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"google.golang.org/protobuf/proto"

	"github.com/lkscore/lkscore/config"
	"github.com/lkscore/lkscore/internal/population"
	"github.com/lkscore/lkscore/internal/sdkclient"
	"github.com/lkscore/lkscore/internal/testenv"
	"github.com/lkscore/lkscore/regress"
	"github.com/lkscore/lkscore/scoring"
	"github.com/lkscore/lkscore/session"
	"github.com/lkscore/lkscore/wire"
)

// browser starts headless Chromium (Debian's chromium package) through
// chromedp. .ci/run installs it and sets LKSCORE_REQUIRE_BROWSER=1, so that
// its absence fails instead of skipping.
func browser(t *testing.T) context.Context {
	t.Helper()
	path := ""
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome"} {
		if p, err := exec.LookPath(name); err == nil {
			path = p
			break
		}
	}
	if path == "" {
		if os.Getenv("LKSCORE_REQUIRE_BROWSER") != "" {
			t.Fatal("chromium is required (apt-get install chromium)")
		}
		t.Skip("SKIPPING the dashboard browser test: install chromium (apt-get install chromium)")
	}
	opts := append(chromedp.DefaultExecAllocatorOptions[:], chromedp.ExecPath(path), chromedp.NoSandbox,
		chromedp.WindowSize(1440, 1400), chromedp.Flag("disable-dev-shm-usage", true))
	actx, cancel := chromedp.NewExecAllocator(context.Background(), opts...)
	t.Cleanup(cancel)
	ctx, cancel2 := chromedp.NewContext(actx)
	t.Cleanup(cancel2)
	ctx, cancel3 := context.WithTimeout(ctx, 90*time.Second)
	t.Cleanup(cancel3)
	return ctx
}

func screenshot(t *testing.T, ctx context.Context, name string) {
	t.Helper()
	png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
	if err != nil {
		t.Fatal(err)
	}
	for _, dir := range []string{t.TempDir(), os.Getenv("LKSCORE_SCREENSHOT_DIR")} {
		if dir == "" {
			continue
		}
		if err := os.WriteFile(filepath.Join(dir, name), png, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// eval runs a JavaScript expression in the page.
func eval[T any](t *testing.T, ctx context.Context, expr string) T {
	t.Helper()
	v, err := chromedp.Run(ctx, chromedp.Evaluate[T](expr))
	if err != nil {
		t.Fatalf("%s: %v", expr, err)
	}
	return v
}

func count(t *testing.T, ctx context.Context, sel string) int {
	t.Helper()
	return eval[int](t, ctx, fmt.Sprintf("document.querySelectorAll(%q).length", sel))
}

func text(t *testing.T, ctx context.Context, sel string) string {
	t.Helper()
	return eval[string](t, ctx, fmt.Sprintf("(document.querySelector(%q) || {textContent: ''}).textContent.trim()", sel))
}

func navigate(t *testing.T, ctx context.Context, url string) {
	t.Helper()
	if err := chromedp.Do(ctx, chromedp.Navigate(url)); err != nil {
		t.Fatalf("navigate %s: %v", url, err)
	}
}

// publishCards puts scorecards on the results stream as the scoring pool
// does, spread over spread so the trend charts get more than one bucket.
func publishCards(t *testing.T, natsURL string, cards []session.Scorecard, spread time.Duration) {
	t.Helper()
	testenv.PublishCards(t, testenv.JetStream(t, natsURL), cards, spread)
}

// fitsWidth reports whether the page fits the window without scrolling
// sideways, at the given width.
func fitsWidth(t *testing.T, ctx context.Context, url string, width int64) {
	t.Helper()
	if err := chromedp.Do(ctx, chromedp.EmulateViewport(width, 1000)); err != nil {
		t.Fatal(err)
	}
	navigate(t, ctx, url)
	if sw := eval[int64](t, ctx, "document.documentElement.scrollWidth"); sw > width {
		t.Errorf("%s at %d px: the page is %d px wide", url, width, sw)
	}
	wide := eval[[]string](t, ctx, `Array.from(document.querySelectorAll(".card")).filter(c => c.scrollWidth > c.clientWidth + 1).map(c => (c.querySelector("h3,h2")||{textContent:"?"}).textContent)`)
	if len(wide) > 0 {
		t.Errorf("%s at %d px: cards overflow: %v", url, width, wide)
	}
}

// TestDashboardInBrowser: after the six scenarios and two agents'
// regression histories, the dashboard shown in a real browser has the
// sessions, lists the worst by score, filters and searches them, exports
// them, shows trends per agent and version over several buckets, the
// alerts firing and resolved, and a session's transcript, findings linked
// to their turns and an audio player that loads recording.ogg; every page
// fits 1280 and 1920 px.
func TestDashboardInBrowser(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: headless Chromium")
	}
	ctx := browser(t)
	d, snd, _ := startTestDaemonIn(t, t.TempDir(), func(c *config.Config) { c.Regression.MinFiring = 0 })
	ogg, err := os.ReadFile("../../audio/testdata/short.ogg")
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"1_clean_call", "2_slow_agent", "3_barge_in", "4_tool_trouble", "5_bad_hearing", "6_error_close"} {
		if name == "3_barge_in" {
			sendScenarioAs(t, snd, name, "tail-agent", ogg)
			continue
		}
		if name == "6_error_close" {
			// The SDK's own record of the error that closed the session,
			// as agents-js 1.9.0 logs it, before the upload.
			if err := snd.ErrorLog(context.Background(), "RM_ErrorClose06", "AJ_ErrorClose06", "APIConnectionError", "Connection error."); err != nil {
				t.Fatal(err)
			}
		}
		sendScenario(t, snd, name)
	}
	base := "http://" + d.OpsAddr()
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("the alerts stream has %v", alertSummary(t, d.NATSURL()))
		}
	})
	waitUntil := func(path, what string, ok func(page string) bool) {
		t.Helper()
		testenv.WaitFor(t, 30*time.Second, path+" to show "+what, func() bool {
			resp, err := http.Get(base + path)
			if err != nil {
				return false
			}
			b, _ := io.ReadAll(resp.Body)
			_ = resp.Body.Close()
			return ok(string(b))
		})
	}
	waitPage := func(path, want string) {
		t.Helper()
		waitUntil(path, want, func(page string) bool { return strings.Contains(page, want) })
	}
	waitPage("/ui/sessions", `id="matching">6 sessions`)

	// Overview.
	navigate(t, ctx, base+"/ui")
	if n, dl, bars := text(t, ctx, "#sessions"), text(t, ctx, "#dead-letters"), count(t, ctx, "#verdict-mix rect"); n != "6" || dl != "0" || bars != 4 {
		t.Errorf("overview: %q sessions, %q dead letters, %d verdict bars", n, dl, bars)
	}
	if u, p := text(t, ctx, "#unscored"), text(t, ctx, "#pipeline"); u != "0" || !strings.Contains(p, "not scored by configuration") || !strings.Contains(p, "none") {
		t.Errorf("overview: %q unscored, pipeline %q", u, p)
	}
	if lines := count(t, ctx, "#score-trend polyline"); lines != 4 {
		t.Errorf("overview: %d score lines, want 4", lines)
	}
	if codes := count(t, ctx, "#codes tr.code"); codes < 3 {
		t.Errorf("overview: %d finding codes", codes)
	}

	// Worst sessions, ordered by score.
	navigate(t, ctx, base+"/ui/sessions")
	scores := eval[[]string](t, ctx, `Array.from(document.querySelectorAll("#worst td.score")).map(e => e.textContent)`)
	var nums []float64
	for _, s := range scores {
		f, err := strconv.ParseFloat(s, 64)
		if err != nil {
			t.Fatalf("score %q", s)
		}
		nums = append(nums, f)
	}
	if len(nums) != 6 || !sort.Float64sAreSorted(nums) {
		t.Errorf("worst sessions not ordered by score: %v", nums)
	}

	// Filters, through the form.
	if err := chromedp.Do(ctx, chromedp.SetValue(`select[name="verdict"]`, "warn"), chromedp.Click(`form.filters button`),
		chromedp.WaitVisible(`#matching`)); err != nil {
		t.Fatal(err)
	}
	time.Sleep(200 * time.Millisecond) // the submitted page loads
	if rows := count(t, ctx, "#worst tr.row"); rows != 4 {
		t.Errorf("verdict=warn: %d rows, want 4", rows)
	}
	navigate(t, ctx, base+"/ui/sessions?close_reason=CR_ERROR")
	if rows, first := count(t, ctx, "#worst tr.row"), text(t, ctx, "#worst tr.row td a"); rows != 1 || first != "RM_ErrorClose06/AJ_ErrorClose06" {
		t.Errorf("close_reason=CR_ERROR: %d rows, first %q", rows, first)
	}

	// Search from the header: a job id, typed and submitted.
	navigate(t, ctx, base+"/ui")
	if err := chromedp.Do(ctx, chromedp.SendKeys(`#search`, "aj_tooltrouble04\n")); err != nil {
		t.Fatal(err)
	}
	time.Sleep(300 * time.Millisecond)
	if rows, first := count(t, ctx, "#worst tr.row"), text(t, ctx, "#worst tr.row td a"); rows != 1 || first != "RM_ToolTrouble04/AJ_ToolTrouble04" {
		t.Errorf("search for a job id: %d rows, first %q", rows, first)
	}

	// Export of the filtered list, fetched by the page.
	navigate(t, ctx, base+"/ui/sessions?verdict=warn")
	csvText, err := chromedp.Run(ctx, chromedp.Evaluate[string](`fetch(document.querySelector("#export-csv").href).then(r => r.text())`, chromedp.EvalAwaitPromise))
	if err != nil {
		t.Fatal(err)
	}
	if lines := strings.Split(strings.TrimSpace(csvText), "\n"); len(lines) != 5 || !strings.HasPrefix(lines[0], "scored_at,session_key,room_id") {
		t.Errorf("CSV export of verdict=warn: %d lines: %q", len(lines), csvText)
	}
	jsonText, err := chromedp.Run(ctx, chromedp.Evaluate[string](`fetch(document.querySelector("#export-json").href).then(r => r.text())`, chromedp.EvalAwaitPromise))
	if err != nil {
		t.Fatal(err)
	}
	var exported []struct {
		Key     string `json:"session_key"`
		Verdict string `json:"verdict"`
	}
	if err := json.Unmarshal([]byte(jsonText), &exported); err != nil || len(exported) != 4 || exported[0].Verdict != "warn" {
		t.Errorf("JSON export of verdict=warn: %v %+v", err, exported)
	}

	// An error call's page shows the error text the SDK logged.
	navigate(t, ctx, base+"/ui/session?key=RM_ErrorClose06/AJ_ErrorClose06")
	if e := text(t, ctx, "#error-text"); !strings.Contains(e, "APIConnectionError: Connection error.") {
		t.Errorf("error call's page: error text %q", e)
	}

	// A session page: findings linked to their turns, the transcript, the timeline, the audio.
	navigate(t, ctx, base+"/ui/session?key=RM_ToolTrouble04/AJ_ToolTrouble04")
	findings, spans, errSpans := count(t, ctx, "#findings tr.finding"), count(t, ctx, "#timeline rect"), count(t, ctx, "#timeline rect.error")
	if closeReason := text(t, ctx, "#close-reason"); findings < 3 || spans < 10 || errSpans != 1 || !strings.Contains(closeReason, "CR_COMPLETED") {
		t.Errorf("session page: %d findings, %d timeline spans, %d tool errors, %q", findings, spans, errSpans, closeReason)
	}
	if items := count(t, ctx, "#transcript tr.item"); items < 6 {
		t.Errorf("session page: %d transcript rows", items)
	}
	if noAudio := text(t, ctx, "#no-audio"); !strings.Contains(noAudio, "no recording.ogg") || count(t, ctx, "audio") != 0 {
		t.Errorf("a session without audio: %q, %d players", noAudio, count(t, ctx, "audio"))
	}
	target := eval[string](t, ctx, `(() => { const a = document.querySelector("a.turn-link"); a.click(); const el = document.querySelector(location.hash); return location.hash + " " + (el ? el.tagName : "missing") })()`)
	if !strings.HasPrefix(target, "#tl-") && !strings.HasPrefix(target, "#turn-") || strings.HasSuffix(target, "missing") {
		t.Errorf("a finding's turn link goes to %q", target)
	}
	href := eval[string](t, ctx, `document.querySelector("#recording a").href`)
	if resp, err := http.Get(href); err != nil || resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "application/json" {
		t.Errorf("recording link %s: %v %v", href, resp, err)
	} else {
		_ = resp.Body.Close()
	}

	navigate(t, ctx, base+"/ui/session?key=RM_BargeIn03/AJ_BargeIn03")
	if _, err := chromedp.Run(ctx, chromedp.Poll[bool](`document.querySelector("#player") && document.querySelector("#player").readyState >= 1`,
		chromedp.WithPollingTimeout(10*time.Second))); err != nil {
		t.Fatalf("the audio player never loaded recording.ogg: %v (error %s)", err,
			eval[string](t, ctx, `String(document.querySelector("#player") && document.querySelector("#player").error && document.querySelector("#player").error.message)`))
	}
	statuses := eval[[]int](t, ctx, `performance.getEntriesByType("resource").filter(e => e.name.includes("recording.ogg")).map(e => e.responseStatus)`)
	if len(statuses) == 0 || !slices.ContainsFunc(statuses, func(s int) bool { return s == 200 || s == 206 }) {
		t.Errorf("recording.ogg requests answered %v", statuses)
	}
	if d := eval[float64](t, ctx, `document.querySelector("#player").duration`); d < 1 {
		t.Errorf("the player reads a %.1f s recording", d)
	}
	screenshot(t, ctx, "dashboard-session.png")
	req, _ := http.NewRequest(http.MethodGet, eval[string](t, ctx, `document.querySelector("#player").src`), nil)
	req.Header.Set("Range", "bytes=100-199")
	if resp, err := http.DefaultClient.Do(req); err != nil || resp.StatusCode != http.StatusPartialContent || resp.ContentLength != 100 {
		t.Errorf("a range request for recording.ogg: %v %v", resp, err)
	} else {
		_ = resp.Body.Close()
	}

	// Findings grouped by code: each row's count is the scorecard's own
	// count of that code (read from the JSON the page embeds).
	navigate(t, ctx, base+"/ui/session?key=RM_ToolTrouble04/AJ_ToolTrouble04")
	grouped := eval[map[string]int](t, ctx, `Object.fromEntries(Array.from(document.querySelectorAll("#findings tr.finding")).map(r => [r.dataset.code, +r.querySelector(".count").textContent]))`)
	var card session.Scorecard
	if err := json.Unmarshal([]byte(eval[string](t, ctx, `document.querySelector("details pre").textContent`)), &card); err != nil {
		t.Fatal(err)
	}
	want := map[string]int{}
	for _, c := range card.Components {
		for _, f := range c.Findings {
			want[f.Code]++
		}
	}
	if fmt.Sprint(grouped) != fmt.Sprint(want) || len(want) == 0 {
		t.Errorf("grouped findings %v, the scorecard has %v", grouped, want)
	}

	// A session that could not be scored (its chat history is cut short):
	// found by its key among the dead letters, with its reason and the
	// replay command, from the header's search.
	brokenHeader, err := proto.Marshal(&livekit.MetricsRecordingHeader{RoomId: "RM_Broken07", JobId: "AJ_Broken07"})
	if err != nil {
		t.Fatal(err)
	}
	bctx := context.Background()
	if err := snd.Upload(bctx, brokenHeader, []byte(`{"items": [{"id": "x", "type": "message", "role": "user", "content": ["hi"]}`)); err != nil {
		t.Fatal(err)
	}
	if err := snd.Webhook(bctx, &livekit.WebhookEvent{Event: "agent_job_ended", Id: "EV_broken", Job: &livekit.Job{Id: "AJ_Broken07", AgentName: "tail-agent",
		Room: &livekit.Room{Sid: "RM_Broken07"}, State: &livekit.JobState{Status: livekit.JobStatus_JS_SUCCESS}}}); err != nil {
		t.Fatal(err)
	}
	waitPage("/ui/deadletters?q=RM_Broken07", `class="dead-letter-row"`)
	navigate(t, ctx, base+"/ui")
	if err := chromedp.Do(ctx, chromedp.SendKeys(`#search`, "RM_Broken07/AJ_Broken07\n"), chromedp.WaitVisible(`#search-dead-letters`)); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(text(t, ctx, "#search-dead-letters"), "not scored") {
		t.Errorf("searching a dead-lettered session's key: %q", text(t, ctx, "#search-dead-letters"))
	}
	if err := chromedp.Do(ctx, chromedp.Click(`#search-dead-letters a`), chromedp.WaitVisible(`#dead-letter-table`)); err != nil {
		t.Fatal(err)
	}
	if rows, key, reason, replay := count(t, ctx, "tr.dead-letter-row"), text(t, ctx, "tr.dead-letter-row .dl-key"), text(t, ctx, "tr.dead-letter-row .dl-reason"),
		text(t, ctx, "tr.dead-letter-row .dl-replay"); rows != 1 || !strings.HasPrefix(key, "RM_Broken07/AJ_Broken07") ||
		!strings.Contains(reason, "chat_history") || !strings.HasPrefix(replay, "lkscore dlq replay --seq ") {
		t.Errorf("dead letter found by key: %d rows, key %q, reason %q, replay %q", rows, key, reason, replay)
	}
	screenshot(t, ctx, "dashboard-deadletters.png")

	// The ingestion view: the webhooks, uploads and logs the scenarios sent,
	// under their key; a webhook signed with the wrong secret, refused by
	// reason; a job whose recording never came, waiting.
	if err := sdkclient.New("http://"+d.IngestAddr(), "APItail", "not-the-secret-0123456789").Webhook(bctx, &livekit.WebhookEvent{Event: "room_started", Id: "EV_wrong"}); err == nil {
		t.Fatal("a webhook with the wrong secret was accepted")
	}
	if err := snd.Webhook(bctx, &livekit.WebhookEvent{Event: "agent_job_ended", Id: "EV_norec", Job: &livekit.Job{Id: "AJ_NoRecording08", AgentName: "tail-agent",
		Room: &livekit.Room{Sid: "RM_NoRecording08"}, State: &livekit.JobState{Status: livekit.JobStatus_JS_SUCCESS}}}); err != nil {
		t.Fatal(err)
	}
	waitPage("/ui/ingestion", "RM_NoRecording08")
	navigate(t, ctx, base+"/ui")
	if err := chromedp.Do(ctx, chromedp.Click(`#nav-ingestion`), chromedp.WaitVisible(`#ingest-accepted`)); err != nil {
		t.Fatal(err)
	}
	acceptedCount := func(endpoint string) int {
		return eval[int](t, ctx, fmt.Sprintf(`+((document.querySelector('tr.accepted-row[data-endpoint=%q][data-key="APItail"] td.num') || {textContent: "-1"}).textContent)`, endpoint))
	}
	if wh, up, logs := acceptedCount("webhook"), acceptedCount("upload"), acceptedCount("otlp_logs"); wh < 7 || up != 7 || logs < 6 {
		t.Errorf("ingestion view: %d webhooks, %d uploads, %d log requests accepted from APItail", wh, up, logs)
	}
	if refused := text(t, ctx, `tr.refused-row[data-reason="bad_signature"]`); !strings.Contains(refused, "webhook") || !strings.Contains(refused, "APItail") {
		t.Errorf("ingestion view: the wrong secret's refusal %q", refused)
	}
	if waiting := text(t, ctx, "#ingest-waiting"); !strings.Contains(waiting, "RM_NoRecording08") {
		t.Errorf("ingestion view: waiting %q", waiting)
	}
	screenshot(t, ctx, "dashboard-ingestion.png")

	// Two agents' histories: booking 3 drifts and stays; support 5 drifts and recovers.
	scorer, err := scoring.NewScorer(scoring.DefaultConfig())
	if err != nil {
		t.Fatal(err)
	}
	cfg := regress.DefaultConfig()
	for i, agent := range []string{"booking", "support"} {
		healthy := population.Clean(agent, fmt.Sprint(3+2*i))
		slow := healthy
		slow.E2EMedianMs = 2600
		publishCards(t, d.NATSURL(), population.Generate(scorer, healthy, uint64(51+10*i), cfg.DriftWindow*cfg.DriftCalibration), 2*time.Second)
		publishCards(t, d.NATSURL(), population.Generate(scorer, slow, uint64(52+10*i), 3*cfg.DriftWindow), time.Second)
	}
	waitPage("/ui/alerts", "booking")
	publishCards(t, d.NATSURL(), population.Generate(scorer, population.Clean("support", "5"), 63, cfg.Keep+cfg.DriftWindow), 0)
	waitUntil("/ui/alerts", "support's alerts all resolved", func(page string) bool {
		firing, resolved, _ := strings.Cut(page, `id="alerts-resolved-table"`)
		return !strings.Contains(firing, `agent=support">support</a>`) && strings.Contains(resolved, "resolved-row")
	})

	navigate(t, ctx, base+"/ui/alerts")
	if firing, resolved := count(t, ctx, "tr.firing-row"), count(t, ctx, "tr.resolved-row"); firing == 0 || resolved == 0 {
		t.Errorf("alerts page: %d firing, %d resolved", firing, resolved)
	}
	if badge, want := text(t, ctx, "#nav-alerts .badge"), strconv.Itoa(count(t, ctx, "tr.firing-row")); badge != want {
		t.Errorf("the header's alert badge says %q, the page lists %s firing", badge, want)
	}
	if got := text(t, ctx, "#alerts-firing-table"); !strings.Contains(got, "booking") || strings.Contains(got, "support") {
		t.Errorf("firing now should be booking's alone: %q", got)
	}
	screenshot(t, ctx, "dashboard-alerts.png")

	// Trends per agent and version, over more than one bucket.
	navigate(t, ctx, base+"/ui?agent=booking&version=3")
	if n := eval[int](t, ctx, `+document.querySelector("#score-trend svg").dataset.buckets`); n < 2 {
		t.Errorf("booking 3's score trend has %d buckets", n)
	}
	if n := eval[int](t, ctx, `+document.querySelector("#latency-trend svg").dataset.buckets`); n < 2 {
		t.Errorf("booking 3's latency trend has %d buckets", n)
	}
	if firing := text(t, ctx, "#alerts-firing"); firing == "0" || firing == "" {
		t.Errorf("overview of booking: %q alerts firing", firing)
	}
	if bars := count(t, ctx, "#e2e-histogram rect"); bars < 5 {
		t.Errorf("latency histogram: %d bars", bars)
	}
	if rows := count(t, ctx, "#versions tr.version"); rows != 1 {
		t.Errorf("booking 3: %d version rows", rows)
	}
	navigate(t, ctx, base+"/ui")
	if rows := count(t, ctx, "#versions tr.version"); rows < 3 {
		t.Errorf("all agents: %d version rows", rows)
	}
	screenshot(t, ctx, "dashboard-overview.png")

	for _, width := range []int64{1280, 1920} {
		for _, page := range []string{"/ui", "/ui/sessions", "/ui/alerts", "/ui/ingestion", "/ui/deadletters", "/ui/session?key=RM_BargeIn03/AJ_BargeIn03", "/ui/session?key=RM_ToolTrouble04/AJ_ToolTrouble04"} {
			fitsWidth(t, ctx, base+page, width)
		}
	}

	// Off loopback without a token: refused (checked in process: the test
	// client is on loopback).
	if resp, err := http.Get(base + "/ui/session?key=nope"); err != nil || resp.StatusCode != 404 {
		t.Errorf("unknown session: %v %v", resp, err)
	}
}

// alertSummary lists the alerts stream, for failure messages.
func alertSummary(t *testing.T, natsURL string) []string {
	nc, err := nats.Connect(natsURL)
	if err != nil {
		return []string{err.Error()}
	}
	defer nc.Close()
	js, _ := jetstream.New(nc)
	s, err := js.Stream(context.Background(), wire.Default().AlertStream())
	if err != nil {
		return []string{err.Error()}
	}
	var out []string
	for seq := uint64(1); ; seq++ {
		m, err := s.GetMsg(context.Background(), seq)
		if err != nil {
			return out
		}
		var a wire.Alert
		_ = json.Unmarshal(m.Data, &a)
		out = append(out, a.Agent+"/"+a.Metric+"/"+a.Status)
	}
}
