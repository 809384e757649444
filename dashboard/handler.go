package dashboard

import (
	"bytes"
	"context"
	"embed"
	"encoding/csv"
	"encoding/json"
	"errors"
	"fmt"
	"html/template"
	"io"
	"log/slog"
	"mime"
	"net/http"
	"net/url"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/lkscore/lkscore/config"
	"github.com/lkscore/lkscore/regress"
	"github.com/lkscore/lkscore/scoring"
	"github.com/lkscore/lkscore/session"
	"github.com/lkscore/lkscore/wire"
)

//go:embed templates/*.html
var templateFS embed.FS

// Sources is what the dashboard reads besides its index.
type Sources struct {
	// Scorecard returns the full scorecard at a results-stream sequence.
	Scorecard func(ctx context.Context, seq uint64) (session.Scorecard, error)
	// Items returns a session's chat items, for its timeline; an error
	// says why there is none (not stored, gone, unreadable).
	Items func(ctx context.Context, sessionKey string) ([]scoring.Item, error)
	// DeadLetters counts the dead letters waiting.
	DeadLetters func(ctx context.Context) (int, error)
	// NotSelected counts the sessions located and not scored by
	// configuration (pipeline.close_reasons), by close reason; nil: none.
	NotSelected func(ctx context.Context) (map[string]uint64, error)
	// Steps is this process's per-step latency and the settler's backlog
	// (from its own /metrics); nil: not shown.
	Steps func() PipelineSteps
	// Recording opens one stored object of a session's upload
	// (chat_history.json, recording.ogg, header.binpb).
	Recording func(ctx context.Context, sessionKey, object string) (io.ReadCloser, error)
	// Audio says whether the session's recording.ogg can be played here,
	// and if not, why (redacted, dropped, never recorded).
	Audio func(ctx context.Context, sessionKey string) (ok bool, why string)
	// SearchDeadLetters finds dead letters by session key (or subject,
	// stage, error), newest first; nil: not searchable here.
	SearchDeadLetters func(ctx context.Context, query string) (DeadLetterResult, error)
	// Ingestion asks every running process what its ingest saw; nil: not
	// shown. APIKeys are the configured keys' ids, so that one never seen
	// shows as such.
	Ingestion func(ctx context.Context) ([]wire.IngestionReport, error)
	APIKeys   []string
	// Case exports a session as a case archive (lkscore case export
	// --archive: the same bytes) and names its file; nil: no export.
	Case func(ctx context.Context, sessionKey string) (data []byte, filename string, err error)
	// Listen is the ingest listener's address (listen): an empty
	// dashboard says where to send webhooks and uploads.
	Listen string
}

// DeadLetterResult is a dead-letter search: what it found, how many it
// looked at, and whether older ones were left unread.
type DeadLetterResult struct {
	Letters []wire.DeadLetter
	Looked  int
	More    bool
}

// Handler serves /ui, /ui/sessions, /ui/session, /ui/alerts, /ui/export
// and /ui/recording.
type Handler struct {
	index  *Index
	alerts *AlertIndex
	src    Sources
	guard  http.Handler // serve behind the process's one Guard
	log    *slog.Logger
	tmpl   *template.Template
	now    func() time.Time
}

// NewHandler serves the dashboard to whom guard lets in (the process's one
// Guard, which pprof shares).
func NewHandler(index *Index, alerts *AlertIndex, src Sources, guard *Guard, log *slog.Logger) (*Handler, error) {
	if index == nil || alerts == nil || src.Scorecard == nil || src.Items == nil || src.DeadLetters == nil || src.Recording == nil ||
		src.Audio == nil || guard == nil || log == nil {
		return nil, errors.New("dashboard: indexes, sources, guard and log are required")
	}
	t, err := template.New("").Funcs(template.FuncMap{
		"fmtTime": func(t time.Time) string { return t.UTC().Format("2006-01-02 15:04:05") },
		"score":   func(f float64) string { return fmt.Sprintf("%.1f", f) },
		"join":    strings.Join,
		"q":       func(k, v string) template.URL { return template.URL(k + "=" + template.URLQueryEscaper(v)) },
		"ms": func(v float64) string {
			if v == Missing {
				return "–"
			}
			return fmt.Sprintf("%.0f", v)
		},
		"pct":   func(f float64) string { return fmt.Sprintf("%.0f%%", 100*f) },
		"dur":   func(d time.Duration) string { return d.Round(time.Second).String() },
		"num":   func(f float64) string { return strconv.FormatFloat(f, 'g', 4, 64) },
		"turn":  func(o session.Opt[int]) string { return turnID(o) },
		"share": shareOf,
	}).ParseFS(templateFS, "templates/*.html")
	if err != nil {
		return nil, fmt.Errorf("dashboard templates: %w", err)
	}
	h := &Handler{index: index, alerts: alerts, src: src, log: log, tmpl: t, now: time.Now}
	h.guard = guard.Wrap(http.HandlerFunc(h.serve))
	return h, nil
}

