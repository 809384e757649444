package ingest

import (
	"bytes"
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"hash"
	"io"
	"mime"
	"mime/multipart"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/livekit/protocol/auth"
	"github.com/livekit/protocol/livekit"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/lkscore/lkscore/config"
	"github.com/lkscore/lkscore/consumer/internal/facts"
	"github.com/lkscore/lkscore/consumer/internal/failure"
	"github.com/lkscore/lkscore/consumer/internal/forward"
	"github.com/lkscore/lkscore/consumer/internal/work"
	"github.com/lkscore/lkscore/recording"
	"github.com/lkscore/lkscore/store"
	"github.com/lkscore/lkscore/wire"
)

// uploadStore is what the collector needs from the recording store.
type uploadStore interface {
	Begin(ctx context.Context, dir string) (store.Upload, error)
	Location(dir string) string
	Identity() string
}

// collector serves POST /observability/recordings/v0, the endpoint the
// agents SDKs post their recording upload to when LIVEKIT_OBSERVABILITY_URL
// points at lkscore (docs/formats.md, "Recording upload").
type collector struct {
	plumbing
	keys     auth.KeyProvider
	store    uploadStore
	limits   config.Limits
	layout   recording.Layout
	now      func() time.Time
	inflight *slots        // one per upload being stored (http.max_inflight_uploads)
	maxWait  time.Duration // for a token (http.upload_wait)
	bodyIdle time.Duration // the longest wait for an upload's next bytes (http.body_timeout)
}

// newCollector stores the uploads signed with keys in o.Store, as o.Config
// says (limits, the key template, nats.publish_timeout,
// http.max_inflight_uploads and http.upload_wait).
func newCollector(o Options, keys auth.KeyProvider, now func() time.Time) (*collector, error) {
	cfg := o.Config
	lim := cfg.Limits
	if keys == nil || o.Store == nil || o.JS == nil || o.Metrics == nil || o.Log == nil || now == nil {
		return nil, errors.New("collector: keys, store, publisher, metrics, log and now are required")
	}
	if cfg.NATS.PublishTimeout <= 0 || lim.HeaderBytes <= 0 || lim.ChatHistoryBytes <= 0 || lim.AudioBytes <= 0 {
		return nil, errors.New("collector: the publish timeout and part limits must be positive")
	}
	layout, err := cfg.Layout()
	if err != nil {
		return nil, err
	}
	c := &collector{plumbing: o.plumbing(), keys: keys, store: o.Store, limits: lim, layout: layout, now: now,
		bodyIdle: cmp.Or(cfg.HTTP.BodyTimeout, 30*time.Second)}
	if cfg.HTTP.MaxInflightUploads < 1 || cfg.HTTP.UploadWait <= 0 {
		return nil, errors.New("collector: http.max_inflight_uploads and http.upload_wait must be positive")
	}
	c.inflight, c.maxWait = newSlots(cfg.HTTP.MaxInflightUploads), cfg.HTTP.UploadWait
	return c, nil
}

func (c *collector) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	outcome := "stored"
	// The token first: an unauthenticated upload neither waits for nor holds a slot.
	apiKey, err := c.authorize(w, r)
	if err == nil {
		err = c.admit(r.Context())
	}
	if err != nil {
		outcome = c.fail(w, err)
		c.metrics.Requests.WithLabelValues("recordings", outcome).Inc()
		return
	}
	var once sync.Once
	release := func() { once.Do(c.release) }
	defer release()
	if err := c.serve(w, r, apiKey, release); err != nil {
		outcome = c.fail(w, err)
	}
	c.metrics.Requests.WithLabelValues("recordings", outcome).Inc()
}

// admit waits for one of http.max_inflight_uploads slots. Uploads beyond it
// wait rather than fail: storing one is mostly disk work, and a burst of
// them stored all at once would only take CPU from scoring (docs/performance.md).
// After http.upload_wait, or at once when too many wait already, the answer
// is 503 with RetryInfo, which the SDK retries. (net/http notices a client
// that gave up only once its body is read, so the bound matters.)
func (c *collector) admit(ctx context.Context) error {
	switch err := c.inflight.takeWithin(ctx, c.maxWait, c.metrics.UploadsWaiting); {
	case err == nil:
		return nil
	case errors.Is(err, errSlotWait):
		return fmt.Errorf("no upload slot free within http.upload_wait (%s)", c.maxWait) // transient: 503 + RetryInfo
	case errors.Is(err, errBusy):
		return fmt.Errorf("every upload slot taken and %d uploads waiting", maxWaitersPerSlot*cap(c.inflight.ch)) // transient
	default:
		return fmt.Errorf("client gone while waiting for an upload slot: %w", err)
	}
}

