package notify

import (
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/lkscore/lkscore/regress"
	"github.com/lkscore/lkscore/wire"
)

func sample(status string) wire.Alert {
	since := time.Date(2026, 12, 2, 10, 0, 0, 0, time.UTC)
	return wire.Alert{ID: "drift/support/3/1.2.0/e2e_latency_p50_ms@70", Kind: "drift", Status: status, Agent: "support",
		Version: "3", ScoringVersion: "1.2.0", Metric: "e2e_latency_p50_ms", Baseline: 870.6, Current: 1237, Effect: 366.4,
		Limit: 959.7, Test: "ewma", NBaseline: 50, NCurrent: 10, BaselineOf: "this version's first 50 sessions",
		WorstSessions: []regress.SessionRef{{Session: "RM_a/AJ_b", Overall: 61}}, Session: "RM_c/AJ_d", Seq: 70,
		Since: since, At: since.Add(10 * time.Minute)}
}

// TestRetryableByStatus: what is worth trying again, and what is not.
func TestRetryableByStatus(t *testing.T) {
	for status, retry := range map[int]bool{200: false, 204: false, 400: false, 401: false, 404: false, 408: true, 429: true, 500: true, 503: true} {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.WriteHeader(status)
			_, _ = io.WriteString(w, "the answer\n")
		}))
		w := NewWebhook("chat", srv.URL+"/hooks/SECRET", FormatSlack, srv.Client(), "")
		err := w.Send(context.Background(), sample(wire.AlertFiring), nil)
		srv.Close()
		if status < 300 {
			if err != nil {
				t.Errorf("%d: %v", status, err)
			}
			continue
		}
		if err == nil || Retryable(err) != retry || !strings.Contains(err.Error(), "the answer") {
			t.Errorf("%d: err %v, retryable %v, want %v with the body", status, err, Retryable(err), retry)
		}
	}
}

// TestNoAnswerIsRetriedAndKeepsTheSecret: a refused connection is retried,
// and the error names the target, not the webhook URL's secret path.
func TestNoAnswerIsRetriedAndKeepsTheSecret(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	_ = ln.Close()
	w := NewWebhook("chat", "http://"+addr+"/services/T000/B000/SECRET", FormatSlack, &http.Client{Timeout: time.Second}, "")
	err = w.Send(context.Background(), sample(wire.AlertFiring), nil)
	if err == nil || !Retryable(err) {
		t.Fatalf("err %v, want a retryable error", err)
	}
	if strings.Contains(err.Error(), "SECRET") || !strings.Contains(err.Error(), "chat") {
		t.Errorf("error %q leaks the URL or does not name the target", err)
	}
}

// TestAlertmanagerBody: the v2 postable alert: the identifying labels, the
// numbers as annotations, a firing alert's end a lease ahead, a resolved
// one's at its resolution.
func TestAlertmanagerBody(t *testing.T) {
	var got []map[string]any
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/prefix/api/v2/alerts" || r.Header.Get("Content-Type") != "application/json" {
			t.Errorf("%s %s %s", r.Method, r.URL.Path, r.Header.Get("Content-Type"))
		}
		if err := json.NewDecoder(r.Body).Decode(&got); err != nil {
			t.Error(err)
		}
	}))
	defer srv.Close()
	am := NewAlertmanager(srv.URL+"/prefix/", srv.Client(), "https://lkscore.example/", 4*time.Minute)
	now := time.Date(2026, 12, 2, 10, 5, 0, 0, time.UTC)
	if err := am.Send(context.Background(), now, sample(wire.AlertFiring), sample(wire.AlertResolved)); err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 {
		t.Fatalf("%d alerts posted", len(got))
	}
	labels := got[0]["labels"].(map[string]any)
	for k, v := range map[string]string{"alertname": "LkscoreDrift", "agent": "support", "version": "3", "metric": "e2e_latency_p50_ms",
		"severity": "warning", "scoring_version": "1.2.0", "kind": "drift"} {
		if labels[k] != v {
			t.Errorf("label %s = %v, want %s", k, labels[k], v)
		}
	}
	ann := got[0]["annotations"].(map[string]any)
	if ann["baseline"] != "870.6" || ann["current"] != "1237" || ann["worst_sessions"] != "RM_a/AJ_b" ||
		ann["worst_session_url"] != "https://lkscore.example/ui/session?key=RM_a%2FAJ_b" || !strings.Contains(ann["summary"].(string), "+42%") {
		t.Errorf("annotations %v", ann)
	}
	if got[0]["startsAt"] != "2026-12-02T10:00:00Z" || got[0]["endsAt"] != "2026-12-02T10:09:00Z" ||
		got[0]["generatorURL"] != "https://lkscore.example/ui/alerts?agent=support" {
		t.Errorf("firing: %v", got[0])
	}
	if got[1]["endsAt"] != "2026-12-02T10:10:00Z" {
		t.Errorf("resolved ends %v, want its resolution", got[1]["endsAt"])
	}
	if Severity("failures") != "critical" || AlertName("failures") != "LkscoreFailures" || AlertName("regression") != "LkscoreRegression" {
		t.Error("severity or alertname of failures/regression")
	}
}

