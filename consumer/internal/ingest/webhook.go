package ingest

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"time"

	"github.com/livekit/protocol/auth"
	"github.com/livekit/protocol/livekit"
	"github.com/livekit/protocol/webhook"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/protobuf/encoding/protojson"

	"github.com/lkscore/lkscore/config"
	"github.com/lkscore/lkscore/consumer/internal/facts"
	"github.com/lkscore/lkscore/consumer/internal/failure"
	"github.com/lkscore/lkscore/consumer/internal/metrics"
	"github.com/lkscore/lkscore/wire"
)

// publisher is what ingest needs from JetStream.
type publisher interface {
	PublishMsg(ctx context.Context, msg *nats.Msg, opts ...jetstream.PublishOpt) (*jetstream.PubAck, error)
}

// webhookHandler serves POST /webhook: it verifies LiveKit's signature with
// livekit/protocol, stores the event on JetStream keyed by its id and answers
// 200 only after the PubAck.
type webhookHandler struct {
	plumbing
	privacy config.Privacy
	// identities hashes participant identities (privacy.identity_keys).
	identities *facts.IdentityKeys
	keys       auth.KeyProvider
	maxBody    int64
	events     map[string]bool
	// versionKey is regression.version_metadata_key: its value is read
	// from a job's metadata before the stored event loses it.
	versionKey string
	// inflight caps the signed bodies read at once (http.max_inflight_webhooks).
	inflight *slots

	// Metrics resolved once: label lookups cost on the hot path.
	requests       map[string]prometheus.Counter
	stored         map[eventOutcome]prometheus.Counter
	publishLatency prometheus.Observer
}

type eventOutcome struct{ event, outcome string }

// newWebhookHandler serves LiveKit's webhooks signed with keys, as o.Config
// says (privacy, webhook.max_body_bytes, webhook.events,
// nats.publish_timeout and the subject prefixes).
func newWebhookHandler(o Options, keys auth.KeyProvider) (*webhookHandler, error) {
	cfg := o.Config
	if keys == nil || o.JS == nil || o.Metrics == nil || o.Log == nil {
		return nil, errors.New("webhook handler: keys, publisher, metrics and log are required")
	}
	if cfg.Webhook.MaxBodyBytes <= 0 || cfg.NATS.PublishTimeout <= 0 {
		return nil, errors.New("webhook handler: max body and publish timeout must be positive")
	}
	ev := make(map[string]bool, len(cfg.Webhook.Events))
	for _, e := range cfg.Webhook.Events {
		ev[e] = true
	}
	identities, err := facts.IdentityKeysFor(cfg.Privacy.IdentityKeys, cfg.LiveKit.Keys)
	if err != nil {
		return nil, fmt.Errorf("webhook handler: %w", err)
	}
	p, m := o.plumbing(), o.Metrics
	h := &webhookHandler{
		plumbing: p, privacy: cfg.Privacy, identities: identities, keys: keys, maxBody: cfg.Webhook.MaxBodyBytes, events: ev,
		versionKey:     cfg.Regression.VersionMetadataKey,
		inflight:       newSlots(cfg.HTTP.MaxInflightWebhooks),
		requests:       map[string]prometheus.Counter{},
		stored:         map[eventOutcome]prometheus.Counter{},
		publishLatency: m.PublishLatency.WithLabelValues(p.subjects.WebhookStream()),
	}
	for _, outcome := range []string{"stored", "duplicate", "ignored"} {
		h.requests[outcome] = m.Requests.WithLabelValues("webhook", outcome)
	}
	for e := range ev {
		for _, outcome := range []string{"stored", "duplicate"} {
			h.stored[eventOutcome{e, outcome}] = m.WebhookEvents.WithLabelValues(e, outcome)
		}
	}
	return h, nil
}

var unmarshalEvent = protojson.UnmarshalOptions{DiscardUnknown: true, AllowPartial: true}

// maxWebhookElements bounds the messages a webhook body decodes into (its
// JSON objects): LiveKit's events hold tens, and an empty object is 3 bytes
// of JSON but a message in memory.
const maxWebhookElements = 10_000

