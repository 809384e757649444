package consumer

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/lkscore/lkscore/config"
	"github.com/lkscore/lkscore/internal/population"
	"github.com/lkscore/lkscore/internal/testenv"
	"github.com/lkscore/lkscore/regress"
	"github.com/lkscore/lkscore/scoring"
	"github.com/lkscore/lkscore/session"
	"github.com/lkscore/lkscore/wire"
)

// publishCards puts scorecards on the results stream as the scoring pool does.
func publishCards(t *testing.T, js jetstream.JetStream, cards []session.Scorecard) {
	t.Helper()
	testenv.PublishCards(t, js, cards, 0)
}

func alertMsgs(t *testing.T, url string) []wire.Alert {
	t.Helper()
	var out []wire.Alert
	for _, m := range streamMsgs(t, url, "LKSCORE_ALERTS") {
		var a wire.Alert
		if err := json.Unmarshal(m.Data, &a); err != nil {
			t.Fatal(err)
		}
		out = append(out, a)
	}
	return out
}

// startWorker starts a worker replica; opts change its configuration. The
// hold time is 0 unless an option sets it.
func startWorker(t *testing.T, url string, opts ...func(*config.Config)) (*Daemon, *prometheus.Registry, func()) {
	t.Helper()
	cfg := testConfig(t, url)
	cfg.Role = config.RoleWorker
	cfg.Regression.MinFiring = 0
	for _, o := range opts {
		o(&cfg)
	}
	reg := prometheus.NewRegistry()
	d, err := New(cfg, slog.New(slog.NewTextHandler(io.Discard, nil)), reg, reg)
	if err != nil {
		t.Fatal(err)
	}
	if err := d.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	stopped := false
	stop := func() {
		if stopped {
			return
		}
		stopped = true
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := d.Shutdown(ctx); err != nil {
			t.Errorf("Shutdown: %v", err)
		}
	}
	t.Cleanup(stop)
	return d, reg, stop
}

// TestRegressionAlertsReplicasRestart: two worker replicas share the
// detector. A slow version 2 raises one firing alert per regressed metric
// (not one per session, not one per replica). After one replica is shut
// down and a new one started, the version recovering resolves each alert
// exactly once, and nothing fires twice.
func TestRegressionAlertsReplicasRestart(t *testing.T) {
	t.Parallel()
	ns := startNATS(t)
	_, _, stopA := startWorker(t, ns.URL())
	startWorker(t, ns.URL())
	js := testenv.JetStream(t, ns.URL())
	scorer, err := scoring.NewScorer(scoring.DefaultConfig())
	if err != nil {
		t.Fatal(err)
	}
	slow := population.Baseline("booking", "2")
	slow.E2EMedianMs = 2600
	publishCards(t, js, population.Generate(scorer, population.Baseline("booking", "1"), 1, 40))
	publishCards(t, js, population.Generate(scorer, slow, 2, 40))

	var firing []wire.Alert
	testenv.WaitFor(t, settleWait, "the regression alerts", func() bool {
		firing = alertMsgs(t, ns.URL())
		return len(firing) > 0 && hasAlert(firing, regress.KindRegression, regress.MetricE2EP50, wire.AlertFiring)
	})
	time.Sleep(time.Second) // any duplicate would arrive now
	firing = alertMsgs(t, ns.URL())
	seen := map[string]bool{}
	for _, a := range firing {
		if a.Status != wire.AlertFiring || seen[a.Kind+a.Metric] {
			t.Fatalf("alert %s %s %s twice, or not firing: %+v", a.Kind, a.Metric, a.Status, firing)
		}
		seen[a.Kind+a.Metric] = true
		if a.Agent != "booking" || a.Version != "2" || a.BaselineOf != "version 1" || a.NCurrent < 30 || a.NBaseline < 30 ||
			len(a.WorstSessions) == 0 || a.QValue > 0.05 || a.ScoringVersion != scorer.Version() {
			t.Fatalf("alert evidence %+v", a)
		}
	}

	// One replica goes away, a new one comes; version 2 recovers.
	stopA()
	startWorker(t, ns.URL())
	healthy := population.Baseline("booking", "2")
	publishCards(t, js, population.Generate(scorer, healthy, 3, regress.DefaultConfig().Keep))
	testenv.WaitFor(t, settleWait, "the alerts to resolve", func() bool {
		all := alertMsgs(t, ns.URL())
		resolved := 0
		for _, a := range all {
			if a.Status == wire.AlertResolved {
				resolved++
			}
		}
		if resolved >= len(firing) {
			return true
		}
		return false
	})
	time.Sleep(time.Second)
	all := alertMsgs(t, ns.URL())
	count := map[string]int{}
	for _, a := range all {
		count[a.Kind+"/"+a.Metric+"/"+a.Status]++
	}
	for k, n := range count {
		if n != 1 {
			t.Fatalf("%s published %d times: %v", k, n, count)
		}
	}
	if len(all) != 2*len(firing) {
		t.Fatalf("%d alerts for %d that fired: %v", len(all), len(firing), count)
	}
	checkStreamSchema(t, ns.URL(), "LKSCORE_ALERTS", "../docs/alert.schema.json")
	t.Logf("alerts: %v", count)
}

func hasAlert(all []wire.Alert, kind, metric, status string) bool {
	for _, a := range all {
		if a.Kind == kind && a.Metric == metric && a.Status == status {
			return true
		}
	}
	return false
}

func summary(all []wire.Alert) []string {
	var out []string
	for _, a := range all {
		out = append(out, fmt.Sprintf("%s/%s/%s base=%v cur=%v q=%v", a.Kind, a.Metric, a.Status, a.Baseline, a.Current, a.QValue))
	}
	return out
}
