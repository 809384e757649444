package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/lkscore/lkscore/config"
	"github.com/lkscore/lkscore/consumer"
	"github.com/lkscore/lkscore/internal/population"
	"github.com/lkscore/lkscore/internal/testenv"
	"github.com/lkscore/lkscore/scoring"
)

// TestDashboardScoringVersions (issue 68): the start-up log names each
// policy's scoring version; a window whose cards were scored under two
// scoring versions says so on the overview and the sessions page (which,
// and how many each), its lowest scores are of one version, and the
// scoring filter, chosen in headless Chromium, shows one version's cards
// and no notice.
func TestDashboardScoringVersions(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: headless Chromium")
	}
	ctx := browser(t)
	cfg := config.Default()
	cfg.Listen, cfg.OpsListen, cfg.DataDir, cfg.NATS.EmbeddedPort = "127.0.0.1:0", "127.0.0.1:0", t.TempDir(), -1
	cfg.LiveKit.Keys = map[string]string{"APItail": "tail-secret-0123456789"}
	booking := scoring.AgentPolicy{Config: cfg.Scoring}
	booking.Verdict.Pass = 85
	cfg.Scoring.Agents = map[string]scoring.AgentPolicy{"booking": booking}
	var logs testenv.SyncBuffer
	reg := prometheus.NewRegistry()
	d, err := consumer.New(cfg, slog.New(slog.NewTextHandler(&logs, nil)), reg, reg)
	if err != nil {
		t.Fatal(err)
	}
	if err := d.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		sctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = d.Shutdown(sctx)
	})
	now, err := cfg.Scorer()
	if err != nil {
		t.Fatal(err)
	}
	ready := ""
	for _, l := range strings.Split(logs.String(), "\n") {
		if strings.Contains(l, "lkscore ready") {
			ready = l
		}
	}
	for _, want := range []string{"default=" + now.VersionFor("support"), "booking (policy booking)=" + now.VersionFor("booking")} {
		if !strings.Contains(ready, want) {
			t.Errorf("the ready line does not name %q: %s", want, ready)
		}
	}

	// Booking's cards under its old policy (pass at 70), then under today's.
	old := cfg.Scoring
	oldBooking := booking
	oldBooking.Verdict.Pass = 70
	old.Agents = map[string]scoring.AgentPolicy{"booking": oldBooking}
	before, err := scoring.NewScorer(old)
	if err != nil {
		t.Fatal(err)
	}
	vOld, vNew := before.VersionFor("booking"), now.VersionFor("booking")
	if vOld == vNew {
		t.Fatalf("booking's policy changed and its scoring version did not: %s", vOld)
	}
	slow := population.Baseline("booking", "1")
	slow.E2EMedianMs = 2400 // the lowest scores, under the old version
	publishCards(t, d.NATSURL(), population.Generate(before, slow, 1, 7), time.Minute)
	publishCards(t, d.NATSURL(), population.Generate(now, population.Baseline("booking", "1"), 2, 5), time.Minute)
	base := "http://" + d.OpsAddr()
	testenv.WaitFor(t, 30*time.Second, "12 sessions on the dashboard", func() bool {
		resp, err := http.Get(base + "/ui/sessions")
		if err != nil {
			return false
		}
		b, _ := io.ReadAll(resp.Body)
		_ = resp.Body.Close()
		return strings.Contains(string(b), `id="matching">12 sessions`)
	})

	for _, path := range []string{"/ui", "/ui/sessions"} {
		navigate(t, ctx, base+path)
		notice := text(t, ctx, "#mixed-versions")
		for _, want := range []string{vOld + " (7 sessions)", vNew + " (5 sessions)", "those of " + vNew} {
			if !strings.Contains(notice, want) {
				t.Errorf("%s: the mixed-versions notice does not say %q: %q", path, want, notice)
			}
		}
		if got := eval[[]string](t, ctx, `[...document.querySelectorAll("#worst td.scoring")].map(td => td.textContent)`); len(got) == 0 {
			t.Errorf("%s: no lowest scores", path)
		} else {
			for _, v := range got {
				if v != vNew {
					t.Errorf("%s: a lowest score of %s beside those of %s: scores compare within one version", path, v, vNew)
				}
			}
		}
	}

	// The scoring filter, as a user picks it.
	navigate(t, ctx, base+"/ui/sessions")
	js := fmt.Sprintf(`(() => { const s = document.querySelector("#scoring-filter"); s.value = %q; s.form.submit(); return true })()`, vOld)
	eval[bool](t, ctx, js)
	testenv.WaitFor(t, 10*time.Second, "the filtered page", func() bool {
		return strings.Contains(eval[string](t, ctx, `location.search`), "scoring_version=")
	})
	if m := text(t, ctx, "#matching"); !strings.HasPrefix(m, "7 sessions") {
		t.Errorf("filtered by %s: %q", vOld, m)
	}
	if n := count(t, ctx, "#mixed-versions"); n != 0 {
		t.Errorf("one scoring version shown, and the mixed-versions notice is still there")
	}
	for _, v := range eval[[]string](t, ctx, `[...document.querySelectorAll("#worst td.scoring")].map(td => td.textContent)`) {
		if v != vOld {
			t.Errorf("filtered by %s, a card of %s is shown", vOld, v)
		}
	}
}