// DecodeEvent decodes a webhook event as stored on the webhooks stream (or
// as LiveKit sent it): protobuf JSON, unknown fields ignored.
func DecodeEvent(data []byte, ev *livekit.WebhookEvent) error {
	return unmarshalEvent.Unmarshal(data, ev)
}

func (h *webhookHandler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	outcome := h.serve(w, r)
	if c, ok := h.requests[outcome]; ok {
		c.Inc()
	} else {
		h.metrics.Requests.WithLabelValues("webhook", outcome).Inc()
	}
}

// serve handles one request and returns its outcome label.
func (h *webhookHandler) serve(w http.ResponseWriter, r *http.Request) string {
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", http.MethodPost)
		return h.reject(w, http.StatusMethodNotAllowed, "use POST")
	}
	if r.ContentLength > h.maxBody {
		return h.reject(w, http.StatusRequestEntityTooLarge, "body exceeds the webhook size limit")
	}
	// LiveKit sends the raw token; accept a "Bearer " prefix as well.
	token := r.Header.Get("Authorization")
	if len(token) > 7 && strings.EqualFold(token[:7], "bearer ") {
		token = token[7:]
	}
	// The token is checked before a byte of the body is read: an
	// unauthenticated request costs its headers only.
	apiKey, sum, err := verifyWebhookToken(token, h.keys)
	if err != nil {
		reason, key := authReason(err)
		h.refusals.refused("webhook", reason, "webhook refused: "+err.Error(), "path", cleanPath(r.URL.Path), "api_key", cleanPath(key),
			"hint", tokenHint(reason))
		return h.reject(w, http.StatusUnauthorized, "webhook refused: "+err.Error())
	}
	if !h.inflight.take() {
		w.Header().Set("Retry-After", "1")
		return h.reject(w, http.StatusServiceUnavailable, errBusy.Error())
	}
	defer h.inflight.give()
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, h.maxBody))
	if err != nil {
		var tooLarge *http.MaxBytesError
		if errors.As(err, &tooLarge) {
			return h.reject(w, http.StatusRequestEntityTooLarge, "body exceeds the webhook size limit")
		}
		h.log.Debug("webhook body not read", "err", err)
		return h.reject(w, http.StatusRequestTimeout, "body not received within http.body_timeout")
	}
	// The token signs the body's hash, as livekit/protocol's webhook.Receive checks it.
	got := sha256.Sum256(body)
	if subtle.ConstantTimeCompare([]byte(base64.StdEncoding.EncodeToString(got[:])), []byte(sum)) != 1 {
		err := &authError{reason: refusedBadChecksum, key: apiKey, err: webhook.ErrInvalidChecksum}
		h.refusals.refused("webhook", refusedBadChecksum, "webhook refused: "+err.Error(), "path", cleanPath(r.URL.Path), "api_key", apiKey)
		return h.reject(w, http.StatusUnauthorized, "webhook refused: "+err.Error())
	}
	var ev livekit.WebhookEvent
	if err := countJSONElements(body, ev.ProtoReflect().Descriptor(), maxWebhookElements); err != nil {
		var ee *ElementsError
		if errors.As(err, &ee) {
			ee.Setting = "a webhook's fixed limit"
		}
		return h.reject(w, http.StatusRequestEntityTooLarge, "webhook: "+err.Error())
	}
	if err := unmarshalEvent.Unmarshal(body, &ev); err != nil {
		return h.reject(w, http.StatusBadRequest, "body is not a LiveKit WebhookEvent")
	}
	if ev.Id == "" || ev.Event == "" {
		return h.reject(w, http.StatusBadRequest, "webhook event lacks id or event")
	}
	// The ids a key, subject or path is made of, checked before anything
	// is stored (wire.CheckID): a signed event can still be hostile.
	if err := facts.CheckEvent(&ev); err != nil {
		h.refusals.refused("webhook", refusedBadID, "webhook refused: "+err.Error(), "event", metrics.EventLabel(ev.Event), "api_key", apiKey)
		return h.reject(w, http.StatusBadRequest, "webhook "+metrics.EventLabel(ev.Event)+": "+err.Error())
	}
	if ev.GetRoom().GetSid() == wire.ProbeRoomSID { // lkscore doctor's: verified, not LiveKit's traffic
		h.metrics.WebhookEvents.WithLabelValues(metrics.EventLabel(ev.Event), "probe").Inc()
		w.WriteHeader(http.StatusOK)
		return "probe"
	}
	if !h.events[ev.Event] {
		h.seen.Accept("webhook", apiKey)
		h.metrics.WebhookEvents.WithLabelValues(metrics.EventLabel(ev.Event), "ignored").Inc()
		w.WriteHeader(http.StatusOK)
		return "ignored"
	}
	return h.store(w, r.Context(), &ev, body, apiKey)
}

