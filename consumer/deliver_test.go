package consumer

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/lkscore/lkscore/config"
	"github.com/lkscore/lkscore/internal/population"
	"github.com/lkscore/lkscore/internal/testenv"
	"github.com/lkscore/lkscore/notify"
	"github.com/lkscore/lkscore/regress"
	"github.com/lkscore/lkscore/rules"
	"github.com/lkscore/lkscore/scoring"
	"github.com/lkscore/lkscore/session"
	"github.com/lkscore/lkscore/wire"
)

// hookReceiver records the POSTs a chat webhook gets.
type hookReceiver struct {
	mu    sync.Mutex
	posts []hookPost
}

type hookPost struct {
	path, key, contentType string
	body                   []byte
}

func (h *hookReceiver) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	b, _ := io.ReadAll(r.Body)
	h.mu.Lock()
	h.posts = append(h.posts, hookPost{path: r.URL.Path, key: r.Header.Get(notify.HeaderIdempotencyKey), contentType: r.Header.Get("Content-Type"), body: b})
	h.mu.Unlock()
}

func (h *hookReceiver) byPath(path string) []hookPost {
	h.mu.Lock()
	defer h.mu.Unlock()
	var out []hookPost
	for _, p := range h.posts {
		if p.path == path {
			out = append(out, p)
		}
	}
	return out
}

