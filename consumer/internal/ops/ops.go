// Package ops is the daemon's ops listener: the probes (/healthz, /readyz),
// Prometheus metrics, pprof on demand and the dashboard (/ui), whose sources
// read the streams, the session facts and the recording store.
package ops

import (
	"net/http"
	"net/http/pprof"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// Handler serves the ops endpoints. notAlive says why the process should
// be restarted ("" when it should not), notReady why it is not ready
// ("" when it is); ui is the dashboard; pprof adds /debug/pprof/,
// behind guard (the dashboard's access).
func Handler(notAlive, notReady func() string, gatherer prometheus.Gatherer, ui http.Handler, withPprof bool,
	guard func(http.Handler) http.Handler) http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) {
		if why := notAlive(); why != "" {
			http.Error(w, why, http.StatusServiceUnavailable)
			return
		}
		_, _ = w.Write([]byte("ok\n"))
	})
	mux.HandleFunc("/readyz", func(w http.ResponseWriter, _ *http.Request) {
		if why := notReady(); why != "" {
			http.Error(w, why, http.StatusServiceUnavailable)
			return
		}
		_, _ = w.Write([]byte("ready\n"))
	})
	mux.Handle("/metrics", promhttp.HandlerFor(gatherer, promhttp.HandlerOpts{}))
	mux.Handle("/ui", ui)
	mux.Handle("/ui/", ui)
	if withPprof {
		mux.Handle("/debug/pprof/", guard(http.HandlerFunc(pprof.Index)))
		mux.Handle("/debug/pprof/cmdline", guard(http.HandlerFunc(pprof.Cmdline)))
		mux.Handle("/debug/pprof/profile", guard(http.HandlerFunc(pprof.Profile)))
		mux.Handle("/debug/pprof/symbol", guard(http.HandlerFunc(pprof.Symbol)))
		mux.Handle("/debug/pprof/trace", guard(http.HandlerFunc(pprof.Trace)))
	}
	return mux
}