func (c *collector) release() { c.inflight.give() }

// serve stores one upload; release gives its upload slot back once the
// parts are written (waiting for them to be durable takes no CPU, and
// uploads that wait together share one sync).
func (c *collector) serve(w http.ResponseWriter, r *http.Request, apiKey string, release func()) error {
	mt, params, err := mime.ParseMediaType(r.Header.Get("Content-Type"))
	if err != nil || mt != "multipart/form-data" || params["boundary"] == "" {
		return failure.Refuse(http.StatusBadRequest, "content type must be multipart/form-data with a boundary")
	}
	// The whole body may not exceed the sum of the part limits plus room for part headers.
	maxTotal := c.limits.HeaderBytes + c.limits.ChatHistoryBytes + c.limits.AudioBytes + 64<<10
	if r.ContentLength > maxTotal {
		return failure.Refuse(http.StatusRequestEntityTooLarge, "body exceeds the upload size limit")
	}
	// An authenticated upload may take longer than http.body_timeout, as long as it keeps sending.
	body := http.MaxBytesReader(w, newProgressReader(w, r.Body, c.bodyIdle), maxTotal)
	notice, err := c.receive(r.Context(), multipart.NewReader(body, params["boundary"]), release)
	if err != nil {
		return err
	}
	notice.APIKey = apiKey
	if err := c.announce(r.Context(), notice); err != nil {
		return err
	}
	c.seen.Accept("upload", apiKey)
	forward.NoteSessions(r.Context(), notice.SessionKey)
	c.retries.OK("upload", "uploads stored again")
	c.log.Info("upload stored", "session_key", notice.SessionKey, "objects", len(notice.Objects))
	w.WriteHeader(http.StatusOK)
	return nil
}

// authorize checks the method and the token, before anything of the body is read.
func (c *collector) authorize(w http.ResponseWriter, r *http.Request) (string, error) {
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", http.MethodPost)
		return "", failure.Refuse(http.StatusMethodNotAllowed, "use POST")
	}
	apiKey, err := verifyObservabilityToken(r.Header.Get("Authorization"), c.keys)
	if err != nil {
		reason, key := authReason(err)
		c.refusals.refused("upload", reason, "upload refused: "+err.Error(), "path", cleanPath(r.URL.Path), "api_key", cleanPath(key),
			"hint", tokenHint(reason))
		return "", failure.Refuse(http.StatusUnauthorized, "%s", "upload refused: "+err.Error())
	}
	return apiKey, nil
}

// verifyObservabilityToken checks a Bearer JWT the way LiveKit Cloud does:
// signed by a known key, unexpired, with the observability write grant.
func verifyObservabilityToken(header string, keys auth.KeyProvider) (string, error) {
	token, ok := strings.CutPrefix(header, "Bearer ")
	if !ok || token == "" {
		return "", &authError{reason: refusedNoToken, err: errors.New("missing bearer token")}
	}
	v, err := auth.ParseAPIToken(token)
	if err != nil {
		return "", &authError{reason: refusedBadToken, err: err}
	}
	secret := keys.GetSecret(v.APIKey())
	if secret == "" {
		return "", &authError{reason: refusedUnknownKey, key: v.APIKey()}
	}
	_, grants, err := v.Verify(secret)
	if err != nil {
		return "", &authError{reason: refusedBadSignature, key: v.APIKey(), err: err}
	}
	if grants.Observability == nil || !grants.Observability.Write {
		return "", &authError{reason: refusedNoGrant, key: v.APIKey()}
	}
	return v.APIKey(), nil
}

