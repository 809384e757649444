package consumer

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"hash"
	"io"
	"log/slog"
	"mime"
	"mime/multipart"
	"net/http"
	"regexp"
	"strings"
	"time"

	"github.com/livekit/protocol/auth"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/lkscore/lkscore/config"
	"github.com/lkscore/lkscore/recording"
)

// CollectorHandler serves POST /observability/recordings/v0, the endpoint
// the Python agents SDK posts its recording upload to when
// LIVEKIT_OBSERVABILITY_URL points at lkscore.
type CollectorHandler struct {
	keys      auth.KeyProvider
	store     recordingWriter
	pub       publisher
	connected func() bool
	subjects  Subjects
	limits    config.Limits
	layout    recording.Layout
	timeout   time.Duration
	now       func() time.Time
	metrics   *metrics
	log       *slog.Logger
}

// UploadNotice is the message published on Subjects.UploadStored once an
// upload is committed to the recording store.
type UploadNotice struct {
	SessionKey string                  `json:"session_key"`
	RoomID     string                  `json:"room_id"`
	JobID      string                  `json:"job_id,omitempty"`
	Dir        string                  `json:"dir"`      // store key prefix of the objects
	Location   string                  `json:"location"` // Dir as a URL (file:// or s3://)
	Objects    map[string]ObjectDigest `json:"objects"`
	APIKey     string                  `json:"api_key"`
	ReceivedAt time.Time               `json:"received_at"`
}

// ObjectDigest describes one stored object.
type ObjectDigest struct {
	Size   int64  `json:"size"`
	SHA256 string `json:"sha256"`
}

// idRE bounds what a room or job id may look like before it becomes a path.
var idRE = regexp.MustCompile(`^[A-Za-z0-9_-]{1,128}$`)

// collectorError carries the HTTP status and metric reason of a refusal.
type collectorError struct {
	status int
	reason string
	err    error
}

func (e *collectorError) Error() string { return e.err.Error() }
func (e *collectorError) Unwrap() error { return e.err }

func refuse(status int, reason, format string, a ...any) error {
	return &collectorError{status: status, reason: reason, err: fmt.Errorf(format, a...)}
}

func (c *CollectorHandler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	outcome := "stored"
	if err := c.serve(w, r); err != nil {
		outcome = c.fail(w, err)
	}
	c.metrics.requests.WithLabelValues("recordings", outcome).Inc()
}

func (c *CollectorHandler) serve(w http.ResponseWriter, r *http.Request) error {
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", http.MethodPost)
		return refuse(http.StatusMethodNotAllowed, "method_not_allowed", "use POST")
	}
	apiKey, err := verifyObservabilityToken(r.Header.Get("Authorization"), c.keys)
	if err != nil {
		c.log.Debug("upload refused", "err", err)
		return refuse(http.StatusUnauthorized, "unauthorized", "invalid token")
	}
	mt, params, err := mime.ParseMediaType(r.Header.Get("Content-Type"))
	if err != nil || mt != "multipart/form-data" || params["boundary"] == "" {
		return refuse(http.StatusBadRequest, "bad_request", "content type must be multipart/form-data with a boundary")
	}
	// The whole body may not exceed the sum of the part limits plus room for part headers.
	maxTotal := c.limits.HeaderBytes + c.limits.ChatHistoryBytes + c.limits.AudioBytes + 64<<10
	if r.ContentLength > maxTotal {
		return refuse(http.StatusRequestEntityTooLarge, "too_large", "body exceeds the upload size limit")
	}
	body := http.MaxBytesReader(w, r.Body, maxTotal)
	notice, err := c.receive(r.Context(), multipart.NewReader(body, params["boundary"]))
	if err != nil {
		return err
	}
	notice.APIKey = apiKey
	if err := c.announce(r.Context(), notice); err != nil {
		return err
	}
	c.log.Info("upload stored", "session_key", notice.SessionKey, "objects", len(notice.Objects))
	w.WriteHeader(http.StatusOK)
	return nil
}

