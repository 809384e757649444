package dashboard

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/lkscore/lkscore/scoring"
	"github.com/lkscore/lkscore/session"
)

// TestCoverageRows: the signal coverage view has one row per SDK release,
// newest release first within a language, with each signal's share and the
// close reason's sources; a session no signal named the SDK of is "unknown".
func TestCoverageRows(t *testing.T) {
	t.Parallel()
	all := []string{scoring.SignalRecording, scoring.SignalLogs, scoring.SignalTraces, scoring.SignalCloseReason}
	entries := []Entry{
		{SDK: "nodejs", SDKVersion: "1.9.0", Signals: all, Source: "otlp_log"},
		{SDK: "nodejs", SDKVersion: "1.9.0", Signals: []string{scoring.SignalRecording, scoring.SignalCloseReason}, Source: "webhook_room"},
		{SDK: "nodejs", SDKVersion: "1.10.0", Signals: all, Source: "otlp_log"},
		{SDK: "nodejs", SDKVersion: "1.8.0", Signals: all, Source: "otlp_log"},
		{SDK: "python", SDKVersion: "1.7.0", Signals: append(all, scoring.SignalAudio), Source: "otlp_log_implied"},
		{SDK: "python", SDKVersion: "1.5.17", Signals: []string{scoring.SignalRecording}, Source: "absent"},
		{Signals: []string{scoring.SignalRecording}, Source: "job_status"},
	}
	rows := Coverage(entries)
	var got []string
	for _, r := range rows {
		got = append(got, r.SDK+" "+r.Version)
	}
	if want := "nodejs 1.10.0,nodejs 1.9.0,nodejs 1.8.0,python 1.7.0,python 1.5.17,unknown "; strings.Join(got, ",") != want {
		t.Fatalf("rows %q, want %q", strings.Join(got, ","), want)
	}
	js19 := rows[1]
	if js19.Sessions != 2 || js19.Shares[scoring.SignalRecording] != 1 || js19.Shares[scoring.SignalLogs] != 0.5 ||
		js19.Shares[scoring.SignalAudio] != 0 || len(js19.Sources) != 2 || js19.Sources[0].Source != "otlp_log" {
		t.Errorf("nodejs 1.9.0: %+v", js19)
	}
	if py := rows[3]; py.Shares[scoring.SignalAudio] != 1 || py.Sources[0].Source != "otlp_log_implied" {
		t.Errorf("python 1.7.0: %+v", py)
	}
}

// TestSignalsPage: /ui/signals renders a row per release with its shares,
// and ?format=json gives the rows.
func TestSignalsPage(t *testing.T) {
	h := testHandler(t, "")
	h.index.window = 10
	h.index.add(Entry{Seq: 20, At: time.Now(), Key: "RM_s/AJ", SDK: "python", SDKVersion: "1.6.10",
		Signals: []string{scoring.SignalRecording, scoring.SignalTraces}, Source: "summary"})
	body := get(h, "127.0.0.1:1", "/ui/signals", nil).Body.String()
	if !strings.Contains(body, `data-sdk="python" data-version="1.6.10"`) || !strings.Contains(body, `data-signal="traces">100%`) ||
		!strings.Contains(body, `data-signal="logs">0%`) || !strings.Contains(body, "summary 1") {
		t.Fatalf("signals page: %s", body)
	}
	var rows []CoverageRow
	if err := json.Unmarshal(get(h, "127.0.0.1:1", "/ui/signals?format=json", nil).Body.Bytes(), &rows); err != nil || len(rows) != 2 {
		t.Fatalf("json: %v %+v", err, rows)
	}
}

// TestSignalsOf: what a scorecard says its session had.
func TestSignalsOf(t *testing.T) {
	t.Parallel()
	c := session.Scorecard{Inputs: []string{session.InputRecording, session.InputTraces}}
	c.Completion.CloseReasonSource = "otlp_log"
	if got := strings.Join(scoring.SignalsOf(&c), ","); got != "recording,traces,close_reason" {
		t.Errorf("signals %q", got)
	}
	c.Completion.CloseReasonSource = "absent"
	c.Inputs = nil
	if got := strings.Join(scoring.SignalsOf(&c), ","); got != "recording" {
		t.Errorf("signals %q", got)
	}
}

// TestAlertsPageSaysWhatItNeeds: with no alert yet, the alerts page says
// what alerts need (a version tag, enough sessions per version) and how far
// the sessions in view are from it.
func TestAlertsPageSaysWhatItNeeds(t *testing.T) {
	h := testHandler(t, "")
	h.index.window = 20
	for i := range 3 {
		h.index.add(Entry{Seq: uint64(30 + i), At: time.Now(), Key: fmt.Sprintf("RM_v%d/AJ", i), AgentName: "booking", Version: "1.4.2"})
	}
	body := get(h, "127.0.0.1:1", "/ui/alerts", nil).Body.String()
	i := strings.Index(body, `id="alerts-readiness"`)
	if i < 0 {
		t.Fatalf("no readiness hint on an alerts page without alerts: %s", body)
	}
	hint := body[i:min(len(body), i+900)]
	all, _ := h.index.Select(Filter{})
	for _, want := range []string{"version:&lt;version&gt;", "regression.min_sessions", fmt.Sprintf("Of the %d sessions in view, 3 name a version", len(all)),
		"the most for one version: 3 (booking 1.4.2)"} {
		if !strings.Contains(hint, want) {
			t.Errorf("hint lacks %q: %s", want, hint)
		}
	}
}