// receive streams the parts into one store upload and commits it: the
// header first (parsed and checked), then each part, then the header is
// written last and the upload committed. written is called between the
// two: the parts are written, only their durability is awaited.
func (c *collector) receive(ctx context.Context, mr *multipart.Reader, written func()) (*work.UploadNotice, error) {
	hdr, headerBytes, err := c.readHeader(mr)
	if err != nil {
		return nil, err
	}
	if hdr.GetRedactionEnabled() { // the room's later webhooks keep its name only hashed
		mctx, cancel := context.WithTimeout(ctx, c.timeout)
		err := c.rooms.Mark(mctx, hdr.RoomId)
		cancel()
		if err != nil {
			return nil, err
		}
	}
	key := recording.SessionKey(hdr.RoomId, hdr.JobId, headerBytes)
	_, jobPart, _ := strings.Cut(key, "/")
	now := c.now().UTC()
	dir := c.layout.Dir(recording.Vars{RoomID: hdr.RoomId, JobID: jobPart, RoomName: hdr.RoomName, Date: now.Format(time.DateOnly)})
	up, err := c.store.Begin(ctx, dir)
	if err != nil {
		return nil, fmt.Errorf("store upload: %w", err)
	}
	defer up.Abort(context.WithoutCancel(ctx)) // no-op after Commit

	notice := &work.UploadNotice{
		SessionKey: key, RoomID: hdr.RoomId, JobID: hdr.JobId, Dir: dir,
		Location: c.store.Location(dir), Objects: map[string]work.ObjectDigest{},
		ReceivedAt: now, Store: c.store.Identity(),
	}
	if err := c.writeParts(ctx, mr, up, notice); err != nil {
		return nil, err
	}
	d, err := writeObject(ctx, up, recording.ObjectHeader, bytes.NewReader(headerBytes), c.limits.HeaderBytes)
	if err != nil {
		return nil, fmt.Errorf("store header: %w", err)
	}
	notice.Objects[recording.ObjectHeader] = d
	c.metrics.BytesStored.WithLabelValues("header").Add(float64(d.Size))
	written()
	if err := up.Commit(ctx); err != nil {
		return nil, fmt.Errorf("store upload: %w", err)
	}
	return notice, nil
}

// readHeader reads the first part, which must be the header, and checks
// the ids that will become store paths.
func (c *collector) readHeader(mr *multipart.Reader) (*livekit.MetricsRecordingHeader, []byte, error) {
	part, err := nextPart(mr)
	if errors.Is(err, io.EOF) {
		return nil, nil, failure.Refuse(http.StatusBadRequest, "no parts in the upload")
	}
	if err != nil {
		return nil, nil, readErr("header", err)
	}
	if part.FormName() != "header" {
		return nil, nil, failure.Refuse(http.StatusBadRequest, "first part is %q, want \"header\"", part.FormName())
	}
	headerBytes, err := io.ReadAll(recording.LimitReader(bodyReader{part}, c.limits.HeaderBytes))
	if err != nil {
		return nil, nil, readErr("header", err)
	}
	hdr, err := recording.ParseHeader(headerBytes, int(c.limits.HeaderBytes))
	if err != nil {
		return nil, nil, failure.Refuse(http.StatusBadRequest, "%v", err)
	}
	if err := facts.CheckSession("header", hdr.RoomId, hdr.JobId); err != nil {
		return nil, nil, failure.Refuse(http.StatusBadRequest, "%w", err)
	}
	return hdr, headerBytes, nil
}

// writeParts streams every remaining part into the upload, each within its
// limit; parts lkscore does not know (a newer SDK) are read and dropped.
func (c *collector) writeParts(ctx context.Context, mr *multipart.Reader, up store.Upload, notice *work.UploadNotice) error {
	for {
		part, err := nextPart(mr)
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return readErr("multipart", err)
		}
		name, limit := c.objectFor(part.FormName())
		if name == "" {
			if _, err := io.Copy(io.Discard, bodyReader{part}); err != nil {
				return readErr(part.FormName(), err)
			}
			continue
		}
		if _, dup := notice.Objects[name]; dup {
			return failure.Refuse(http.StatusBadRequest, "part %q appears twice", part.FormName())
		}
		d, err := writeObject(ctx, up, name, bodyReader{part}, limit)
		if err != nil {
			return readErr(part.FormName(), err)
		}
		notice.Objects[name] = d
		c.metrics.BytesStored.WithLabelValues(part.FormName()).Add(float64(d.Size))
	}
}

