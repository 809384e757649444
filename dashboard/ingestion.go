package dashboard

import (
	"cmp"
	"encoding/json"
	"net"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/lkscore/lkscore/wire"
)

// IngestionView is what every running process's ingest saw, merged: "is my
// LiveKit webhook arriving, and are my agents' uploads and logs?"
type IngestionView struct {
	Processes []wire.IngestionReport `json:"processes"`
	// Accepted are the accepted requests per endpoint and API key, summed
	// over the processes, the last one the latest of theirs. A configured
	// key an endpoint never saw has a row with Count 0.
	Accepted []wire.IngestAccepted `json:"accepted"`
	Refused  []wire.IngestRefused  `json:"refused"`
	// Waiting are the sessions whose job ended and whose recording has not
	// come, the longest waiting first; WaitingTotal counts them all.
	Waiting      []wire.IngestWaiting `json:"waiting"`
	WaitingTotal int                  `json:"waiting_total"`
	// Error says why the view may be incomplete (no process answered).
	Error string `json:"error,omitempty"`
}

// ingestEndpoints are the endpoints every configured key should show on.
var ingestEndpoints = []string{"webhook", "upload", "otlp_logs", "otlp_traces"}

// MergeIngestion merges the processes' reports; keys are the configured API
// keys (ids only), so that one never seen shows as such.
func MergeIngestion(reports []wire.IngestionReport, keys []string) IngestionView {
	v := IngestionView{Processes: reports}
	type ak struct{ endpoint, key string }
	acc := map[ak]*wire.IngestAccepted{}
	ref := map[ak]*wire.IngestRefused{}
	waiting := map[string]time.Time{}
	for _, r := range reports {
		for _, a := range r.Accepted {
			m := acc[ak{a.Endpoint, a.APIKey}]
			if m == nil {
				m = &wire.IngestAccepted{Endpoint: a.Endpoint, APIKey: a.APIKey}
				acc[ak{a.Endpoint, a.APIKey}] = m
			}
			m.Count += a.Count
			if a.Last.After(m.Last) {
				m.Last = a.Last
			}
		}
		for _, f := range r.Refused {
			m := ref[ak{f.Endpoint, f.Reason}]
			if m == nil {
				m = &wire.IngestRefused{Endpoint: f.Endpoint, Reason: f.Reason}
				ref[ak{f.Endpoint, f.Reason}] = m
			}
			m.Count += f.Count
			if f.Last.After(m.Last) {
				m.Last, m.LastKey = f.Last, f.LastKey
			}
		}
		// Every worker's settler watches every session: the same waits,
		// told by each.
		for _, w := range r.Waiting {
			if at, ok := waiting[w.Key]; !ok || w.Since.Before(at) {
				waiting[w.Key] = w.Since
			}
		}
		v.WaitingTotal = max(v.WaitingTotal, r.WaitingTotal)
	}
	for _, k := range keys {
		for _, e := range ingestEndpoints {
			if acc[ak{e, k}] == nil {
				acc[ak{e, k}] = &wire.IngestAccepted{Endpoint: e, APIKey: k}
			}
		}
	}
	for _, a := range acc {
		v.Accepted = append(v.Accepted, *a)
	}
	for _, f := range ref {
		v.Refused = append(v.Refused, *f)
	}
	for k, at := range waiting {
		v.Waiting = append(v.Waiting, wire.IngestWaiting{Key: k, Since: at})
	}
	slices.SortFunc(v.Accepted, func(a, b wire.IngestAccepted) int {
		return cmp.Or(strings.Compare(a.Endpoint, b.Endpoint), strings.Compare(a.APIKey, b.APIKey))
	})
	slices.SortFunc(v.Refused, func(a, b wire.IngestRefused) int {
		return cmp.Or(strings.Compare(a.Endpoint, b.Endpoint), strings.Compare(a.Reason, b.Reason))
	})
	slices.SortFunc(v.Waiting, func(a, b wire.IngestWaiting) int {
		return cmp.Or(a.Since.Compare(b.Since), strings.Compare(a.Key, b.Key))
	})
	return v
}

// ingestionPage serves /ui/ingestion (format=json: the view as JSON).
func (h *Handler) ingestionPage(w http.ResponseWriter, r *http.Request) error {
	var v IngestionView
	if h.src.Ingestion == nil {
		v.Error = "this dashboard cannot ask the running processes"
	} else {
		reports, err := h.src.Ingestion(r.Context())
		v = MergeIngestion(reports, h.src.APIKeys)
		switch {
		case err != nil:
			v.Error = err.Error()
		case len(reports) == 0:
			v.Error = "no lkscore process answered"
		}
	}
	if r.URL.Query().Get("format") == "json" {
		w.Header().Set("Content-Type", "application/json")
		return json.NewEncoder(w).Encode(v)
	}
	return h.render(w, "ingestion.html", struct {
		page
		View IngestionView
		Now  time.Time
	}{page: h.page(r, "Ingestion", Filter{}, 0), View: v, Now: h.now()})
}

// ingestURL is where LiveKit and the agents send, as the browser that asked
// sees this host: the request's host name and the ingest listener's port
// (listen). Behind a proxy or ingress it is that address instead.
func ingestURL(r *http.Request, listen string) string {
	_, port, err := net.SplitHostPort(listen)
	if err != nil || port == "" {
		return ""
	}
	host := r.Host
	if h, _, err := net.SplitHostPort(r.Host); err == nil {
		host = h
	}
	if host == "" {
		host = "127.0.0.1"
	}
	return "http://" + net.JoinHostPort(host, port)
}
