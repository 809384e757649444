package dashboard

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/lkscore/lkscore/scoring"
	"github.com/lkscore/lkscore/session"
	"github.com/lkscore/lkscore/wire"
)

// TestLongCallFindingsGrouped: a 200-turn call's 100 findings of two codes
// are two rows on the session page, each with its count, its total
// deduction and its turns as links (bounded, the rest counted).
func TestLongCallFindingsGrouped(t *testing.T) {
	var slow, cut []session.Finding
	items := make([]scoring.Item, 200)
	for i := range items {
		items[i] = scoring.Item{ID: fmt.Sprint("it", i), Type: scoring.TypeMessage, Role: scoring.RoleUser, Text: "x"}
	}
	for i := 0; i < 200; i += 2 {
		f := session.Finding{Code: "slow_response", ItemID: items[i].ID, Turn: session.Opt[int]{V: i, Set: true}, Deduction: 0.5, Message: fmt.Sprint("turn ", i, " slow")}
		if i%20 == 0 {
			f.Code, f.Deduction = "interrupted_agent", 2
			cut = append(cut, f)
			continue
		}
		slow = append(slow, f)
	}
	h := testHandler(t, "")
	h.src.Scorecard = func(context.Context, uint64) (session.Scorecard, error) {
		return session.Scorecard{Components: []session.Component{{Name: "response_latency", Findings: slow}, {Name: "turn_handling", Findings: cut}}}, nil
	}
	h.src.Items = func(context.Context, string) ([]scoring.Item, error) { return items, nil }
	body := get(h, "127.0.0.1:1", "/ui/session?key=RM_d/AJ", nil).Body.String()
	if n := strings.Count(body, `<tr class="finding"`); n != 2 {
		t.Fatalf("%d finding rows for 2 codes", n)
	}
	for _, want := range []string{
		`data-code="slow_response"><td>response_latency</td><td>slow_response</td><td class="num count">90</td><td class="num">−45</td>`,
		`data-code="interrupted_agent"><td>turn_handling</td><td>interrupted_agent</td><td class="num count">10</td><td class="num">−20</td>`,
		`and 50 more`, `href="#turn-0">0</a>`, `100 findings of 2 kinds`,
	} {
		if !strings.Contains(body, want) {
			t.Errorf("session page lacks %q", want)
		}
	}
	// The costlier group (by total) comes first.
	if strings.Index(body, `data-code="slow_response"`) > strings.Index(body, `data-code="interrupted_agent"`) {
		t.Error("groups not ordered by total deduction")
	}
}