func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) { h.guard.ServeHTTP(w, r) }

// serve serves a request access let in.
func (h *Handler) serve(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		w.Header().Set("Allow", "GET")
		http.Error(w, "use GET", http.StatusMethodNotAllowed)
		return
	}
	var err error
	switch strings.TrimSuffix(r.URL.Path, "/") {
	case "/ui":
		err = h.overview(w, r)
	case "/ui/sessions":
		err = h.sessions(w, r)
	case "/ui/session":
		err = h.session(w, r)
	case "/ui/recording":
		err = h.recording(w, r)
	case "/ui/alerts":
		err = h.alertsPage(w, r)
	case "/ui/signals":
		err = h.signalsPage(w, r)
	case "/ui/ingestion":
		err = h.ingestionPage(w, r)
	case "/ui/deadletters":
		err = h.deadLettersPage(w, r)
	case "/ui/export":
		err = h.export(w, r)
	case "/ui/case":
		err = h.caseArchive(w, r)
	default:
		http.NotFound(w, r)
		return
	}
	if err != nil {
		h.log.Warn("dashboard", "path", r.URL.Path, "err", err)
		http.Error(w, err.Error(), http.StatusInternalServerError)
	}
}

func (h *Handler) filter(r *http.Request) (Filter, error) {
	q := r.URL.Query()
	f := Filter{Agent: q.Get("agent"), Version: q.Get("version"), ScoringVersion: q.Get("scoring_version"),
		CloseReason: q.Get("close_reason"), Verdict: q.Get("verdict"),
		Project: q.Get("project"), Code: q.Get("code"), Query: q.Get("q")}
	if s := q.Get("since"); s != "" {
		d, err := time.ParseDuration(s)
		if err != nil {
			return f, fmt.Errorf("since %q is not a duration (e.g. 24h)", s)
		}
		f.Since = h.now().Add(-d)
	}
	return f, nil
}

// page is what every template gets.
type page struct {
	Title    string
	Filter   Filter
	Since    string
	Window   int
	Held     int
	Agents   []string
	Versions []string
	// ScoringVersions are the scoring versions held.
	ScoringVersions []string
	// Projects are the API keys that signed the sessions held: a project
	// filter and breakdown appear when there are several.
	Projects []string
	Reasons  []string
	Verdicts []string
	Firing   int // alerts firing now, for the header
	// Query is the filter as a query string, for links that keep it.
	Query template.URL
}

func (h *Handler) page(r *http.Request, title string, f Filter, held int) page {
	firing, _ := h.alerts.Alerts("", 0, h.now())
	return page{Title: title, Filter: f, Since: r.URL.Query().Get("since"), Window: h.index.window, Held: held,
		Agents: h.index.Agents(), Versions: h.index.Versions(), ScoringVersions: h.index.ScoringVersions(), Projects: h.index.Projects(),
		Verdicts: []string{session.Pass, session.Warn, session.Fail, session.Unscored},
		Reasons:  config.CloseReasons(), Firing: len(firing), Query: filterQuery(r)}
}

// filterQuery is the request's filter parameters, re-encoded.
func filterQuery(r *http.Request) template.URL {
	q := url.Values{}
	for _, k := range []string{"agent", "version", "scoring_version", "close_reason", "verdict", "project", "code", "q", "since"} {
		if v := r.URL.Query().Get(k); v != "" {
			q.Set(k, v)
		}
	}
	return template.URL(q.Encode())
}

