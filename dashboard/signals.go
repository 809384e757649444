package dashboard

import (
	"cmp"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"

	"github.com/lkscore/lkscore/scoring"
)

// CoverageRow is one SDK release's sessions in the index: how many, and the
// share of them that had each signal (scoring.Signals).
type CoverageRow struct {
	SDK      string             `json:"sdk"`
	Version  string             `json:"sdk_version"`
	Sessions int                `json:"sessions"`
	Shares   map[string]float64 `json:"shares"`
	// Sources count where the close reason came from, most used first.
	Sources []SourceCount `json:"close_reason_sources"`
}

// SourceCount is one close reason source and its sessions.
type SourceCount struct {
	Source   string `json:"source"`
	Sessions int    `json:"sessions"`
}

// Coverage groups entries by SDK language and release: the day an SDK
// upgrade changes what lkscore receives, its row says so. Rows are sorted by
// language, then release, newest first; a session whose SDK no signal named
// is in the row "unknown".
func Coverage(entries []Entry) []CoverageRow {
	type key struct{ sdk, version string }
	rows := map[key]*CoverageRow{}
	sources := map[key]map[string]int{}
	for _, e := range entries {
		k := key{cmp.Or(e.SDK, "unknown"), e.SDKVersion}
		r := rows[k]
		if r == nil {
			r = &CoverageRow{SDK: k.sdk, Version: k.version, Shares: map[string]float64{}}
			rows[k], sources[k] = r, map[string]int{}
		}
		r.Sessions++
		for _, s := range e.Signals {
			r.Shares[s]++
		}
		sources[k][cmp.Or(e.Source, "absent")]++
	}
	out := make([]CoverageRow, 0, len(rows))
	for k, r := range rows {
		for s := range r.Shares {
			r.Shares[s] /= float64(r.Sessions)
		}
		for src, n := range sources[k] {
			r.Sources = append(r.Sources, SourceCount{src, n})
		}
		slices.SortFunc(r.Sources, func(a, b SourceCount) int {
			return cmp.Or(cmp.Compare(b.Sessions, a.Sessions), strings.Compare(a.Source, b.Source))
		})
		out = append(out, *r)
	}
	slices.SortFunc(out, func(a, b CoverageRow) int {
		return cmp.Or(strings.Compare(a.SDK, b.SDK), compareVersions(b.Version, a.Version))
	})
	return out
}

// compareVersions orders dotted releases numerically where they are numbers
// ("1.10.0" after "1.9.0").
func compareVersions(a, b string) int {
	as, bs := strings.Split(a, "."), strings.Split(b, ".")
	for i := range min(len(as), len(bs)) {
		x, errx := strconv.Atoi(as[i])
		y, erry := strconv.Atoi(bs[i])
		if c := cmp.Compare(x, y); errx == nil && erry == nil && c != 0 {
			return c
		}
		if c := strings.Compare(as[i], bs[i]); (errx != nil || erry != nil) && c != 0 {
			return c
		}
	}
	return cmp.Compare(len(as), len(bs))
}

// signalsPage is /ui/signals: per SDK release, the share of sessions with
// each signal, over the index (or the filter's part of it).
func (h *Handler) signalsPage(w http.ResponseWriter, r *http.Request) error {
	f, err := h.filter(r)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return nil
	}
	entries, held := h.index.Select(f)
	rows := Coverage(entries)
	if r.URL.Query().Get("format") == "json" {
		w.Header().Set("Content-Type", "application/json")
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		return enc.Encode(rows)
	}
	return h.render(w, "signals.html", struct {
		page
		Rows    []CoverageRow
		Signals []string
	}{h.page(r, "Signals", f, held), rows, scoring.Signals})
}

// shareOf is a row's share of one signal, as the template prints it.
func shareOf(r CoverageRow, signal string) string { return fmt.Sprintf("%.0f%%", 100*r.Shares[signal]) }