// TestSlackMessage: the chat message says what happened and links the
// dashboard; the JSON format sends the NATS message as is.
func TestSlackMessage(t *testing.T) {
	m := SlackMessage(sample(wire.AlertResolved), "https://lkscore.example")
	if !strings.HasPrefix(m.Text, ":white_check_mark: [RESOLVED] support 3: drift e2e_latency_p50_ms 870.6 → 1237") || len(m.Blocks) != 2 ||
		!strings.Contains(m.Blocks[1].Text.Text, "<https://lkscore.example/ui/session?key=RM_a%2FAJ_b|RM_a/AJ_b>") {
		t.Errorf("%+v", m)
	}
	if m := SlackMessage(sample(wire.AlertFiring), ""); !strings.HasPrefix(m.Text, ":rotating_light: [FIRING]") ||
		strings.Contains(m.Blocks[1].Text.Text, "http") {
		t.Errorf("without an external URL: %+v", m)
	}
	var body []byte
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ = io.ReadAll(r.Body)
		if r.Header.Get(HeaderIdempotencyKey) != sample("").ID+"#firing" {
			t.Errorf("idempotency key %q", r.Header.Get(HeaderIdempotencyKey))
		}
	}))
	defer srv.Close()
	raw := []byte(`{"id":"x","status":"firing"}`)
	if err := NewWebhook("raw", srv.URL, FormatJSON, srv.Client(), "").Send(context.Background(), sample(wire.AlertFiring), raw); err != nil {
		t.Fatal(err)
	}
	if string(body) != string(raw) {
		t.Errorf("json format sent %s", body)
	}
}

// TestThresholdAlertText: a threshold alert says what it counted, its own
// severity, and the sessions that hit it, in Alertmanager and in chat.
func TestThresholdAlertText(t *testing.T) {
	al := wire.Alert{ID: "threshold/booking/*/v/page@9", Kind: "threshold", Status: wire.AlertFiring, Agent: "booking", Version: "*",
		ScoringVersion: "v", Metric: "page", Current: 3, Limit: 3, NCurrent: 5, Test: "count_of_last", Severity: "critical",
		BaselineOf:    "rule errored violated in at least 3 of the last 5 sessions",
		WorstSessions: []wire.SessionRef{{Session: "RM_3/AJ_3"}, {Session: "RM_2/AJ_2"}, {Session: "RM_1/AJ_1"}}}
	if l := Labels(al); l["severity"] != "critical" || l["alertname"] != "LkscoreThreshold" || l["metric"] != "page" {
		t.Errorf("labels %v", l)
	}
	if s := Summary(al); s != "booking: threshold page: rule errored violated in at least 3 of the last 5 sessions (now 3 of 5 sessions)" {
		t.Errorf("summary %q", s)
	}
	if d := Description(al); !strings.Contains(d, "limit 3") || !strings.Contains(d, "Sessions: RM_3/AJ_3 RM_2/AJ_2 RM_1/AJ_1.") {
		t.Errorf("description %q", d)
	}
	m := SlackMessage(al, "")
	if !strings.Contains(m.Blocks[1].Text.Text, "Sessions that hit it: `RM_3/AJ_3`") {
		t.Errorf("slack %+v", m.Blocks[1])
	}
	al.Severity = ""
	if Labels(al)["severity"] != "warning" {
		t.Errorf("a threshold without a severity: %v", Labels(al))
	}
}