// render executes a template into a buffer first, so a failure is a clean
// 500 rather than half a page.
func (h *Handler) render(w http.ResponseWriter, name string, data any) error {
	var buf bytes.Buffer
	if err := h.tmpl.ExecuteTemplate(&buf, name, data); err != nil {
		return err
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	_, err := buf.WriteTo(w)
	return err
}

func (h *Handler) overview(w http.ResponseWriter, r *http.Request) error {
	f, err := h.filter(r)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return nil
	}
	entries, held := h.index.Select(f)
	dlq, derr := h.src.DeadLetters(r.Context())
	now := h.now()
	from := f.Since
	if from.IsZero() && len(entries) > 0 {
		from = entries[0].At
	}
	if from.IsZero() {
		from = now.Add(-time.Hour)
	}
	score := func(i int) func(*Entry) float64 { return func(e *Entry) float64 { return e.Components[i] } }
	scores := []series{{"overall (median)", func(e *Entry) float64 { return e.Score }, 0.5},
		{"turn handling", score(0), 0.5}, {"tool reliability", score(2), 0.5}, {"response latency", score(3), 0.5}}
	lat := []series{{"e2e p50", func(e *Entry) float64 { return e.E2EP50 }, 0.5}, {"e2e p95", func(e *Entry) float64 { return e.E2EP95 }, 0.95},
		{"heard p50", func(e *Entry) float64 { return e.HeardP50 }, 0.5}, {"heard p95", func(e *Entry) float64 { return e.HeardP95 }, 0.95}}
	firing, _ := h.alerts.Alerts(f.Agent, 0, now)
	mix, compared := scoringMix(entries)
	data := struct {
		page
		Ingest       string // where LiveKit and the agents send, for an empty dashboard
		Mix          VersionMix
		Sessions     int
		Unscored     int
		DeadLetters  int
		DLQError     string
		Volume       BarChart
		Bucket       string
		Scores       Trend
		Latency      Trend
		E2EHist      BarChart
		HeardHist    BarChart
		VerdictMix   BarChart
		ReasonMix    BarChart
		Codes        []CodeCount
		Rules        []RuleCount
		VersionRows  []VersionRow
		ProjectRows  []ProjectRow
		FiringAlerts []AlertEntry
		Worst        []Entry
		NotSelected  []ReasonCount
		NSError      string
		Steps        PipelineSteps
	}{page: h.page(r, "Overview", f, held), Ingest: ingestURL(r, h.src.Listen), Mix: mix, Sessions: len(entries), DeadLetters: dlq,
		Scores: trend(compared, from, now, scores, 100, ""), Latency: trend(entries, from, now, lat, 0, " ms"),
		E2EHist:    histogram(entries, func(e *Entry) float64 { return e.E2EP50 }, 250, 3000, " ms", nil),
		HeardHist:  histogram(entries, func(e *Entry) float64 { return e.HeardP50 }, 250, 3000, " ms", nil),
		VerdictMix: verdictMix(entries), ReasonMix: reasonMix(entries), Codes: topCodes(entries, 10),
		Rules: ruleCounts(entries), VersionRows: versions(entries), ProjectRows: projects(entries), FiringAlerts: firing, Worst: worst(compared, 10)}
	for _, e := range entries {
		if e.Verdict == session.Unscored {
			data.Unscored++
		}
	}
	if h.src.Steps != nil {
		data.Steps = h.src.Steps()
	}
	if h.src.NotSelected != nil {
		counts, err := h.src.NotSelected(r.Context())
		if err != nil {
			data.NSError = err.Error()
		}
		for reason, n := range counts {
			data.NotSelected = append(data.NotSelected, ReasonCount{Reason: reason, Sessions: n})
		}
		sort.Slice(data.NotSelected, func(i, j int) bool { return data.NotSelected[i].Reason < data.NotSelected[j].Reason })
	}
	data.Volume, data.Bucket = volume(entries, from, now)
	if derr != nil {
		data.DLQError = derr.Error()
	}
	return h.render(w, "overview.html", data)
}

// PipelineSteps is how long sessions spent between the pipeline's steps in
// this process, and the settler's backlog.
type PipelineSteps struct {
	Steps      []StepStat
	Backlog    float64 // sessions due and not yet published
	BacklogAge float64 // seconds the most overdue one has waited
}

// StepStat is one step's latency: p50 and p99 as the histogram's bucket
// upper bounds, in ms.
type StepStat struct {
	Step         string
	Sessions     uint64
	P50Ms, P99Ms float64
}

// ReasonCount is how many sessions had one close reason.
type ReasonCount struct {
	Reason   string
	Sessions uint64
}