// TestDriftAlertReachesAlertmanagerAndWebhooks: two worker replicas deliver
// a version's drift alerts to a real Alertmanager and to two webhooks (the
// Slack-compatible body and the raw JSON): each alert state once per
// target, firing then resolved. Healthy sessions arriving within the hold
// time (regression.min_firing) resolve nothing; after it they do.
func TestDriftAlertReachesAlertmanagerAndWebhooks(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: waits out every alert's hold")
	}
	ns := startNATS(t)
	am := testenv.StartAlertmanager(t)
	hooks := &hookReceiver{}
	srv := httptest.NewServer(hooks)
	t.Cleanup(srv.Close)
	const hold = 10 * time.Second
	opts := func(c *config.Config) {
		c.Regression.MinFiring = hold
		c.Alerts.Alertmanager.URLs = []string{am.URL}
		c.Alerts.Alertmanager.ResendInterval = time.Hour // only the delivery stage posts during the test
		c.Alerts.ExternalURL = "http://lkscore.example:9090"
		c.Alerts.Webhooks = []config.AlertWebhook{
			{Name: "chat", URL: srv.URL + "/slack", Format: notify.FormatSlack},
			{Name: "raw", URL: srv.URL + "/json", Format: notify.FormatJSON},
		}
	}
	startWorker(t, ns.URL(), opts)
	startWorker(t, ns.URL(), opts)
	js := testenv.JetStream(t, ns.URL())
	scorer, err := rules.NewScorer(scoring.DefaultConfig())
	if err != nil {
		t.Fatal(err)
	}
	cfg := regress.DefaultConfig()
	healthy := population.Clean("support", "3")
	fired := driftVersion(t, ns.URL(), healthy, 21)
	for _, a := range fired {
		if a.Status != wire.AlertFiring || a.Kind != regress.KindDrift {
			t.Fatalf("want only drift alerts firing: %v", summary(fired))
		}
	}
	testenv.WaitFor(t, settleWait, "the firing alerts in Alertmanager", func() bool {
		return len(am.Alerts(t)) == len(fired) && len(hooks.byPath("/slack")) == len(fired) && len(hooks.byPath("/json")) == len(fired)
	})
	held := am.Alerts(t)
	for _, a := range fired {
		var got *testenv.AMAlert
		for i := range held {
			if held[i].Labels["metric"] == a.Metric {
				got = &held[i]
			}
		}
		if got == nil {
			t.Fatalf("alert %s not in Alertmanager: %+v", a.ID, held)
		}
		want := map[string]string{"alertname": "LkscoreDrift", "agent": "support", "version": "3", "metric": a.Metric,
			"severity": "warning", "kind": "drift", "scoring_version": scorer.Version()}
		for k, v := range want {
			if got.Labels[k] != v {
				t.Errorf("%s: label %s = %q, want %q", a.Metric, k, got.Labels[k], v)
			}
		}
		if got.Status.State != "active" || got.StartsAt.Sub(a.Since).Abs() > time.Millisecond || // Alertmanager keeps milliseconds
			!got.EndsAt.After(time.Now().Add(time.Hour)) ||
			got.GeneratorURL != "http://lkscore.example:9090/ui/alerts?agent=support" ||
			!strings.Contains(got.Annotations["summary"], a.Metric) || got.Annotations["worst_sessions"] == "" ||
			got.Annotations["alert_id"] != a.ID {
			t.Errorf("%s in Alertmanager: %+v", a.Metric, *got)
		}
	}

	// Healthy sessions within the hold time: the drift clears, nothing resolves.
	publishCards(t, js, population.Generate(scorer, healthy, 23, cfg.Keep))
	waitConsumerIdle(t, ns.URL(), "LKSCORE_RESULTS", wire.RegressConsumer)
	first, last := fired[0].Since, fired[0].Since // the alerts fired in one evaluation or a few
	for _, a := range fired {
		first, last = minTime(first, a.Since), maxTime(last, a.Since)
	}
	if el := time.Since(first); el >= hold {
		t.Fatalf("the healthy sessions took %s, longer than the hold time: the test proves nothing", el)
	}
	if all := alertMsgs(t, ns.URL()); len(all) != len(fired) {
		t.Fatalf("an alert resolved within its hold time: %v", summary(all))
	}
	time.Sleep(time.Until(last.Add(hold))) // every alert's hold is over
	publishCards(t, js, population.Generate(scorer, healthy, 24, cfg.DriftWindow))
	testenv.WaitFor(t, settleWait, "the resolved alerts", func() bool {
		return len(alertMsgs(t, ns.URL())) == 2*len(fired) && len(am.Alerts(t)) == 0 &&
			len(hooks.byPath("/slack")) == 2*len(fired) && len(hooks.byPath("/json")) == 2*len(fired)
	})
	time.Sleep(time.Second) // a duplicate would arrive now
	all := alertMsgs(t, ns.URL())
	firingByID := map[string]wire.Alert{}
	for _, a := range fired {
		firingByID[a.ID] = a
	}
	for _, a := range all {
		if a.Status != wire.AlertResolved {
			continue
		}
		if a.At.Sub(a.Since) < hold {
			t.Errorf("%s resolved %s after it fired, within the hold time %s", a.ID, a.At.Sub(a.Since), hold)
		}
		// The resolved message carries the figures that resolved it.
		if f := firingByID[a.ID]; math.Abs(a.Current-a.Baseline) >= math.Abs(f.Current-f.Baseline) {
			t.Errorf("%s resolved at %v against %v; it fired at %v", a.Metric, a.Current, a.Baseline, f.Current)
		}
	}
	if got := am.Received(t); got["firing"] != len(fired) || got["resolved"] != len(fired) {
		t.Errorf("Alertmanager received %v, want %d firing and %d resolved (once each)", got, len(fired), len(fired))
	}
	for _, path := range []string{"/slack", "/json"} {
		posts := hooks.byPath(path)
		seen := map[string]int{}
		for i, p := range posts {
			seen[p.key]++
			if p.contentType != "application/json" {
				t.Errorf("%s: content type %q", path, p.contentType)
			}
			var msg struct {
				Text   string `json:"text"`
				Status string `json:"status"`
				ID     string `json:"id"`
			}
			if err := json.Unmarshal(p.body, &msg); err != nil {
				t.Fatalf("%s: %v: %s", path, err, p.body)
			}
			if path == "/slack" && (!strings.Contains(msg.Text, "support") || !strings.Contains(msg.Text, "["+strings.ToUpper(strings.TrimPrefix(p.key[strings.IndexByte(p.key, '#'):], "#"))+"]")) {
				t.Errorf("slack text %q", msg.Text)
			}
			if path == "/json" && msg.ID+"#"+msg.Status != p.key {
				t.Errorf("json post %d: id %s status %s, idempotency key %s", i, msg.ID, msg.Status, p.key)
			}
		}
		for _, a := range all {
			if seen[a.ID+"#"+a.Status] != 1 {
				t.Errorf("%s got %s %d times", path, a.ID+"#"+a.Status, seen[a.ID+"#"+a.Status])
			}
		}
		// Firing before resolved, per alert.
		first := map[string]string{}
		for _, p := range posts {
			id, status, _ := strings.Cut(p.key, "#")
			if _, ok := first[id]; !ok {
				first[id] = status
			}
		}
		for id, st := range first {
			if st != wire.AlertFiring {
				t.Errorf("%s: %s arrived %s first", path, id, st)
			}
		}
	}
	for _, p := range hooks.byPath("/json") {
		checkAlertSchema(t, p.body)
	}
}