// verifyObservabilityToken checks a Bearer JWT the way LiveKit Cloud does:
// signed by a known key, unexpired, with the observability write grant.
func verifyObservabilityToken(header string, keys auth.KeyProvider) (string, error) {
	token, ok := strings.CutPrefix(header, "Bearer ")
	if !ok || token == "" {
		return "", errors.New("missing bearer token")
	}
	v, err := auth.ParseAPIToken(token)
	if err != nil {
		return "", fmt.Errorf("parse token: %w", err)
	}
	secret := keys.GetSecret(v.APIKey())
	if secret == "" {
		return "", fmt.Errorf("unknown api key %q", v.APIKey())
	}
	_, grants, err := v.Verify(secret)
	if err != nil {
		return "", fmt.Errorf("verify token: %w", err)
	}
	if grants.Observability == nil || !grants.Observability.Write {
		return "", errors.New("token lacks the observability write grant")
	}
	return v.APIKey(), nil
}

// receive streams the parts into one store upload and commits it.
func (c *CollectorHandler) receive(ctx context.Context, mr *multipart.Reader) (*UploadNotice, error) {
	part, err := nextPart(mr)
	if errors.Is(err, io.EOF) {
		return nil, refuse(http.StatusBadRequest, "bad_request", "no parts in the upload")
	}
	if err != nil {
		return nil, readErr("header", err)
	}
	if part.FormName() != "header" {
		return nil, refuse(http.StatusBadRequest, "bad_request", "first part is %q, want \"header\"", part.FormName())
	}
	headerBytes, err := io.ReadAll(recording.LimitReader(bodyReader{part}, c.limits.HeaderBytes))
	if err != nil {
		return nil, readErr("header", err)
	}
	hdr, err := recording.ParseHeader(headerBytes, int(c.limits.HeaderBytes))
	if err != nil {
		return nil, refuse(http.StatusBadRequest, "bad_request", "%v", err)
	}
	if !idRE.MatchString(hdr.RoomId) {
		return nil, refuse(http.StatusBadRequest, "bad_request", "header room_id %q is missing or invalid", hdr.RoomId)
	}
	if hdr.JobId != "" && !idRE.MatchString(hdr.JobId) {
		return nil, refuse(http.StatusBadRequest, "bad_request", "header job_id %q is invalid", hdr.JobId)
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

	notice := &UploadNotice{
		SessionKey: key, RoomID: hdr.RoomId, JobID: hdr.JobId, Dir: dir,
		Location: c.store.Location(dir), Objects: map[string]ObjectDigest{},
		ReceivedAt: now,
	}
	for {
		part, err := nextPart(mr)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, readErr("multipart", err)
		}
		name, limit := c.objectFor(part.FormName())
		if name == "" {
			// Unknown parts (a newer SDK) are read and dropped, bounded by the body cap.
			if _, err := io.Copy(io.Discard, bodyReader{part}); err != nil {
				return nil, readErr(part.FormName(), err)
			}
			continue
		}
		if _, dup := notice.Objects[name]; dup {
			return nil, refuse(http.StatusBadRequest, "bad_request", "part %q appears twice", part.FormName())
		}
		d, err := writeObject(ctx, up, name, bodyReader{part}, limit)
		if err != nil {
			return nil, readErr(part.FormName(), err)
		}
		notice.Objects[name] = d
		c.metrics.bytesStored.WithLabelValues(part.FormName()).Add(float64(d.Size))
	}
	d, err := writeObject(ctx, up, recording.ObjectHeader, bytes.NewReader(headerBytes), c.limits.HeaderBytes)
	if err != nil {
		return nil, fmt.Errorf("store header: %w", err)
	}
	notice.Objects[recording.ObjectHeader] = d
	c.metrics.bytesStored.WithLabelValues("header").Add(float64(d.Size))
	if err := up.Commit(ctx); err != nil {
		return nil, fmt.Errorf("store upload: %w", err)
	}
	return notice, nil
}

