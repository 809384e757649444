package consumer

import (
	"errors"
	"io"
	"net/http"
)

// otlpSink answers the SDK's OTLP exports (traces, logs, metrics) sent to the
// same base URL with 200 and discards them, so a pointed agent logs no errors.
type otlpSink struct {
	signal  string
	maxBody int64
	metrics *metrics
}

func (s otlpSink) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", http.MethodPost)
		s.metrics.requests.WithLabelValues("otlp", "method_not_allowed").Inc()
		http.Error(w, "use POST", http.StatusMethodNotAllowed)
		return
	}
	_, err := io.Copy(io.Discard, http.MaxBytesReader(w, r.Body, s.maxBody))
	var tooLarge *http.MaxBytesError
	if errors.As(err, &tooLarge) {
		s.metrics.requests.WithLabelValues("otlp", "too_large").Inc()
		http.Error(w, "body too large", http.StatusRequestEntityTooLarge)
		return
	}
	s.metrics.otlpDiscarded.WithLabelValues(s.signal).Inc()
	s.metrics.requests.WithLabelValues("otlp", "discarded").Inc()
	w.WriteHeader(http.StatusOK)
}