// store publishes the verified body and answers according to the PubAck.
func (h *webhookHandler) store(w http.ResponseWriter, ctx context.Context, ev *livekit.WebhookEvent, body []byte, apiKey string) string {
	if !h.connected() {
		h.metrics.WebhookEvents.WithLabelValues(ev.Event, "unavailable").Inc()
		w.Header().Set("Retry-After", "2")
		return h.reject(w, http.StatusServiceUnavailable, "queue unavailable, retry later")
	}
	// What a feature reads of the metadata is read before it goes: the
	// version regression detection keys on, and nothing else.
	version := storedVersion(ev, h.versionKey)
	// One deadline (nats.publish_timeout) for the redaction lookup and the
	// publish: a context costs as much as the lookup when it is cached.
	ctx, cancel := context.WithTimeout(ctx, h.timeout)
	defer cancel()
	// Every stored event loses the free text the application put in it,
	// whatever the session's redaction.
	redacted, err := h.redacted(ctx, ev)
	if err != nil {
		h.retries.Failed("webhook", "webhook not stored: whether its room is redacted is not known", err, "event_id", ev.Id)
		w.Header().Set("Retry-After", "2")
		return h.reject(w, http.StatusServiceUnavailable, "queue unavailable, retry later")
	}
	clean, err := redactEvent(ev, h.identities, redacted)
	if err != nil {
		h.log.Warn("webhook not stored: storing it without its free text failed", "event_id", ev.Id, "err", err)
		return h.reject(w, http.StatusServiceUnavailable, "could not store the event, retry later")
	}
	body = clean
	msg := nats.NewMsg(h.subjects.Webhook(ev.Event))
	msg.Data = body
	msg.Header.Set(wire.HeaderEvent, ev.Event)
	msg.Header.Set(wire.HeaderAPIKey, apiKey)
	if version != "" {
		msg.Header.Set(wire.HeaderMetadataVersion, version)
	}
	start := time.Now()
	ack, err := h.pub.PublishMsg(ctx, msg, jetstream.WithMsgID(ev.Id), jetstream.WithExpectStream(h.subjects.WebhookStream()))
	h.publishLatency.Observe(time.Since(start).Seconds())
	if err != nil {
		h.retries.Failed("webhook", "webhook not stored", err, "event_id", ev.Id, "event", ev.Event)
		h.metrics.WebhookEvents.WithLabelValues(ev.Event, "unavailable").Inc()
		w.Header().Set("Retry-After", "2")
		return h.reject(w, http.StatusServiceUnavailable, "queue unavailable, retry later")
	}
	h.retries.OK("webhook", "webhooks stored again")
	outcome := "stored"
	if ack.Duplicate {
		outcome = "duplicate"
	}
	h.stored[eventOutcome{ev.Event, outcome}].Inc() // pre-resolved: kept events only reach here
	h.seen.Accept("webhook", apiKey)
	if h.log.Enabled(ctx, slog.LevelDebug) { // skip boxing the attributes on the hot path
		h.log.Debug("webhook stored", "event_id", ev.Id, "event", ev.Event, "seq", ack.Sequence, "duplicate", ack.Duplicate)
	}
	w.WriteHeader(http.StatusOK)
	return outcome
}

