// Package ingest is the daemon's HTTP ingest: LiveKit's signed webhooks,
// the agents SDKs' recording upload and their OTLP logs and traces. Each
// endpoint answers 2xx only once what it received is durable (on JetStream,
// in the store, or in the session facts), and refuses bad input with a clear
// 4xx; a dependency that is down is a 503 the SDKs retry.
package ingest

import (
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"time"

	"github.com/livekit/protocol/auth"

	"github.com/lkscore/lkscore/config"
	"github.com/lkscore/lkscore/consumer/internal/facts"
	"github.com/lkscore/lkscore/consumer/internal/forward"
	"github.com/lkscore/lkscore/consumer/internal/metrics"
	"github.com/lkscore/lkscore/consumer/internal/seen"
	"github.com/lkscore/lkscore/internal/retrylog"
	"github.com/lkscore/lkscore/wire"
)

// Options are what the ingest endpoints need.
type Options struct {
	Config    config.Config
	JS        publisher
	Store     uploadStore
	Facts     factSink
	Connected func() bool // whether NATS is connected: 503 at once when not (nil: always)
	// Spool keeps the facts of OTLP logs and traces while NATS is down (nil:
	// they get 503 then).
	Spool   spooler
	Metrics *metrics.Ingest
	Log     *slog.Logger
	// Seen counts what was accepted and refused, for the ingestion view
	// (nil: not counted).
	Seen *seen.Tracker
	// Tee copies the SDK requests for forward.targets (nil: none).
	Tee *forward.Tee
	// Rooms remembers the rooms a signal said are redacted, across
	// replicas (nil: only the event's own job says).
	Rooms *RedactedRooms

	// refusals is the one rate-limited log of refused requests every
	// endpoint shares (Handler sets it).
	refusals *refusalLog
	// retries logs failed stores (NATS or the store down): the first, a
	// summary a minute per endpoint, the recovery.
	retries *retrylog.Log
}

// Handler serves the ingest endpoints: LiveKit's webhooks (/webhook), the
// agents SDKs' recording upload (/observability/recordings/v0) and their
// OTLP logs, traces and metrics (/observability/<signal>/otlp/v0).
func Handler(o Options) (http.Handler, error) {
	cfg := o.Config
	keys := auth.NewFileBasedKeyProviderFromMap(cfg.LiveKit.Keys)
	o.refusals = newRefusalLog(o.Log, nil)
	o.retries = retrylog.New(o.Log, nil, 0)
	o.refusals.seen = o.Seen
	wh, err := newWebhookHandler(o, keys)
	if err != nil {
		return nil, err
	}
	col, err := newCollector(o, keys, time.Now)
	if err != nil {
		return nil, err
	}
	mux := http.NewServeMux()
	mux.Handle("/webhook", wh)
	mux.Handle("/observability/recordings/v0", o.Tee.Wrap("upload", col))
	ids, err := facts.IdentityKeysFor(cfg.Privacy.IdentityKeys, cfg.LiveKit.Keys)
	if err != nil {
		return nil, fmt.Errorf("otlp: %w", err)
	}
	otlpSlots, otlpBufs := newSlots(cfg.HTTP.MaxInflightOTLP), &bodyBuffers{} // shared by the three signals: decoding is what costs
	for _, sig := range []string{"traces", "logs", "metrics"} {
		rcv := &otlpReceiver{signal: sig, seen: o.Seen, keys: keys, facts: o.Facts, connected: connectedOrAlways(o.Connected),
			spool: o.Spool, refusals: o.refusals, retries: o.retries, maxBody: cfg.Limits.OTLPBytes,
			maxElements: cfg.Limits.OTLPElements, inflight: otlpSlots, bufs: otlpBufs, metrics: o.Metrics, log: o.Log,
			alwaysRedact: cfg.Privacy.Redaction == "always", ids: ids, rooms: o.Rooms, timeout: cfg.NATS.PublishTimeout}
		if sig == "metrics" {
			rcv.facts = nil // metrics carry no session facts lkscore uses
		}
		mux.Handle("/observability/"+sig+"/otlp/v0", o.Tee.Wrap(sig, rcv))
	}
	mux.Handle("/", unknownPath{o.refusals})
	return withBodyDeadline(collapseSlashes(mux), cfg.HTTP.BodyTimeout), nil
}

// unknownPath answers a request to a path lkscore does not serve: 404, and a
// warn line (rate-limited) naming the path, since a webhook or an SDK
// pointed at the wrong URL is a common first-hour mistake.
type unknownPath struct{ refusals *refusalLog }

func (u unknownPath) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	u.refusals.refused("ingest", refusedUnknownPath, "request to a path lkscore does not serve", "method", r.Method,
		"path", cleanPath(r.URL.Path),
		"hint", "LiveKit webhooks go to /webhook; LIVEKIT_OBSERVABILITY_URL is this server's base URL (the SDK adds /observability/…)")
	http.Error(w, "not found: LiveKit webhooks go to /webhook, agents SDK uploads and OTLP to /observability/…", http.StatusNotFound)
}

// plumbing is what the endpoints that publish share: the publisher and
// whether it is connected, the subjects, one publish's timeout, the
// metrics and the logger.
type plumbing struct {
	pub       publisher
	connected func() bool
	refusals  *refusalLog
	subjects  wire.Subjects
	timeout   time.Duration // one acknowledged publish (nats.publish_timeout)
	metrics   *metrics.Ingest
	log       *slog.Logger
	seen      *seen.Tracker
	retries   *retrylog.Log
	// rooms are the rooms a signal said are redacted (nil: only an event's
	// own job says).
	rooms *RedactedRooms
}

// plumbing is o's, NATS taken as always connected when o.Connected is nil.
func (o Options) plumbing() plumbing {
	if o.retries == nil { // a handler built alone (tests)
		o.retries = retrylog.New(o.Log, nil, 0)
	}
	return plumbing{pub: o.JS, connected: connectedOrAlways(o.Connected), refusals: o.refusals,
		subjects: wire.NewSubjects(o.Config.NATS.SubjectPrefix, o.Config.NATS.StreamPrefix),
		timeout:  o.Config.NATS.PublishTimeout, metrics: o.Metrics, log: o.Log, seen: o.Seen, retries: o.retries, rooms: o.Rooms}
}

// collapseSlashes tolerates a doubled slash ("//observability/…"): the SDK
// uses LIVEKIT_OBSERVABILITY_URL verbatim, and ServeMux would answer a POST
// to an unclean path with a redirect.
func collapseSlashes(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.Contains(r.URL.Path, "//") {
			for strings.Contains(r.URL.Path, "//") {
				r.URL.Path = strings.ReplaceAll(r.URL.Path, "//", "/")
			}
			r.URL.RawPath = ""
		}
		h.ServeHTTP(w, r)
	})
}

// connectedOrAlways is connected, or NATS taken as always connected when it
// is nil.
func connectedOrAlways(connected func() bool) func() bool {
	if connected == nil {
		return func() bool { return true }
	}
	return connected
}