// sessionsLimit bounds the sessions page; the export has them all.
const sessionsLimit = 500

func (h *Handler) sessions(w http.ResponseWriter, r *http.Request) error {
	f, err := h.filter(r)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return nil
	}
	entries, held := h.index.Select(f)
	sortBy := r.URL.Query().Get("sort")
	limit := 100
	if v, err := strconv.Atoi(r.URL.Query().Get("limit")); err == nil && v > 0 {
		limit = min(v, sessionsLimit)
	}
	mix, compared := scoringMix(entries)
	rows := worst(compared, limit) // lowest scores within one scoring version
	if sortBy == "newest" {
		rows, mix = newest(entries, limit), VersionMix{}
	}
	data := struct {
		page
		Mix      VersionMix
		Matching int
		Sort     string
		Worst    []Entry
		// DeadLetters are the search's matches among the dead letters,
		// when no scorecard matched: a session that was never scored.
		DeadLetters []wire.DeadLetter
	}{page: h.page(r, "Sessions", f, held), Mix: mix, Matching: len(entries), Sort: sortBy, Worst: rows}
	if f.Query != "" && len(entries) == 0 && h.src.SearchDeadLetters != nil {
		if found, err := h.src.SearchDeadLetters(r.Context(), f.Query); err == nil {
			data.DeadLetters = found.Letters
		}
	}
	return h.render(w, "sessions.html", data)
}

// export writes the filtered sessions, newest first, as CSV or JSON.
func (h *Handler) export(w http.ResponseWriter, r *http.Request) error {
	f, err := h.filter(r)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return nil
	}
	entries, _ := h.index.Select(f)
	rows := newest(entries, len(entries))
	switch format := r.URL.Query().Get("format"); format {
	case "json":
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Content-Disposition", `attachment; filename="lkscore-sessions.json"`)
		if rows == nil {
			rows = []Entry{}
		}
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		return enc.Encode(rows)
	case "csv", "":
		w.Header().Set("Content-Type", "text/csv; charset=utf-8")
		w.Header().Set("Content-Disposition", `attachment; filename="lkscore-sessions.csv"`)
		return writeCSV(w, rows)
	default:
		http.Error(w, fmt.Sprintf("format %q is not csv or json", format), http.StatusBadRequest)
		return nil
	}
}

// csvText keeps a text cell from being read as a formula by a spreadsheet
// (OWASP's CSV injection advice): a cell starting with =, +, -, @, a tab or
// a carriage return gets a leading apostrophe. Room names, agent names and
// versions are chosen by whoever runs the agents.
func csvText(s string) string {
	if s != "" && strings.ContainsRune("=+-@\t\r", rune(s[0])) {
		return "'" + s
	}
	return s
}

func writeCSV(w io.Writer, rows []Entry) error {
	cw := csv.NewWriter(w)
	_ = cw.Write([]string{"scored_at", "session_key", "room_id", "room_name", "job_id", "agent_name", "version", "verdict", "score",
		"turn_handling", "transcript_integrity", "tool_reliability", "response_latency", "close_reason", "close_reason_source",
		"e2e_latency_p50_ms", "e2e_latency_p95_ms", "heard_latency_p50_ms", "heard_latency_p95_ms", "finding_codes", "scoring_version"})
	f := func(v float64) string {
		if v == Missing {
			return ""
		}
		return strconv.FormatFloat(v, 'f', -1, 64)
	}
	c := csvText
	for _, e := range rows {
		_ = cw.Write([]string{e.At.UTC().Format(time.RFC3339Nano), c(e.Key), c(e.RoomID), c(e.RoomName), c(e.JobID), c(e.AgentName),
			c(e.Version), e.Verdict,
			f(e.Score), f(e.Components[0]), f(e.Components[1]), f(e.Components[2]), f(e.Components[3]), e.CloseReason, e.Source,
			f(e.E2EP50), f(e.E2EP95), f(e.HeardP50), f(e.HeardP95), strings.Join(e.Codes, " "), c(e.ScoringVersion)})
	}
	cw.Flush()
	return cw.Error()
}

