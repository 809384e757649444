package notify

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/lkscore/lkscore/wire"
)

// Alertmanager posts to one Alertmanager's v2 API (POST /api/v2/alerts).
// The body is the API's postableAlerts: written here rather than through
// Alertmanager's generated go-openapi client, which would bring its whole
// module for five fields; TestAlertmanagerRoundTrip reads every field back
// from a real Alertmanager.
type Alertmanager struct {
	base        string
	name        string
	client      *http.Client
	externalURL string
	// lease is how far ahead a firing alert's endsAt is set: Alertmanager
	// resolves an alert nobody re-sent by then.
	lease time.Duration
}

// NewAlertmanager builds a client for the Alertmanager at base
// (http://host:9093, with or without a path prefix). Firing alerts are
// sent with endsAt = now + lease; externalURL (may be empty) is the
// dashboard's address for generatorURL.
func NewAlertmanager(base string, client *http.Client, externalURL string, lease time.Duration) *Alertmanager {
	return &Alertmanager{base: strings.TrimSuffix(base, "/"), name: TargetName(base), client: client,
		externalURL: strings.TrimSuffix(externalURL, "/"), lease: lease}
}

// Name is the target as logs and metrics name it (host:port).
func (a *Alertmanager) Name() string { return a.name }

// postable is one element of Alertmanager's postableAlerts.
type postable struct {
	Labels       map[string]string `json:"labels"`
	Annotations  map[string]string `json:"annotations,omitempty"`
	StartsAt     string            `json:"startsAt,omitempty"`
	EndsAt       string            `json:"endsAt,omitempty"`
	GeneratorURL string            `json:"generatorURL,omitempty"`
}

// Send posts alerts as they are at now: firing ones to end at now + lease
// unless sent again, resolved ones ended at their resolution.
func (a *Alertmanager) Send(ctx context.Context, now time.Time, alerts ...wire.Alert) error {
	if len(alerts) == 0 {
		return nil
	}
	body := make([]postable, len(alerts))
	for i, al := range alerts {
		body[i] = a.postable(al, now)
	}
	data, err := json.Marshal(body)
	if err != nil {
		return &Error{Target: a.name, Err: err}
	}
	return post(ctx, a.client, a.name, a.base+"/api/v2/alerts", "application/json", data, nil)
}

// Labels are the label set that identifies an alert in Alertmanager: one
// per agent, version, scoring version, kind and metric, as on NATS.
func Labels(al wire.Alert) map[string]string {
	return map[string]string{
		"alertname":       AlertName(al.Kind),
		"agent":           al.Agent,
		"version":         al.Version,
		"scoring_version": al.ScoringVersion,
		"metric":          al.Metric,
		"kind":            al.Kind,
		"severity":        alertSeverity(al),
		"source":          "lkscore",
	}
}

// AlertName is the alertname label of a kind: LkscoreRegression,
// LkscoreDrift, LkscoreFailures.
func AlertName(kind string) string {
	if kind == "" {
		return "Lkscore"
	}
	return "Lkscore" + strings.ToUpper(kind[:1]) + kind[1:]
}

// Severity is critical for failure spikes (calls are failing now) and
// warning for regressions and drift (calls got worse).
func Severity(kind string) string {
	if kind == "failures" {
		return "critical"
	}
	return "warning"
}

// alertSeverity is the alert's own severity (a threshold's), else its kind's.
func alertSeverity(al wire.Alert) string {
	if al.Severity != "" {
		return al.Severity
	}
	return Severity(al.Kind)
}

func (a *Alertmanager) postable(al wire.Alert, now time.Time) postable {
	p := postable{Labels: Labels(al), Annotations: annotations(al, a.externalURL),
		StartsAt: al.Since.UTC().Format(time.RFC3339Nano), GeneratorURL: alertsPage(a.externalURL, al)}
	if al.Status == wire.AlertResolved {
		p.EndsAt = al.At.UTC().Format(time.RFC3339Nano)
	} else {
		p.EndsAt = now.Add(a.lease).UTC().Format(time.RFC3339Nano)
	}
	return p
}

func annotations(al wire.Alert, ext string) map[string]string {
	if al.Kind == "threshold" {
		return thresholdAnnotations(al, ext)
	}
	m := map[string]string{
		"summary":     Summary(al),
		"description": Description(al),
		"baseline":    num(al.Baseline),
		"current":     num(al.Current),
		"effect":      num(al.Effect),
		"baseline_of": al.BaselineOf,
		"test":        al.Test,
		"n_baseline":  strconv.Itoa(al.NBaseline),
		"n_current":   strconv.Itoa(al.NCurrent),
		"session":     al.Session,
		"alert_id":    al.ID,
	}
	if al.PValue != 0 {
		m["p_value"] = num(al.PValue)
	}
	if al.QValue != 0 {
		m["q_value"] = num(al.QValue)
	}
	if al.Limit != 0 {
		m["limit"] = num(al.Limit)
	}
	if ws := worst(al, 5); len(ws) > 0 {
		m["worst_sessions"] = strings.Join(ws, ", ")
		if ext != "" {
			m["worst_session_url"] = sessionPage(ext, ws[0])
		}
	}
	if ext != "" {
		m["dashboard"] = alertsPage(ext, al)
	}
	return m
}

