package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
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
		chromedp.WindowSize(1200, 1400), chromedp.Flag("disable-dev-shm-usage", true))
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

// TestDashboardInBrowser: after the six scenarios run, the dashboard shown
// in a real browser has six sessions, lists the worst ones by score,
// filters them, and shows a session's findings and timeline.
func TestDashboardInBrowser(t *testing.T) {
	ctx := browser(t)
	d, snd := startTestDaemon(t)
	for _, name := range []string{"1_clean_call", "2_slow_agent", "3_barge_in", "4_tool_trouble", "5_bad_hearing", "6_error_close"} {
		sendScenario(t, snd, name)
	}
	base := "http://" + d.OpsAddr()
	deadline := time.Now().Add(30 * time.Second)
	for {
		resp, err := http.Get(base + "/ui/sessions")
		if err == nil {
			b, _ := io.ReadAll(resp.Body)
			_ = resp.Body.Close()
			if strings.Contains(string(b), `id="matching">6 sessions`) {
				break
			}
		}
		if time.Now().After(deadline) {
			t.Fatal("the dashboard never showed six sessions")
		}
		time.Sleep(100 * time.Millisecond)
	}

	// Overview.
	navigate(t, ctx, base+"/ui")
	if n, dl, bars := text(t, ctx, "#sessions"), text(t, ctx, "#dead-letters"), count(t, ctx, "#verdict-mix rect"); n != "6" || dl != "0" || bars != 3 {
		t.Errorf("overview: %q sessions, %q dead letters, %d verdict bars", n, dl, bars)
	}
	if lines := count(t, ctx, "#components polyline"); lines != 4 {
		t.Errorf("overview: %d component lines, want 4", lines)
	}
	screenshot(t, ctx, "dashboard-overview.png")

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

	// A session page: findings and the timeline.
	navigate(t, ctx, base+"/ui/session?key=RM_ToolTrouble04/AJ_ToolTrouble04")
	findings, spans, errSpans := count(t, ctx, "#findings tr.finding"), count(t, ctx, "#timeline rect"), count(t, ctx, "#timeline rect.error")
	if closeReason := text(t, ctx, "#close-reason"); findings < 3 || spans < 10 || errSpans != 1 || !strings.Contains(closeReason, "CR_COMPLETED") {
		t.Errorf("session page: %d findings, %d timeline spans, %d tool errors, %q", findings, spans, errSpans, closeReason)
	}
	screenshot(t, ctx, "dashboard-session.png")
	href := eval[string](t, ctx, `document.querySelector("#recording a").href`)
	if resp, err := http.Get(href); err != nil || resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "application/json" {
		t.Errorf("recording link %s: %v %v", href, resp, err)
	} else {
		_ = resp.Body.Close()
	}

	// Off loopback without a token: refused (checked in process: the test
	// client is on loopback).
	if resp, err := http.Get(base + "/ui/session?key=nope"); err != nil || resp.StatusCode != 404 {
		t.Errorf("unknown session: %v %v", resp, err)
	}
}