func (h *Handler) alertsPage(w http.ResponseWriter, r *http.Request) error {
	agent := r.URL.Query().Get("agent")
	firing, resolved := h.alerts.Alerts(agent, 50, h.now())
	entries, _ := h.index.Select(Filter{Agent: agent})
	return h.render(w, "alerts.html", struct {
		page
		Agent     string
		FiringNow []AlertEntry
		Resolved  []AlertEntry
		Readiness readiness
	}{page: h.page(r, "Alerts", Filter{Agent: agent}, 0), Agent: agent, FiringNow: firing, Resolved: resolved,
		Readiness: readinessOf(entries, h.index.versionTag)})
}

func (h *Handler) session(w http.ResponseWriter, r *http.Request) error {
	key := r.URL.Query().Get("key")
	e, ok := h.index.Lookup(key)
	if !ok {
		http.Error(w, fmt.Sprintf("session %q is not among the last %d scorecards; if it was dead-lettered, /ui/deadletters?q=%s finds it",
			key, h.index.window, url.QueryEscape(key)), http.StatusNotFound)
		return nil
	}
	sc, err := h.src.Scorecard(r.Context(), e.Seq)
	if err != nil {
		return fmt.Errorf("scorecard %s: %w", key, err)
	}
	items, ierr := h.src.Items(r.Context(), key)
	meta := len(sc.Inputs) > 0 && !slices.Contains(sc.Inputs, session.InputRecording)
	var playable bool
	var noAudio string
	if meta {
		noAudio = "metadata-only: no recording was uploaded"
	} else {
		playable, noAudio = h.src.Audio(r.Context(), key)
	}
	data := struct {
		page
		Entry      Entry
		Card       session.Scorecard
		Findings   []findingRow
		Groups     []findingGroup
		Timeline   Timeline
		Heard      Timeline
		Transcript []transcriptRow
		NoItems    string
		Raw        string
		// MetadataOnly: scored from spans and logs, nothing was uploaded.
		MetadataOnly bool
		Playable     bool
		NoAudio      string
		CaseExport   bool
	}{page: h.page(r, "Session "+key, Filter{}, 0), Entry: e, Card: sc, Findings: findings(sc), CaseExport: h.src.Case != nil,
		Timeline: timeline(items), Heard: heardTimeline(sc.Audio),
		Transcript: transcript(items, sc), MetadataOnly: meta, Playable: playable, NoAudio: noAudio}
	for i := range data.Findings {
		tl := data.Timeline
		if strings.HasPrefix(data.Findings[i].Code, "heard_") {
			tl = data.Heard
		}
		data.Findings[i].Anchor = anchor(data.Findings[i].Finding, items, tl)
	}
	data.Groups = groupFindings(data.Findings)
	if ierr != nil {
		data.NoItems = ierr.Error()
	}
	raw, _ := json.MarshalIndent(sc, "", "  ")
	data.Raw = string(raw)
	return h.render(w, "session.html", data)
}

// caseArchive serves a session as a case archive (docs/cases.md), the
// bytes `lkscore case export --archive` writes.
func (h *Handler) caseArchive(w http.ResponseWriter, r *http.Request) error {
	key := r.URL.Query().Get("key")
	if h.src.Case == nil {
		http.Error(w, "case export is not available here", http.StatusNotFound)
		return nil
	}
	if _, ok := h.index.Lookup(key); !ok {
		http.Error(w, fmt.Sprintf("session %q is not among the last %d scorecards", key, h.index.window), http.StatusNotFound)
		return nil
	}
	data, name, err := h.src.Case(r.Context(), key)
	if err != nil {
		return fmt.Errorf("case %s: %w", key, err)
	}
	w.Header().Set("Content-Type", "application/x-tar")
	w.Header().Set("Content-Disposition", mime.FormatMediaType("attachment", map[string]string{"filename": name}))
	_, err = w.Write(data)
	return err
}

// recordingObjects are the objects of an upload the dashboard serves, with
// their content types.
var recordingObjects = map[string]string{"chat_history.json": "application/json", "recording.ogg": "audio/ogg",
	"header.binpb": "application/protobuf"}