// TestResendRestoresRestartedAlertmanager: Alertmanager keeps alerts in
// memory. After it restarts, the resender (alerts.alertmanager.
// resend_interval) brings back every alert still firing, with an end a few
// intervals ahead; an Alertmanager that was down when an alert fired gets
// it from the delivery stage's retries.
func TestResendRestoresRestartedAlertmanager(t *testing.T) {
	ns := startNATS(t)
	am := testenv.StartAlertmanager(t)
	am.Stop() // down when the alert fires
	const resend = time.Second
	_, reg, _ := startWorker(t, ns.URL(), func(c *config.Config) {
		c.Alerts.Alertmanager.URLs = []string{am.URL}
		c.Alerts.Alertmanager.ResendInterval = resend
		c.Pipeline.RetryBase = 200 * time.Millisecond
	})
	fired := driftVersion(t, ns.URL(), population.Clean("support", "4"), 31)

	am.Start()
	target := map[string]string{"target": strings.TrimPrefix(am.URL, "http://")}
	testenv.WaitFor(t, settleWait, "the delivery stage's retries to deliver every alert", func() bool {
		target["outcome"] = "delivered"
		return counter(t, reg, "lkscore_alert_deliveries_total", target) == float64(len(fired))
	})
	target["outcome"] = "retry"
	if counter(t, reg, "lkscore_alert_deliveries_total", target) == 0 {
		t.Error("no delivery was retried while Alertmanager was down")
	}
	if n := len(am.Alerts(t)); n != len(fired) {
		t.Fatalf("Alertmanager holds %d alerts, %d fired", n, len(fired))
	}
	am.Stop()
	am.Start() // a new process: it holds no alert, and its received counter starts at 0
	testenv.WaitFor(t, settleWait, "the resent alerts", func() bool { return len(am.Alerts(t)) == len(fired) })
	// The delivery stage delivered each alert once and is done: what the
	// new process received came from the resender.
	if got := am.Received(t)["firing"]; got < len(fired) {
		t.Errorf("the restarted Alertmanager received %d firing alerts, want the %d resent", got, len(fired))
	}
	target["outcome"] = "delivered"
	if n := counter(t, reg, "lkscore_alert_deliveries_total", target); n != float64(len(fired)) {
		t.Errorf("the delivery stage delivered %v, want each alert once (%d)", n, len(fired))
	}
	for _, a := range am.Alerts(t) {
		if lease := time.Until(a.EndsAt); lease > 4*resend+time.Second || lease <= 0 {
			t.Errorf("%s ends in %s, want within 4 resend intervals (%s)", a.Labels["metric"], lease, 4*resend)
		}
	}
}

// TestRefusedAlertIsDeadLettered: a webhook that answers 404 (a wrong URL)
// will not change by itself: the alert goes to lkscore.dlq.notify with the
// answer, at once, and the other target still gets it.
func TestRefusedAlertIsDeadLettered(t *testing.T) {
	ns := startNATS(t)
	hooks := &hookReceiver{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/gone" {
			http.Error(w, "no_service", http.StatusNotFound)
			return
		}
		hooks.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	_, reg, _ := startWorker(t, ns.URL(), func(c *config.Config) {
		c.Alerts.Webhooks = []config.AlertWebhook{{Name: "gone", URL: srv.URL + "/gone"}, {Name: "ok", URL: srv.URL + "/ok"}}
	})
	fired := driftVersion(t, ns.URL(), population.Clean("support", "5"), 41)
	testenv.WaitFor(t, settleWait, "a dead letter per alert and every alert at the other webhook", func() bool {
		return len(streamMsgs(t, ns.URL(), "LKSCORE_DLQ")) == len(fired) && len(hooks.byPath("/ok")) == len(fired)
	})
	for _, dl := range streamMsgs(t, ns.URL(), "LKSCORE_DLQ") {
		if dl.Subject != "lkscore.dlq.notify" || !strings.Contains(dl.Header.Get(wire.HeaderDLQError), "HTTP 404: no_service") ||
			dl.Header.Get(wire.HeaderDLQDeliveries) != "1" {
			t.Errorf("dead letter %s %v", dl.Subject, dl.Header)
		}
	}
	if n := counter(t, reg, "lkscore_alert_deliveries_total", map[string]string{"target": "gone", "outcome": "refused"}); n != float64(len(fired)) {
		t.Errorf("%v refused deliveries counted, want %d", n, len(fired))
	}
}