// TestIngestionView: two processes' reports merge (counts summed, the
// latest last time, a refusal's last key, waits deduplicated), a
// configured key never seen shows "never", and the page and its JSON say so.
func TestIngestionView(t *testing.T) {
	t0 := time.Date(2026, 12, 4, 10, 0, 0, 0, time.UTC)
	reports := []wire.IngestionReport{
		{Process: "a/1", Roles: "ingest", Since: t0, Accepted: []wire.IngestAccepted{{Endpoint: "webhook", APIKey: "APIprod", Count: 3, Last: t0.Add(time.Minute)}},
			Refused: []wire.IngestRefused{{Endpoint: "webhook", Reason: "bad_signature", Count: 2, Last: t0.Add(2 * time.Minute), LastKey: "APIprod"}}},
		{Process: "b/2", Roles: "ingest", Since: t0, Accepted: []wire.IngestAccepted{{Endpoint: "webhook", APIKey: "APIprod", Count: 4, Last: t0.Add(3 * time.Minute)}},
			Refused: []wire.IngestRefused{{Endpoint: "webhook", Reason: "bad_signature", Count: 1, Last: t0, LastKey: "APIold"}}},
		{Process: "c/3", Roles: "worker", Since: t0, Waiting: []wire.IngestWaiting{{Key: "RM_x.AJ_y", Since: t0}}, WaitingTotal: 1},
		{Process: "d/4", Roles: "worker", Since: t0, Waiting: []wire.IngestWaiting{{Key: "RM_x.AJ_y", Since: t0.Add(time.Second)}}, WaitingTotal: 1},
	}
	v := MergeIngestion(reports, []string{"APIprod", "APIstaging"})
	find := func(endpoint, key string) wire.IngestAccepted {
		for _, a := range v.Accepted {
			if a.Endpoint == endpoint && a.APIKey == key {
				return a
			}
		}
		t.Fatalf("no row for %s %s", endpoint, key)
		return wire.IngestAccepted{}
	}
	if a := find("webhook", "APIprod"); a.Count != 7 || !a.Last.Equal(t0.Add(3*time.Minute)) {
		t.Errorf("merged webhook row %+v", a)
	}
	if a := find("upload", "APIstaging"); a.Count != 0 {
		t.Errorf("a key never seen: %+v", a)
	}
	if len(v.Refused) != 1 || v.Refused[0].Count != 3 || v.Refused[0].LastKey != "APIprod" {
		t.Errorf("refused %+v", v.Refused)
	}
	if len(v.Waiting) != 1 || v.WaitingTotal != 1 || !v.Waiting[0].Since.Equal(t0) {
		t.Errorf("waiting %+v (%d)", v.Waiting, v.WaitingTotal)
	}

	h := testHandler(t, "")
	h.now = func() time.Time { return t0.Add(5 * time.Minute) }
	h.src.Ingestion = func(context.Context) ([]wire.IngestionReport, error) { return reports, nil }
	h.src.APIKeys = []string{"APIprod", "APIstaging"}
	body := get(h, "127.0.0.1:1", "/ui/ingestion", nil).Body.String()
	for _, want := range []string{`data-endpoint="webhook" data-key="APIprod"><td>webhook</td><td>APIprod</td><td class="num">7</td><td class="last">2m0s ago`,
		`data-endpoint="webhook" data-key="APIstaging"><td>webhook</td><td>APIstaging</td><td class="num">0</td><td class="last"><span class="warn">never`,
		`data-reason="bad_signature"`, `RM_x.AJ_y</td><td>5m0s`} {
		if !strings.Contains(body, want) {
			t.Errorf("ingestion page lacks %q", want)
		}
	}
	var got IngestionView
	if err := json.Unmarshal(get(h, "127.0.0.1:1", "/ui/ingestion?format=json", nil).Body.Bytes(), &got); err != nil || len(got.Processes) != 4 {
		t.Errorf("JSON: %v %+v", err, got)
	}
	h.src.Ingestion = func(context.Context) ([]wire.IngestionReport, error) { return nil, nil }
	if body := get(h, "127.0.0.1:1", "/ui/ingestion", nil).Body.String(); !strings.Contains(body, "no lkscore process answered") {
		t.Error("an empty view does not say why")
	}
}

// TestDeadLetterSearch: a session key finds its dead letter with the reason
// and the replay command; a search of the sessions that matches no
// scorecard points at the dead letters that match; the session page's 404
// says where to look.
func TestDeadLetterSearch(t *testing.T) {
	h := testHandler(t, "")
	letters := []wire.DeadLetter{{Seq: 12, Stage: "score", Error: "chat_history: item 3: unexpected EOF", SessionKey: "RM_broken/AJ_1"}}
	var asked []string
	h.src.SearchDeadLetters = func(_ context.Context, q string) (DeadLetterResult, error) {
		asked = append(asked, q)
		var out DeadLetterResult
		for _, l := range letters {
			if strings.Contains(strings.ToLower(l.SessionKey), strings.ToLower(q)) {
				out.Letters = append(out.Letters, l)
			}
		}
		out.Looked = len(letters)
		return out, nil
	}
	body := get(h, "127.0.0.1:1", "/ui/deadletters?q=RM_broken/AJ_1", nil).Body.String()
	for _, want := range []string{`data-seq="12"`, "chat_history: item 3: unexpected EOF", "lkscore dlq replay --seq 12"} {
		if !strings.Contains(body, want) {
			t.Errorf("dead-letter page lacks %q", want)
		}
	}
	if body := get(h, "127.0.0.1:1", "/ui/sessions?q=rm_broken", nil).Body.String(); !strings.Contains(body, `id="search-dead-letters"`) ||
		!strings.Contains(body, "/ui/deadletters?q=rm_broken") {
		t.Errorf("sessions search without a scorecard does not point at its dead letter")
	}
	if body := get(h, "127.0.0.1:1", "/ui/sessions?q=RM_d", nil).Body.String(); strings.Contains(body, `id="search-dead-letters"`) {
		t.Errorf("a search that matched scorecards shows dead letters")
	}
	if rec := get(h, "127.0.0.1:1", "/ui/session?key=RM_broken/AJ_1", nil); rec.Code != 404 || !strings.Contains(rec.Body.String(), "/ui/deadletters?q=RM_broken%2FAJ_1") {
		t.Errorf("session 404: %d %s", rec.Code, rec.Body.String())
	}
	if len(asked) != 2 {
		t.Errorf("searched the dead letters %d times: %q", len(asked), asked)
	}
}

