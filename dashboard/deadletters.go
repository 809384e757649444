package dashboard

import (
	"encoding/json"
	"net/http"
	"strings"
)

// deadLettersPage serves /ui/deadletters: dead letters found by session key
// (or subject, stage, error text), each with its reason and the command that
// replays it once the cause is fixed (format=json: the result as JSON).
func (h *Handler) deadLettersPage(w http.ResponseWriter, r *http.Request) error {
	q := strings.TrimSpace(r.URL.Query().Get("q"))
	var res DeadLetterResult
	var errText string
	if h.src.SearchDeadLetters == nil {
		errText = "dead letters are not searchable from this dashboard"
	} else if found, err := h.src.SearchDeadLetters(r.Context(), q); err != nil {
		errText = err.Error()
	} else {
		res = found
	}
	if r.URL.Query().Get("format") == "json" {
		w.Header().Set("Content-Type", "application/json")
		return json.NewEncoder(w).Encode(struct {
			DeadLetterResult
			Error string `json:"error,omitempty"`
		}{res, errText})
	}
	return h.render(w, "deadletters.html", struct {
		page
		Q      string
		Result DeadLetterResult
		Error  string
	}{page: h.page(r, "Dead letters", Filter{Query: q}, 0), Q: q, Result: res, Error: errText})
}