func (c *collector) objectFor(part string) (string, int64) {
	switch part {
	case "chat_history":
		return recording.ObjectChatHistory, c.limits.ChatHistoryBytes
	case "audio":
		return recording.ObjectAudio, c.limits.AudioBytes
	}
	return "", 0
}

func writeObject(ctx context.Context, up store.Upload, name string, r io.Reader, limit int64) (work.ObjectDigest, error) {
	h := sha256.New()
	n, err := up.Write(ctx, name, io.TeeReader(r, h), limit)
	if err != nil {
		return work.ObjectDigest{}, err
	}
	return work.ObjectDigest{Size: n, SHA256: hexSum(h)}, nil
}

func hexSum(h hash.Hash) string { return hex.EncodeToString(h.Sum(nil)) }

// readErr names what failed while reading a part: the client's faults
// (over a limit, a broken body) become refusals; anything else (the store)
// stays as it is and failure.Classify calls it transient.
func readErr(part string, err error) error {
	switch f := failure.Classify(err); {
	case failure.IsRefusal(err):
		return err
	case f.Status == http.StatusRequestEntityTooLarge:
		return failure.Refuse(http.StatusRequestEntityTooLarge, "part %q exceeds its size limit", part)
	case errors.As(err, new(*failure.BodyError)):
		return failure.Refuse(http.StatusBadRequest, "read part %q: %v", part, err)
	}
	return fmt.Errorf("store part %q: %w", part, err)
}

// bodyReader marks read errors other than io.EOF as bodyErrors.
type bodyReader struct{ r io.Reader }

func (b bodyReader) Read(p []byte) (int, error) {
	n, err := b.r.Read(p)
	if err != nil && err != io.EOF {
		err = &failure.BodyError{Err: err}
	}
	return n, err
}

// nextPart returns the next part; framing errors are the client's.
func nextPart(mr *multipart.Reader) (*multipart.Part, error) {
	p, err := mr.NextPart()
	if err != nil && !errors.Is(err, io.EOF) {
		return nil, &failure.BodyError{Err: err}
	}
	return p, err
}

// announce publishes the upload notice, keyed by session.
func (c *collector) announce(ctx context.Context, n *work.UploadNotice) error {
	if !c.connected() {
		return errors.New("nats not connected")
	}
	data, err := json.Marshal(n)
	if err != nil {
		return fmt.Errorf("encode upload notice: %w", err)
	}
	msg := nats.NewMsg(c.subjects.UploadStored())
	msg.Data = data
	msg.Header.Set(wire.HeaderSessionKey, n.SessionKey)
	ctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	start := time.Now()
	_, err = c.pub.PublishMsg(ctx, msg, jetstream.WithMsgID(n.SessionKey), jetstream.WithExpectStream(c.subjects.UploadStream()))
	c.metrics.PublishLatency.WithLabelValues(c.subjects.UploadStream()).Observe(time.Since(start).Seconds())
	if err != nil {
		return fmt.Errorf("publish upload notice %s: %w", n.SessionKey, err)
	}
	return nil
}

// fail answers an error as failure.Classify sorts it. Refusals get their status;
// anything else gets the google.rpc.Status with RetryInfo the SDK retries on.
func (c *collector) fail(w http.ResponseWriter, err error) string {
	f := failure.Classify(err)
	reason := failure.HTTPReason(f.Status)
	c.metrics.Rejected.WithLabelValues("recordings", reason).Inc()
	if f.Status != http.StatusServiceUnavailable {
		if f.Status != http.StatusUnauthorized && f.Status != http.StatusMethodNotAllowed { // those are logged where found
			c.refusals.refused("upload", refusedBadUpload, "upload refused", "status", f.Status, "err", err)
		}
		// Never mention "disabled" here: the Python SDK stops uploading for good on it.
		http.Error(w, err.Error(), f.Status)
		return reason
	}
	c.retries.Failed("upload", "upload not stored", err)
	failure.WriteRetryableStatus(w, "upload not stored, retry later", 2*time.Second)
	return reason
}