// TestProjectDimension: with sessions signed by two API keys (two LiveKit
// projects), the overview breaks them down per project and the filters
// offer a project; one project alone shows neither.
func TestProjectDimension(t *testing.T) {
	idx := NewIndex(100, "version:")
	now := time.Now()
	for i, p := range []string{"APIprod", "APIprod", "APIprod", "APIstaging"} {
		v := session.Pass
		if i == 1 {
			v = session.Fail
		}
		idx.add(Entry{Seq: uint64(i + 1), At: now, Key: fmt.Sprintf("RM_%d/AJ", i), AgentName: "a" + p, Verdict: v, Score: 80, Project: p})
	}
	h := testHandler(t, "")
	h.index = idx
	body := get(h, "127.0.0.1:1", "/ui", nil).Body.String()
	if n := strings.Count(body, `<tr class="project">`); n != 2 || !strings.Contains(body, `id="project-filter"`) {
		t.Fatalf("overview: %d project rows, filter %v", n, strings.Contains(body, `id="project-filter"`))
	}
	if !strings.Contains(body, `project=APIprod">APIprod</a></td><td class="num">3</td><td class="num">80.0</td><td class="num">33%</td>`) {
		t.Errorf("APIprod's row is wrong:\n%s", body[strings.Index(body, `id="projects"`):][:600])
	}
	if body := get(h, "127.0.0.1:1", "/ui/sessions?project=APIstaging", nil).Body.String(); !strings.Contains(body, `id="matching">1 sessions`) {
		t.Errorf("project=APIstaging does not select its one session")
	}
	one := NewIndex(100, "version:")
	one.add(Entry{Seq: 1, At: now, Key: "RM_x/AJ", Verdict: session.Pass, Project: "APIprod"})
	h.index = one
	if body := get(h, "127.0.0.1:1", "/ui", nil).Body.String(); strings.Contains(body, `id="projects"`) || strings.Contains(body, `id="project-filter"`) {
		t.Error("one project: no breakdown or filter expected")
	}
}

// TestEmptyDashboardSaysHowToSendData (issue 71): with no scorecard held,
// the overview says where LiveKit's webhooks and the agents' uploads go
// (the ingest listener's port on the host the browser asked) and how to
// send five test sessions; with scorecards it does not.
func TestEmptyDashboardSaysHowToSendData(t *testing.T) {
	page := func(idx *Index) string {
		src := testHandler(t, "").src // the test sources, with the ingest listener's address
		src.Listen = ":8080"
		h, err := NewHandler(idx, NewAlertIndex(10), src, Access{TrustLoopback: true, Hosts: []string{"lk.example"}}.NewGuard(),
			slog.New(slog.NewTextHandler(io.Discard, nil)))
		if err != nil {
			t.Fatal(err)
		}
		req := httptest.NewRequest(http.MethodGet, "http://lk.example:9090/ui", nil)
		req.RemoteAddr = "127.0.0.1:5000"
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		if rec.Code != http.StatusOK {
			t.Fatalf("GET /ui: %d %s", rec.Code, rec.Body.String())
		}
		return rec.Body.String()
	}
	empty := page(NewIndex(10, "version:"))
	for _, want := range []string{`id="get-data-in"`, "http://lk.example:8080/webhook", "LIVEKIT_OBSERVABILITY_URL=http://lk.example:8080",
		"lkscore bench --sessions 5 --url http://lk.example:8080"} {
		if !strings.Contains(empty, want) {
			t.Errorf("the empty dashboard does not say %q", want)
		}
	}
	held := NewIndex(10, "version:")
	held.add(Entry{Seq: 1, At: time.Now(), Key: "RM_a/AJ", Verdict: "pass", Score: 90})
	if strings.Contains(page(held), `id="get-data-in"`) {
		t.Error("a dashboard with a scorecard still says it has none")
	}
}