func (c *CollectorHandler) objectFor(part string) (string, int64) {
	switch part {
	case "chat_history":
		return recording.ObjectChatHistory, c.limits.ChatHistoryBytes
	case "audio":
		return recording.ObjectAudio, c.limits.AudioBytes
	}
	return "", 0
}

func writeObject(ctx context.Context, up Upload, name string, r io.Reader, limit int64) (ObjectDigest, error) {
	h := sha256.New()
	n, err := up.Write(ctx, name, io.TeeReader(r, h), limit)
	if err != nil {
		return ObjectDigest{}, err
	}
	return ObjectDigest{Size: n, SHA256: hexSum(h)}, nil
}

func hexSum(h hash.Hash) string { return hex.EncodeToString(h.Sum(nil)) }

// readErr classifies an error met while reading the request: over a limit →
// 413, a broken body (client gone, bad framing) → 400, anything else (the
// store) is transient.
func readErr(part string, err error) error {
	var tooLarge *http.MaxBytesError
	var ce *collectorError
	var be *bodyError
	switch {
	case errors.As(err, &ce):
		return err
	case errors.Is(err, recording.ErrLimit) || errors.As(err, &tooLarge):
		return refuse(http.StatusRequestEntityTooLarge, "too_large", "part %q exceeds its size limit", part)
	case errors.As(err, &be):
		return refuse(http.StatusBadRequest, "bad_request", "read part %q: %v", part, be.err)
	}
	return fmt.Errorf("store part %q: %w", part, err)
}

// bodyError marks an error that came from reading the request body, so it
// is told apart from a store failure.
type bodyError struct{ err error }

func (e *bodyError) Error() string { return e.err.Error() }
func (e *bodyError) Unwrap() error { return e.err }

// bodyReader marks read errors other than io.EOF as bodyErrors.
type bodyReader struct{ r io.Reader }

func (b bodyReader) Read(p []byte) (int, error) {
	n, err := b.r.Read(p)
	if err != nil && err != io.EOF {
		err = &bodyError{err: err}
	}
	return n, err
}

// nextPart returns the next part; framing errors are the client's.
func nextPart(mr *multipart.Reader) (*multipart.Part, error) {
	p, err := mr.NextPart()
	if err != nil && !errors.Is(err, io.EOF) {
		return nil, &bodyError{err: err}
	}
	return p, err
}

// announce publishes the upload notice, keyed by session.
func (c *CollectorHandler) announce(ctx context.Context, n *UploadNotice) error {
	if !c.connected() {
		return errors.New("nats not connected")
	}
	data, err := json.Marshal(n)
	if err != nil {
		return fmt.Errorf("encode upload notice: %w", err)
	}
	msg := nats.NewMsg(c.subjects.UploadStored())
	msg.Data = data
	msg.Header.Set(HeaderSessionKey, n.SessionKey)
	ctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	start := time.Now()
	_, err = c.pub.PublishMsg(ctx, msg, jetstream.WithMsgID(n.SessionKey), jetstream.WithExpectStream(c.subjects.UploadStream()))
	c.metrics.publishLatency.WithLabelValues(c.subjects.UploadStream()).Observe(time.Since(start).Seconds())
	if err != nil {
		return fmt.Errorf("publish upload notice %s: %w", n.SessionKey, err)
	}
	return nil
}

// fail answers an error. Refusals get their status; anything else is
// transient and gets the google.rpc.Status with RetryInfo the SDK retries on.
func (c *CollectorHandler) fail(w http.ResponseWriter, err error) string {
	var ce *collectorError
	if errors.As(err, &ce) {
		c.metrics.rejected.WithLabelValues("recordings", ce.reason).Inc()
		// Never mention "disabled" here: the Python SDK stops uploading for good on it.
		http.Error(w, ce.Error(), ce.status)
		return ce.reason
	}
	c.log.Warn("upload not stored", "err", err)
	c.metrics.rejected.WithLabelValues("recordings", "unavailable").Inc()
	writeRetryableStatus(w, "upload not stored, retry later", 2*time.Second)
	return "unavailable"
}
