package dashboard

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/lkscore/lkscore/scoring"
	"github.com/lkscore/lkscore/session"
	"github.com/lkscore/lkscore/wire"
)

func testHandler(t *testing.T, token string) *Handler {
	t.Helper()
	return testHandlerWith(t, token, NewAlertIndex(10))
}

// testHandlerWith is testHandler showing the alerts of ax.
func testHandlerWith(t *testing.T, token string, ax *AlertIndex) *Handler {
	t.Helper()
	idx := NewIndex(3, "version:")
	for i, v := range []string{"pass", "warn", "fail", "warn"} {
		idx.add(Entry{Seq: uint64(i + 1), At: time.Now(), Key: "RM_" + string(rune('a'+i)) + "/AJ", Verdict: v, Score: float64(90 - 10*i)})
	}
	h, err := NewHandler(idx, ax, Sources{
		Scorecard:   func(context.Context, uint64) (session.Scorecard, error) { return session.Scorecard{}, nil },
		Items:       func(context.Context, string) ([]scoring.Item, error) { return nil, errors.New("not stored") },
		DeadLetters: func(context.Context) (int, error) { return 2, nil },
		Recording: func(context.Context, string, string) (io.ReadCloser, error) {
			return io.NopCloser(strings.NewReader("{}")), nil
		},
		Audio: func(context.Context, string) (bool, string) { return false, "this upload has no recording.ogg" },
	}, Access{Token: token, TrustLoopback: true}.NewGuard(), slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	return h
}

func get(h http.Handler, remote, url string, hdr map[string]string) *httptest.ResponseRecorder {
	req := httptest.NewRequest(http.MethodGet, url, nil)
	req.RemoteAddr = remote
	req.Host = "localhost:9090"
	for k, v := range hdr {
		if k == "Host" {
			req.Host = v
			continue
		}
		req.Header.Set(k, v)
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	return rec
}

// TestAccess: loopback clients are served; others need the token.
func TestAccess(t *testing.T) {
	open := testHandler(t, "")
	if c := get(open, "127.0.0.1:5000", "/ui", nil).Code; c != 200 {
		t.Errorf("loopback: %d", c)
	}
	if c := get(open, "[::1]:5000", "/ui", nil).Code; c != 200 {
		t.Errorf("loopback v6: %d", c)
	}
	if c := get(open, "10.1.2.3:5000", "/ui", nil).Code; c != 403 {
		t.Errorf("off loopback without a token configured: %d", c)
	}
	h := testHandler(t, "s3cret")
	for name, tc := range map[string]struct {
		url  string
		hdr  map[string]string
		want int
	}{
		"no token":     {"/ui", nil, 403},
		"wrong token":  {"/ui", map[string]string{"Authorization": "Bearer nope"}, 403},
		"bearer":       {"/ui", map[string]string{"Authorization": "Bearer s3cret"}, 200},
		"in the URL":   {"/ui/sessions?token=s3cret", nil, 400},
		"cookie":       {"/ui/sessions", map[string]string{"Cookie": cookieName + "=s3cret"}, 200},
		"wrong cookie": {"/ui/sessions", map[string]string{"Cookie": cookieName + "=nope"}, 403},
		"unknown page": {"/ui/nope", map[string]string{"Authorization": "Bearer s3cret"}, 404},
		"other host":   {"/ui", map[string]string{"Authorization": "Bearer s3cret", "Host": "attacker.example"}, 421},
	} {
		if c := get(h, "10.1.2.3:5000", tc.url, tc.hdr).Code; c != tc.want {
			t.Errorf("%s: %d, want %d", name, c, tc.want)
		}
	}
}

// TestBoundedWindow: the index keeps only its window and the pages say so.
func TestBoundedWindow(t *testing.T) {
	h := testHandler(t, "")
	entries, held := h.index.Select(Filter{})
	if held != 3 || len(entries) != 3 || entries[0].Seq != 2 {
		t.Fatalf("held %d, entries %+v", held, entries)
	}
	body := get(h, "127.0.0.1:1", "/ui", nil).Body.String()
	if !strings.Contains(body, "last 3 scorecards") || !strings.Contains(body, `id="sessions">3<`) || !strings.Contains(body, `id="dead-letters">2<`) {
		t.Errorf("overview: %s", body)
	}
	if _, ok := h.index.Lookup("RM_a/AJ"); ok {
		t.Error("an entry outside the window is still found")
	}
	if c := get(h, "127.0.0.1:1", "/ui/session?key=RM_a/AJ", nil).Code; c != 404 {
		t.Errorf("session outside the window: %d", c)
	}
	if body := get(h, "127.0.0.1:1", "/ui/session?key=RM_d/AJ", nil).Body.String(); !strings.Contains(body, "No timeline: not stored") {
		t.Errorf("session page without items: %s", body)
	}
	if c := get(h, "127.0.0.1:1", "/ui/sessions?since=yesterday", nil).Code; c != 400 {
		t.Errorf("bad since: %d", c)
	}
}

// TestHeardSpeechOnSessionPage: a scorecard with an audio block gets a
// heard-speech timeline with a span per segment and the talk-over marked; a
// refused recording says why; none, nothing.
func TestHeardSpeechOnSessionPage(t *testing.T) {
	for name, tc := range map[string]struct {
		audio *session.Audio
		want  []string
		not   string
	}{
		"measured": {&session.Audio{
			UserSegments:  []session.AudioSegment{{StartMs: 500, EndMs: 2500}, {StartMs: 6000, EndMs: 7000}},
			AgentSegments: []session.AudioSegment{{StartMs: 3200, EndMs: 5900}},
			Turns:         []session.AudioTurn{{UserEndMs: 2500, AgentStartMs: 3200, HeardLatencyMs: 700}, {UserEndMs: 7000, AgentStartMs: 6700, HeardLatencyMs: -300}},
			Metrics:       session.AudioMetrics{HeardLatencyP50Ms: 700, TalkOverCount: 1},
		}, []string{`id="heard"`, "heard user speech 500–2500 ms", "heard agent speech 3200–5900 ms", "talk-over: 300 ms", "heard latency p50 700 ms"}, ""},
		"refused": {&session.Audio{Refused: "not_stereo", Reason: "1 channel(s)"}, []string{"recording.ogg not measured (not_stereo)"}, `id="heard"`},
		"none":    {nil, nil, "Heard speech"},
	} {
		t.Run(name, func(t *testing.T) {
			h := testHandler(t, "")
			h.src.Scorecard = func(context.Context, uint64) (session.Scorecard, error) {
				return session.Scorecard{Audio: tc.audio}, nil
			}
			body := get(h, "127.0.0.1:1", "/ui/session?key=RM_d/AJ", nil).Body.String()
			for _, w := range tc.want {
				if !strings.Contains(body, w) {
					t.Errorf("page lacks %q", w)
				}
			}
			if tc.not != "" && strings.Contains(body, tc.not) {
				t.Errorf("page has %q", tc.not)
			}
		})
	}
}

// TestMetadataOnlySessionPage: a scorecard scored from spans and logs says
// so, links no recording objects, shows its unmeasured components with
// their reasons, and draws the timeline from the span items.
func TestMetadataOnlySessionPage(t *testing.T) {
	f := func(v float64) *float64 { return &v }
	spans := []scoring.Span{
		{ID: "01", Name: scoring.SpanAgentSession, Start: 100, End: 120},
		{ID: "02", Parent: "01", Name: scoring.SpanUserTurn, Start: 101, End: 103},
		{ID: "03", Parent: "01", Name: scoring.SpanAgentTurn, Start: 103.6, End: 106, E2ELatency: f(0.6), Interrupted: true},
	}
	for name, tc := range map[string]struct {
		inputs []string
		want   []string
		not    []string
	}{
		"metadata-only": {[]string{session.InputLogs, session.InputTraces},
			[]string{"metadata-only, no recording was uploaded", "not measured: ", `id="timeline"`}, []string{"object=recording.ogg", "No timeline"}},
		"recorded": {[]string{session.InputRecording, session.InputLogs, session.InputTraces},
			[]string{"object=recording.ogg", "inputs <b>recording, logs, traces</b>"}, []string{"metadata-only"}},
	} {
		t.Run(name, func(t *testing.T) {
			h := testHandler(t, "")
			in := scoring.Session{Identity: session.Identity{Key: "RM_d/AJ", RoomID: "RM_d", JobID: "AJ"}, Spans: spans, Inputs: tc.inputs}
			if slices.Contains(tc.inputs, session.InputRecording) {
				in.Items = scoring.ItemsFromSpans(spans) // stands in for a chat history
			}
			card := scoring.Score(in, scoring.DefaultConfig())
			h.src.Scorecard = func(context.Context, uint64) (session.Scorecard, error) { return card, nil }
			h.src.Items = func(context.Context, string) ([]scoring.Item, error) { return scoring.ItemsFromSpans(spans), nil }
			h.src.Audio = func(context.Context, string) (bool, string) { return true, "" }
			body := get(h, "127.0.0.1:1", "/ui/session?key=RM_d/AJ", nil).Body.String()
			for _, w := range tc.want {
				if !strings.Contains(body, w) {
					t.Errorf("page lacks %q", w)
				}
			}
			for _, n := range tc.not {
				if strings.Contains(body, n) {
					t.Errorf("page has %q", n)
				}
			}
		})
	}
}

// TestExportAndSearch: the export has every matching session, newest
// first, in CSV and JSON; the search finds room ids, job ids and agents.
func TestExportAndSearch(t *testing.T) {
	h := testHandler(t, "")
	h.index.window = 10
	h.index.add(Entry{Seq: 10, At: time.Now(), Key: "RM_zz/AJ_target", RoomID: "RM_zz", JobID: "AJ_target", AgentName: "Booking.Bot",
		ScoringVersion: "1.4.0+cabc", Verdict: "warn", Score: 71, E2EP50: 812.5, E2EP95: Missing, HeardP50: Missing, HeardP95: Missing, Codes: []string{"slow_response", "tool_error"}})
	csvBody := get(h, "127.0.0.1:1", "/ui/export?format=csv&verdict=warn", nil)
	lines := strings.Split(strings.TrimSpace(csvBody.Body.String()), "\n")
	if csvBody.Header().Get("Content-Type") != "text/csv; charset=utf-8" || len(lines) != 4 ||
		!strings.Contains(lines[1], ",RM_zz/AJ_target,RM_zz,,AJ_target,Booking.Bot,,warn,71,") {
		t.Fatalf("csv: %q", lines)
	}
	if !strings.HasSuffix(lines[1], ",812.5,,,,slow_response tool_error,1.4.0+cabc") { // the scoring version last
		t.Errorf("csv row: %q", lines[1])
	}
	var rows []Entry
	if err := json.Unmarshal(get(h, "127.0.0.1:1", "/ui/export?format=json&verdict=warn", nil).Body.Bytes(), &rows); err != nil || len(rows) != 3 || rows[0].Key != "RM_zz/AJ_target" {
		t.Fatalf("json: %v %+v", err, rows)
	}
	if c := get(h, "127.0.0.1:1", "/ui/export?format=xml", nil).Code; c != 400 {
		t.Errorf("format=xml: %d", c)
	}
	for _, q := range []string{"aj_TARGET", "RM_zz", "booking.bot"} {
		if body := get(h, "127.0.0.1:1", "/ui/sessions?q="+q, nil).Body.String(); !strings.Contains(body, `id="matching">1 sessions`) {
			t.Errorf("search %q: %s", q, body[strings.Index(body, `id="matching"`):][:60])
		}
	}
	if body := get(h, "127.0.0.1:1", "/ui/sessions?code=tool_error", nil).Body.String(); !strings.Contains(body, `id="matching">1 sessions`) {
		t.Error("filter by finding code")
	}
}

// TestRecordingRanges: recording.ogg is served with range requests.
func TestRecordingRanges(t *testing.T) {
	h := testHandler(t, "")
	data := strings.Repeat("OggS", 1000)
	for name, tc := range map[string]struct {
		open   func() io.ReadCloser
		ranges bool
	}{
		"seekable (a local file)": {func() io.ReadCloser { return seekCloser{strings.NewReader(data)} }, true},
		"sized stream (S3)":       {func() io.ReadCloser { return sizedStream{io.NopCloser(strings.NewReader(data)), int64(len(data))} }, true},
		"stream of unknown size":  {func() io.ReadCloser { return io.NopCloser(strings.NewReader(data)) }, false},
	} {
		h.src.Recording = func(context.Context, string, string) (io.ReadCloser, error) { return tc.open(), nil }
		rec := get(h, "127.0.0.1:1", "/ui/recording?key=RM_d/AJ&object=recording.ogg", map[string]string{"Range": "bytes=4-11"})
		if tc.ranges && (rec.Code != 206 || rec.Body.String() != "OggSOggS" || rec.Header().Get("Content-Range") != "bytes 4-11/4000" ||
			rec.Header().Get("Content-Type") != "audio/ogg") {
			t.Errorf("%s: range: %d %q %v", name, rec.Code, rec.Body.String(), rec.Header())
		}
		if !tc.ranges && (rec.Code != 200 || rec.Header().Get("Accept-Ranges") != "none" || rec.Body.Len() != 4000) {
			t.Errorf("%s: range: %d, Accept-Ranges %q, %d bytes", name, rec.Code, rec.Header().Get("Accept-Ranges"), rec.Body.Len())
		}
		if rec := get(h, "127.0.0.1:1", "/ui/recording?key=RM_d/AJ&object=recording.ogg", nil); rec.Code != 200 || rec.Body.String() != data {
			t.Errorf("%s: whole: %d %d", name, rec.Code, rec.Body.Len())
		}
	}
}

type seekCloser struct{ io.ReadSeeker }

func (seekCloser) Close() error { return nil }

type sizedStream struct {
	io.ReadCloser
	size int64
}

func (s sizedStream) SizeHint() int64 { return s.size }

// TestAlertIndex: an episode's last message decides whether it fires; the
// resolved ones come latest first.
func TestAlertIndex(t *testing.T) {
	x := NewAlertIndex(2)
	now := time.Date(2026, 12, 2, 12, 0, 0, 0, time.UTC)
	msg := func(id, agent, status string, since time.Time) []byte {
		b, _ := json.Marshal(wire.Alert{ID: id, Agent: agent, Status: status, Since: since, At: since.Add(time.Minute)})
		return b
	}
	x.add(1, now, msg("a", "booking", wire.AlertFiring, now.Add(-10*time.Minute)))
	x.add(2, now, msg("b", "support", wire.AlertFiring, now.Add(-5*time.Minute)))
	x.add(3, now, msg("b", "support", wire.AlertResolved, now.Add(-5*time.Minute)))
	x.add(3, now, msg("c", "support", wire.AlertFiring, now)) // a repeat of seq 3: ignored
	firing, resolved := x.Alerts("", 10, now)
	if len(firing) != 1 || firing[0].ID != "a" || firing[0].Held != 10*time.Minute || len(resolved) != 1 || resolved[0].Held != time.Minute {
		t.Fatalf("firing %+v resolved %+v", firing, resolved)
	}
	if f, _ := x.Alerts("support", 10, now); len(f) != 0 {
		t.Errorf("support fires %+v", f)
	}
	for i := range 6 { // resolved episodes beyond the window are forgotten; firing ones never
		x.add(uint64(10+i), now, msg(fmt.Sprint("r", i), "x", wire.AlertResolved, now))
	}
	firing, resolved = x.Alerts("", 10, now)
	if len(firing) != 1 || len(resolved) > 4 {
		t.Errorf("after many resolved: %d firing, %d resolved", len(firing), len(resolved))
	}
}

// TestBucketFor: minutes for the last hour, and so on.
func TestBucketFor(t *testing.T) {
	for span, want := range map[time.Duration]time.Duration{10 * time.Second: time.Second, time.Hour: time.Minute,
		24 * time.Hour: time.Hour, 7 * 24 * time.Hour: 3 * time.Hour, 60 * 24 * time.Hour: 24 * time.Hour} {
		if got := bucketFor(span); got != want {
			t.Errorf("%s: %s, want %s", span, got, want)
		}
	}
}

// TestExportEscapesFormulas: text cells that a spreadsheet would run as a
// formula (agents choose their names and versions) start with an apostrophe.
func TestExportEscapesFormulas(t *testing.T) {
	var b bytes.Buffer
	rows := []Entry{{Key: "RM_x/AJ_x", AgentName: `=HYPERLINK("http://evil","x")`, Version: "+1", RoomName: "@SUM(A1)", JobID: "-2", RoomID: "RM_x"}}
	if err := writeCSV(&b, rows); err != nil {
		t.Fatal(err)
	}
	for _, cell := range []string{`'=HYPERLINK(""http://evil"",""x"")`, ",'+1,", ",'@SUM(A1),", ",'-2,", ",RM_x,"} {
		if !strings.Contains(b.String(), cell) {
			t.Errorf("export lacks %s:\n%s", cell, b.String())
		}
	}
}

// TestThresholdAlertReadsAsOne: a threshold alert (every version, a count
// against a limit, no baseline) shows as what it is on the alerts page
// and the overview: its count of the sessions looked at and its limit, "all
// versions" with no version link (a filter on "*" matches nothing), the
// sessions that hit it; a regression alert keeps baseline → current and
// its version's link.
func TestThresholdAlertReadsAsOne(t *testing.T) {
	t.Parallel()
	ax := NewAlertIndex(10)
	now := time.Now()
	add := func(seq uint64, a wire.Alert) {
		b, _ := json.Marshal(a)
		ax.add(seq, now, b)
	}
	add(1, wire.Alert{ID: "threshold/booking/errors", Kind: "threshold", Status: wire.AlertFiring, Agent: "booking", Version: "*",
		Metric: "errors_page", Current: 3, NCurrent: 4, Limit: 3, BaselineOf: "rule errored violated in at least 3 of the last 5 sessions",
		WorstSessions: []wire.SessionRef{{Session: "RM_t/AJ_t"}}, Since: now.Add(-time.Minute), At: now})
	add(2, wire.Alert{ID: "regression/booking/2/x/e2e", Kind: "regression", Status: wire.AlertFiring, Agent: "booking", Version: "2",
		Metric: "e2e_latency_p50_ms", Baseline: 950, Current: 1400, Test: "mann_whitney_u", BaselineOf: "version 1",
		Since: now.Add(-time.Minute), At: now})
	h := testHandlerWith(t, "", ax)
	for _, page := range []string{"/ui/alerts", "/ui"} {
		body := get(h, "127.0.0.1:5000", page, nil).Body.String()
		for _, want := range []string{"all versions", "(limit 3)", "950 → 1400"} {
			if !strings.Contains(body, want) {
				t.Errorf("%s lacks %q", page, want)
			}
		}
		if strings.Contains(body, "version=%2A") || strings.Contains(body, "0 → 3") {
			t.Errorf("%s shows the threshold as a comparison or links version *", page)
		}
	}
	body := get(h, "127.0.0.1:5000", "/ui/alerts", nil).Body.String()
	for _, want := range []string{"3 of 4 sessions (limit 3)", "RM_t/AJ_t", "version=2"} {
		if !strings.Contains(body, want) {
			t.Errorf("alerts page lacks %q", want)
		}
	}
}