// recording serves one object of a session's stored upload, with range
// requests (an <audio> element seeks with them), streamed from the store:
// nothing is held whole in memory.
func (h *Handler) recording(w http.ResponseWriter, r *http.Request) error {
	key, object := r.URL.Query().Get("key"), r.URL.Query().Get("object")
	ct, ok := recordingObjects[object]
	if _, known := h.index.Lookup(key); !known || !ok {
		http.Error(w, "unknown session or object", http.StatusNotFound)
		return nil
	}
	rc, err := h.src.Recording(r.Context(), key, object)
	if err != nil {
		http.Error(w, err.Error(), http.StatusNotFound)
		return nil
	}
	defer rc.Close()
	w.Header().Set("Content-Type", ct)
	w.Header().Set("Content-Disposition", fmt.Sprintf("inline; filename=%q", object))
	w.Header().Set("Cache-Control", "private, max-age=300")
	if rs, ok := rc.(io.ReadSeeker); ok { // a local file
		http.ServeContent(w, r, object, time.Time{}, rs)
		return nil
	}
	if sh, ok := rc.(interface{ SizeHint() int64 }); ok && sh.SizeHint() >= 0 { // S3: ranges by skipping ahead
		http.ServeContent(w, r, object, time.Time{}, &forwardSeeker{r: rc, size: sh.SizeHint()})
		return nil
	}
	w.Header().Set("Accept-Ranges", "none")
	_, err = io.Copy(w, rc)
	return err
}

// forwardSeeker lets http.ServeContent serve one range of a stream of
// known size: seeking only moves a position, and reading skips ahead to it.
// It cannot go back (a request for several ranges out of order fails).
type forwardSeeker struct {
	r         io.Reader
	size      int64
	pos, read int64 // where the next Read starts; how much of r was consumed
}

func (f *forwardSeeker) Seek(offset int64, whence int) (int64, error) {
	switch whence {
	case io.SeekStart:
	case io.SeekCurrent:
		offset += f.pos
	case io.SeekEnd:
		offset += f.size
	}
	if offset < 0 {
		return 0, errors.New("seek before the start")
	}
	f.pos = offset
	return offset, nil
}

func (f *forwardSeeker) Read(b []byte) (int, error) {
	if f.pos < f.read {
		return 0, errors.New("the stored object cannot be read backwards")
	}
	if skip := f.pos - f.read; skip > 0 {
		n, err := io.CopyN(io.Discard, f.r, skip)
		f.read += n
		if err != nil {
			return 0, err
		}
	}
	n, err := f.r.Read(b)
	f.read += int64(n)
	f.pos = f.read
	return n, err
}

// newest returns the n latest entries, latest first.
func newest(entries []Entry, n int) []Entry {
	out := make([]Entry, 0, min(n, len(entries)))
	for i := len(entries) - 1; i >= 0 && len(out) < n; i-- {
		out = append(out, entries[i])
	}
	return out
}

// worst returns the n lowest-scored entries, lowest first, ties by time.
func worst(entries []Entry, n int) []Entry {
	out := append([]Entry(nil), entries...)
	out = slices.DeleteFunc(out, func(e Entry) bool { return e.Score == Missing })
	sort.SliceStable(out, func(i, j int) bool {
		if out[i].Score != out[j].Score {
			return out[i].Score < out[j].Score
		}
		return out[i].At.After(out[j].At)
	})
	return out[:min(n, len(out))]
}

type findingRow struct {
	Component string
	session.Finding
	// Anchor is where its turn is on the page (timeline span or transcript row).
	Anchor string
}

// findings lists every finding that cost points, largest deduction first.
func findings(sc session.Scorecard) []findingRow {
	var out []findingRow
	for _, c := range sc.Components {
		for _, f := range c.Findings {
			out = append(out, findingRow{Component: c.Name, Finding: f})
		}
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].Deduction > out[j].Deduction })
	return out
}

// readiness is what the alerts page says while nothing has fired: alerts
// compare an agent's versions, so they need sessions that name their
// version, and enough of them per version.
type readiness struct {
	Sessions, Versioned int
	VersionTag          string
	MostPerVersion      int    // the most sessions any one agent version has in view
	Busiest             string // that agent version
}

func readinessOf(entries []Entry, versionTag string) readiness {
	r := readiness{Sessions: len(entries), VersionTag: versionTag}
	per := map[string]int{}
	for _, e := range entries {
		if e.Version == "" || e.Version == regress.Unknown {
			continue
		}
		r.Versioned++
		k := e.AgentName + " " + e.Version
		if per[k]++; per[k] > r.MostPerVersion || (per[k] == r.MostPerVersion && k < r.Busiest) {
			r.MostPerVersion, r.Busiest = per[k], k
		}
	}
	return r
}
