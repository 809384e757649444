package dashboard

import (
	"bytes"
	"context"
	"crypto/subtle"
	"embed"
	"encoding/json"
	"errors"
	"fmt"
	"html/template"
	"io"
	"log/slog"
	"net"
	"net/http"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/lkscore/lkscore/config"
	"github.com/lkscore/lkscore/scoring"
)

//go:embed templates/*.html
var templateFS embed.FS

// Sources is what the dashboard reads besides its index.
type Sources struct {
	// Scorecard returns the full scorecard at a results-stream sequence.
	Scorecard func(ctx context.Context, seq uint64) (scoring.Scorecard, error)
	// Items returns a session's chat items, for its timeline; an error
	// says why there is none (not stored, gone, unreadable).
	Items func(ctx context.Context, sessionKey string) ([]scoring.Item, error)
	// DeadLetters counts the dead letters waiting.
	DeadLetters func(ctx context.Context) (int, error)
	// Recording opens one stored object of a session's upload
	// (chat_history.json, recording.ogg, header.binpb).
	Recording func(ctx context.Context, sessionKey, object string) (io.ReadCloser, error)
}

// Handler serves /ui, /ui/sessions and /ui/session.
type Handler struct {
	index *Index
	src   Sources
	token string
	log   *slog.Logger
	tmpl  *template.Template
	now   func() time.Time
}

// NewHandler serves the dashboard. A request from off loopback needs the
// token (Authorization: Bearer, or ?token=); with no token configured, only
// loopback clients are served.
func NewHandler(index *Index, src Sources, token string, log *slog.Logger) (*Handler, error) {
	if index == nil || src.Scorecard == nil || src.Items == nil || src.DeadLetters == nil || src.Recording == nil || log == nil {
		return nil, errors.New("dashboard: index, sources and log are required")
	}
	t, err := template.New("").Funcs(template.FuncMap{
		"fmtTime": func(t time.Time) string { return t.UTC().Format("2006-01-02 15:04:05") },
		"score":   func(f float64) string { return fmt.Sprintf("%.1f", f) },
		"join":    strings.Join,
		"q":       func(k, v string) template.URL { return template.URL(k + "=" + template.URLQueryEscaper(v)) },
	}).ParseFS(templateFS, "templates/*.html")
	if err != nil {
		return nil, fmt.Errorf("dashboard templates: %w", err)
	}
	return &Handler{index: index, src: src, token: token, log: log, tmpl: t, now: time.Now}, nil
}

func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if !h.allowed(r) {
		http.Error(w, "the dashboard needs a token from off loopback (dashboard.token)", http.StatusForbidden)
		return
	}
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
	default:
		http.NotFound(w, r)
		return
	}
	if err != nil {
		h.log.Warn("dashboard", "path", r.URL.Path, "err", err)
		http.Error(w, err.Error(), http.StatusInternalServerError)
	}
}

func (h *Handler) allowed(r *http.Request) bool {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err == nil {
		if ip := net.ParseIP(host); ip != nil && ip.IsLoopback() {
			return true
		}
	}
	if h.token == "" {
		return false
	}
	got := strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer ")
	if got == "" {
		got = r.URL.Query().Get("token")
	}
	return subtle.ConstantTimeCompare([]byte(got), []byte(h.token)) == 1
}

func (h *Handler) filter(r *http.Request) (Filter, error) {
	q := r.URL.Query()
	f := Filter{Agent: q.Get("agent"), CloseReason: q.Get("close_reason"), Verdict: q.Get("verdict")}
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
	Reasons  []string
	Verdicts []string
}

func (h *Handler) page(r *http.Request, title string, f Filter, held int) page {
	return page{Title: title, Filter: f, Since: r.URL.Query().Get("since"), Window: h.index.window, Held: held,
		Agents: h.index.Agents(), Verdicts: []string{scoring.Pass, scoring.Warn, scoring.Fail},
		Reasons: config.CloseReasons()}
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
	data := struct {
		page
		Sessions    int
		DeadLetters int
		DLQError    string
		PerHour     BarChart
		VerdictMix  BarChart
		ReasonMix   BarChart
		Components  LineChart
		Worst       []Entry
	}{page: h.page(r, "Overview", f, held), Sessions: len(entries), DeadLetters: dlq,
		PerHour: perHour(entries), VerdictMix: verdictMix(entries), ReasonMix: reasonMix(entries),
		Components: componentsOverTime(entries), Worst: worst(entries, 10)}
	if derr != nil {
		data.DLQError = derr.Error()
	}
	return h.render(w, "overview.html", data)
}

func (h *Handler) sessions(w http.ResponseWriter, r *http.Request) error {
	f, err := h.filter(r)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return nil
	}
	entries, held := h.index.Select(f)
	return h.render(w, "sessions.html", struct {
		page
		Matching int
		Worst    []Entry
	}{page: h.page(r, "Worst sessions", f, held), Matching: len(entries), Worst: worst(entries, 100)})
}

func (h *Handler) session(w http.ResponseWriter, r *http.Request) error {
	key := r.URL.Query().Get("key")
	e, ok := h.index.Lookup(key)
	if !ok {
		http.Error(w, fmt.Sprintf("session %q is not among the last %d scorecards", key, h.index.window), http.StatusNotFound)
		return nil
	}
	sc, err := h.src.Scorecard(r.Context(), e.Seq)
	if err != nil {
		return fmt.Errorf("scorecard %s: %w", key, err)
	}
	items, ierr := h.src.Items(r.Context(), key)
	data := struct {
		page
		Entry    Entry
		Card     scoring.Scorecard
		Findings []findingRow
		Timeline Timeline
		Heard    Timeline
		NoItems  string
		Raw      string
		// MetadataOnly: scored from spans and logs, nothing was uploaded.
		MetadataOnly bool
	}{page: h.page(r, "Session "+key, Filter{}, 0), Entry: e, Card: sc, Findings: findings(sc), Timeline: timeline(items), Heard: heardTimeline(sc.Audio),
		MetadataOnly: len(sc.Inputs) > 0 && !slices.Contains(sc.Inputs, scoring.InputRecording)}
	if ierr != nil {
		data.NoItems = ierr.Error()
	}
	raw, _ := json.MarshalIndent(sc, "", "  ")
	data.Raw = string(raw)
	return h.render(w, "session.html", data)
}

// recordingObjects are the objects of an upload the dashboard serves, with
// their content types.
var recordingObjects = map[string]string{"chat_history.json": "application/json", "recording.ogg": "audio/ogg",
	"header.binpb": "application/protobuf"}

// recording streams one object of a session's stored upload.
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
	_, err = io.Copy(w, rc)
	return err
}

// worst returns the n lowest-scored entries, lowest first, ties by time.
func worst(entries []Entry, n int) []Entry {
	out := append([]Entry(nil), entries...)
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
	scoring.Finding
}

// findings lists every finding that cost points, largest deduction first.
func findings(sc scoring.Scorecard) []findingRow {
	var out []findingRow
	for _, c := range sc.Components {
		for _, f := range c.Findings {
			out = append(out, findingRow{Component: c.Name, Finding: f})
		}
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].Deduction > out[j].Deduction })
	return out
}