// reject writes a short plain-text error and counts it under the status's
// reason (failure.HTTPReason).
func (h *webhookHandler) reject(w http.ResponseWriter, code int, msg string) string {
	reason := failure.HTTPReason(code)
	h.metrics.Rejected.WithLabelValues("webhook", reason).Inc()
	http.Error(w, msg, code)
	return reason
}

// storedVersion is the value of regression.version_metadata_key (key) in
// an agent_job_* event's job metadata, else its room's, as the stored
// event keeps it (wire.HeaderMetadataVersion): bounded, without control
// characters (a header value cannot hold a line break). "" for other events.
func storedVersion(ev *livekit.WebhookEvent, key string) string {
	job := ev.GetJob()
	if key == "" || job == nil {
		return ""
	}
	v := facts.MetadataValue(key, job.GetMetadata(), job.GetRoom().GetMetadata(), ev.GetRoom().GetMetadata())
	return strings.TrimSpace(strings.Map(func(r rune) rune {
		if r < 0x20 || r == 0x7f {
			return -1
		}
		return r
	}, v))
}

// redacted reports whether ev's session is redacted: privacy.redaction:
// always, the job's enable_redaction (which marks its room for the room's
// later events), or a room an earlier signal marked (RedactedRooms).
func (h *webhookHandler) redacted(ctx context.Context, ev *livekit.WebhookEvent) (bool, error) {
	room := ev.GetRoom().GetSid()
	if room == "" {
		room = ev.GetJob().GetRoom().GetSid()
	}
	if room == "" {
		room = ev.GetEgressInfo().GetRoomId()
	}
	if ev.GetJob().GetEnableRedaction() {
		return true, h.rooms.Mark(ctx, room)
	}
	if h.privacy.Redacted(false) {
		return true, nil
	}
	return h.rooms.Redacted(ctx, room)
}

// redactEvent re-encodes an event without the free text the application
// put in it and the secrets the server put in it: room, job and
// participant metadata and attributes, participant names, track names, the
// room's TURN password, an egress's request and stream results;
// participant identities (a SIP caller's
// is its phone number) are kept only as their keyed hash (ids.Stored). Every
// stored webhook goes through it, for any session (docs/security.md lists
// what a stored event keeps). A redacted job's own error text goes too
// (a job's error may quote anything; the server's departure text quotes
// nothing), and so does the room's name, kept only as its keyed hash
// (ids.StoredRoomName). redacted says the event's session is redacted
// (webhookHandler.redacted: the job's enable_redaction, a room an earlier
// signal marked, or privacy.redaction: always). ev is changed in place.
func redactEvent(ev *livekit.WebhookEvent, ids *facts.IdentityKeys, redacted bool) ([]byte, error) {
	clearRoom := func(r *livekit.Room) {
		if r != nil {
			r.Metadata, r.TurnPassword = "", "" // livekit-server sends the room's TURN password with every room
			if redacted {
				r.Name = ids.StoredRoomName(r.Name)
			}
		}
	}
	clearParticipant := func(p *livekit.ParticipantInfo) {
		if p != nil {
			p.Metadata, p.Attributes, p.Name = "", nil, ""
			p.Identity = ids.Stored(p.Identity)
			p.Tracks, p.DataTracks = nil, nil
		}
	}
	clearRoom(ev.Room)
	clearParticipant(ev.Participant)
	if e := ev.EgressInfo; e != nil {
		// The egress request names storage, its credentials (LiveKit redacts
		// the ones it knows) and stream URLs; lkscore reads only the results.
		e.Request, e.StreamResults = nil, nil
		if redacted {
			e.RoomName = ids.StoredRoomName(e.RoomName)
		}
	}
	if j := ev.Job; j != nil {
		j.Metadata, j.Attributes = "", nil
		clearRoom(j.Room)
		clearParticipant(j.Participant)
		if j.State != nil {
			j.State.ParticipantIdentity = ids.Stored(j.State.ParticipantIdentity)
			if redacted && !facts.IsDepartureError(j.State.Error) {
				j.State.Error = ""
			}
		}
	}
	return protojson.Marshal(ev)
}