func minTime(a, b time.Time) time.Time {
	if b.Before(a) {
		return b
	}
	return a
}

func maxTime(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}

// driftVersion publishes a version's calibration sessions, then slow ones,
// waits for its drift alerts and returns every alert on the stream then.
// seed picks the populations (each test its own).
func driftVersion(t *testing.T, url string, healthy population.Params, seed uint64) []wire.Alert {
	t.Helper()
	js := testenv.JetStream(t, url)
	scorer, err := rules.NewScorer(scoring.DefaultConfig())
	if err != nil {
		t.Fatal(err)
	}
	cfg := regress.DefaultConfig()
	slow := healthy
	slow.E2EMedianMs = 2600
	publishCards(t, js, population.Generate(scorer, healthy, seed, cfg.DriftWindow*cfg.DriftCalibration))
	publishCards(t, js, population.Generate(scorer, slow, seed+1, 3*cfg.DriftWindow))
	testenv.WaitFor(t, settleWait, "drift alerts on NATS", func() bool {
		return hasAlert(alertMsgs(t, url), regress.KindDrift, regress.MetricE2EP50, wire.AlertFiring)
	})
	time.Sleep(time.Second) // the rest of the firing ones
	return alertMsgs(t, url)
}

// TestThresholdAlertReachesAlertmanager: a team's threshold on its own rule
// ("rule errored violated in at least 3 of the last 5 sessions of an
// agent") fires on the third violating session, not before, through two
// worker replicas to a real Alertmanager with the violating sessions as
// evidence; clean sessions resolve it once the hold time is over.
func TestThresholdAlertReachesAlertmanager(t *testing.T) {
	ns := startNATS(t)
	am := testenv.StartAlertmanager(t)
	errored := []scoring.Rule{{Name: "errored", Expr: `close_reason == "CR_ERROR"`, Severity: session.Critical}}
	const hold = 3 * time.Second
	opts := func(c *config.Config) {
		c.Scoring.Rules = errored
		c.Regression.MinFiring = hold
		c.Regression.Thresholds = []regress.Threshold{{Name: "errors_page", Rule: "errored", Agents: []string{"booking"},
			AtLeast: 3, OfLast: 5, Severity: session.Critical}}
		c.Alerts.Alertmanager.URLs = []string{am.URL}
		c.Alerts.Alertmanager.ResendInterval = time.Hour
	}
	startWorker(t, ns.URL(), opts)
	startWorker(t, ns.URL(), opts)
	js := testenv.JetStream(t, ns.URL())
	cfg := scoring.DefaultConfig()
	cfg.Rules = errored
	scorer, err := rules.NewScorer(cfg)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	cardOf := func(agent, closeReason string) session.Scorecard {
		n++
		e2e, conf := 0.9, 0.95
		s := scoring.Session{Identity: session.Identity{Key: fmt.Sprintf("RM_%03d/AJ_%03d", n, n), AgentName: agent}, Close: session.Close{CloseReason: closeReason, CloseReasonSource: "otlp_log"}, Items: []scoring.Item{{ID: "u", Type: scoring.TypeMessage, Role: scoring.RoleUser, Text: "hello", CreatedAt: 100, TranscriptConfidence: &conf},
			{ID: "a", Type: scoring.TypeMessage, Role: scoring.RoleAssistant, Text: "hi", CreatedAt: 101, HasMetrics: true, E2ELatency: &e2e}}}
		card := scorer.Score(s)
		if got := card.Rules[0].Status; got != map[bool]string{true: session.RuleViolated, false: session.RulePassed}[closeReason == "CR_ERROR"] {
			t.Fatalf("rule %s on %s", got, closeReason)
		}
		return card
	}
	send := func(cards ...session.Scorecard) {
		t.Helper()
		for _, c := range cards {
			publishCards(t, js, []session.Scorecard{c})
			waitConsumerIdle(t, ns.URL(), "LKSCORE_RESULTS", wire.RegressConsumer)
		}
	}
	// Two violations among clean sessions, and an agent it does not watch
	// violating four times: nothing fires.
	v1, v2 := cardOf("booking", "CR_ERROR"), cardOf("booking", "CR_ERROR")
	send(v1, cardOf("booking", "CR_USER_INITIATED"), v2)
	send(cardOf("support", "CR_ERROR"), cardOf("support", "CR_ERROR"), cardOf("support", "CR_ERROR"), cardOf("support", "CR_ERROR"))
	if all := alertMsgs(t, ns.URL()); len(all) != 0 {
		t.Fatalf("fired before the third violation: %v", summary(all))
	}
	// The third violation within the last five fires it.
	v3 := cardOf("booking", "CR_ERROR")
	send(v3)
	var fired wire.Alert
	testenv.WaitFor(t, settleWait, "the threshold alert in Alertmanager", func() bool {
		all := alertMsgs(t, ns.URL())
		if len(all) == 1 {
			fired = all[0]
		}
		return len(all) == 1 && len(am.Alerts(t)) == 1
	})
	if fired.Kind != regress.KindThreshold || fired.Status != wire.AlertFiring || fired.Session != v3.Session.Key || fired.Current != 3 ||
		fired.NCurrent != 4 || fired.Limit != 3 || fired.Version != regress.AllVersions || fired.Agent != "booking" {
		t.Fatalf("fired %+v", fired)
	}
	var evidence []string
	for _, s := range fired.WorstSessions {
		evidence = append(evidence, s.Session)
	}
	if want := []string{v3.Session.Key, v2.Session.Key, v1.Session.Key}; !slices.Equal(evidence, want) {
		t.Errorf("evidence %v, want the violating sessions newest first %v", evidence, want)
	}
	got := am.Alerts(t)[0]
	for k, v := range map[string]string{"alertname": "LkscoreThreshold", "agent": "booking", "metric": "errors_page", "kind": "threshold",
		"severity": "critical", "version": "*", "scoring_version": scorer.Version()} {
		if got.Labels[k] != v {
			t.Errorf("label %s = %q, want %q", k, got.Labels[k], v)
		}
	}
	// A threshold's annotations say what it counted and which sessions hit
	// it; it has no baseline, effect or test to show.
	if !strings.Contains(got.Annotations["sessions"], v1.Session.Key) || !strings.Contains(got.Annotations["summary"], "errors_page") ||
		!strings.Contains(got.Annotations["description"], "at least 3 of the last 5") || got.Annotations["counted"] != fired.BaselineOf ||
		got.Annotations["current"] != "3" || got.Annotations["limit"] != "3" || got.Annotations["n_current"] != "4" {
		t.Errorf("annotations %v", got.Annotations)
	}
	for _, k := range []string{"worst_sessions", "baseline", "effect", "test", "n_baseline", "baseline_of"} {
		if v, ok := got.Annotations[k]; ok {
			t.Errorf("threshold annotation %s = %q: it has none", k, v)
		}
	}
	// Clean sessions: once fewer than three of the last five violate and
	// the hold is over, it resolves, once.
	time.Sleep(time.Until(fired.Since.Add(hold)))
	send(cardOf("booking", "CR_USER_INITIATED"), cardOf("booking", "CR_USER_INITIATED"), cardOf("booking", "CR_USER_INITIATED"))
	testenv.WaitFor(t, settleWait, "the resolved alert", func() bool {
		return len(alertMsgs(t, ns.URL())) == 2 && len(am.Alerts(t)) == 0
	})
	res := alertMsgs(t, ns.URL())[1]
	if res.Status != wire.AlertResolved || res.ID != fired.ID || res.Current >= 3 {
		t.Errorf("resolved %+v", res)
	}
	if r := am.Received(t); r["firing"] != 1 || r["resolved"] != 1 {
		t.Errorf("Alertmanager received %v, want one firing and one resolved", r)
	}
	for _, m := range streamMsgs(t, ns.URL(), "LKSCORE_ALERTS") {
		checkAlertSchema(t, m.Data)
	}
}