// thresholdAnnotations are a threshold alert's: what it counted, the count
// and the limit, how many sessions it looked at, and the sessions that hit
// it (a threshold compares no baseline and runs no test).
func thresholdAnnotations(al wire.Alert, ext string) map[string]string {
	m := map[string]string{
		"summary":     Summary(al),
		"description": Description(al),
		"counted":     al.BaselineOf,
		"current":     num(al.Current),
		"limit":       num(al.Limit),
		"n_current":   strconv.Itoa(al.NCurrent),
		"alert_id":    al.ID,
	}
	var hit []string
	for _, s := range al.WorstSessions {
		hit = append(hit, s.Session)
	}
	if len(hit) > 0 {
		m["sessions"] = strings.Join(hit[:min(len(hit), 5)], ", ")
		if ext != "" {
			m["session_url"] = sessionPage(ext, hit[0])
		}
	}
	if ext != "" {
		m["dashboard"] = alertsPage(ext, al)
	}
	return m
}

// Summary is one line: what fired, for whom, and the numbers.
func Summary(al wire.Alert) string {
	if al.Kind == "threshold" {
		return fmt.Sprintf("%s: threshold %s: %s (now %s of %d sessions)", al.Agent, al.Metric, al.BaselineOf, num(al.Current), al.NCurrent)
	}
	v := al.Version
	if v == "" {
		v = "(no version)"
	}
	return fmt.Sprintf("%s %s: %s %s %s → %s (%s)", al.Agent, v, al.Kind, al.Metric, num(al.Baseline), num(al.Current), effect(al))
}

// Description says what the figures were compared with and how.
func Description(al wire.Alert) string {
	var b strings.Builder
	if al.Kind == "threshold" {
		fmt.Fprintf(&b, "threshold %s of agent %s (all versions, scoring %s): %s; now %s over %d sessions (limit %s).",
			al.Metric, al.Agent, al.ScoringVersion, al.BaselineOf, num(al.Current), al.NCurrent, num(al.Limit))
		if len(al.WorstSessions) > 0 {
			b.WriteString(" Sessions:")
			for _, s := range al.WorstSessions {
				b.WriteString(" " + s.Session)
			}
			b.WriteString(".")
		}
		return b.String()
	}
	fmt.Fprintf(&b, "%s of agent %s version %s (scoring %s) on %s: %s over %d sessions against %s over %d (%s",
		al.Metric, al.Agent, al.Version, al.ScoringVersion, al.Kind, num(al.Current), al.NCurrent, num(al.Baseline), al.NBaseline, al.Test)
	if al.QValue != 0 {
		fmt.Fprintf(&b, ", q=%s", num(al.QValue))
	} else if al.PValue != 0 {
		fmt.Fprintf(&b, ", p=%s", num(al.PValue))
	}
	if al.Limit != 0 {
		fmt.Fprintf(&b, ", limit %s", num(al.Limit))
	}
	fmt.Fprintf(&b, "); baseline: %s.", al.BaselineOf)
	for _, c := range al.CodesGrown {
		fmt.Fprintf(&b, " %s in %.0f%% of sessions (was %.0f%%).", c.Code, 100*c.Current, 100*c.Baseline)
	}
	return b.String()
}

func effect(al wire.Alert) string {
	if al.Baseline != 0 {
		return fmt.Sprintf("%+.0f%%", 100*(al.Current-al.Baseline)/abs(al.Baseline))
	}
	return "effect " + num(al.Effect)
}

func abs(f float64) float64 {
	if f < 0 {
		return -f
	}
	return f
}

func num(f float64) string { return strconv.FormatFloat(f, 'g', 4, 64) }

func worst(al wire.Alert, n int) []string {
	var out []string
	for _, s := range al.WorstSessions {
		if len(out) == n {
			break
		}
		out = append(out, s.Session)
	}
	return out
}

// alertsPage links the dashboard's alerts page for the alert's agent.
func alertsPage(ext string, al wire.Alert) string {
	if ext == "" {
		return ""
	}
	return ext + "/ui/alerts?agent=" + url.QueryEscape(al.Agent)
}

func sessionPage(ext, key string) string { return ext + "/ui/session?key=" + url.QueryEscape(key) }
