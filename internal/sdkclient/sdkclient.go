// Package sdkclient posts what LiveKit and the agents SDKs post, signed as
// they sign it: `lkscore demo` and `lkscore bench` send sessions with it,
// and the crash tests load the daemon with it.
package sdkclient

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"mime/multipart"
	"net/http"
	"net/textproto"
	"time"

	"github.com/livekit/protocol/auth"
	"github.com/livekit/protocol/livekit"
	"google.golang.org/protobuf/encoding/protojson"
)

// Sender posts what LiveKit and the agents SDKs post, signed as they sign
// it: recording uploads and OTLP logs with the SDK's observability token,
// webhooks with LiveKit's body-hash token. `lkscore demo` and the crash
// tests use it.
type Sender struct {
	base        string // http://host:port of the ingest server
	key, secret string
	Client      *http.Client // 10 s timeout by default
}

// New posts to the ingest server at base (http://host:port) with an API key and its secret.
func New(base, key, secret string) *Sender {
	return &Sender{base: base, key: key, secret: secret, Client: &http.Client{Timeout: 10 * time.Second}}
}

// sdkToken is the token the agents SDK sends: the observability write grant.
func (s *Sender) sdkToken() (string, error) {
	return auth.NewAccessToken(s.key, s.secret).SetValidFor(6 * time.Hour).
		SetObservabilityGrant(&auth.ObservabilityGrant{Write: true}).ToJWT()
}

// Upload posts a recording upload as multipart/form-data, header first;
// ogg, when given, is the stereo recording.ogg (the SDK's "audio" part).
func (s *Sender) Upload(ctx context.Context, header, chat []byte, ogg ...[]byte) error {
	var body bytes.Buffer
	mw := multipart.NewWriter(&body)
	parts := []struct {
		name, file, ct string
		b              []byte
	}{{"header", "header.binpb", "application/protobuf", header}, {"chat_history", "chat_history.json", "application/json", chat}}
	for _, o := range ogg {
		parts = append(parts, struct {
			name, file, ct string
			b              []byte
		}{"audio", "recording.ogg", "audio/ogg", o})
	}
	for _, p := range parts {
		if p.b == nil {
			continue // no chat history: an upload of the header alone
		}
		h := textproto.MIMEHeader{}
		h.Set("Content-Disposition", fmt.Sprintf(`form-data; name="%s"; filename="%s"`, p.name, p.file))
		h.Set("Content-Type", p.ct)
		w, err := mw.CreatePart(h)
		if err != nil {
			return err
		}
		if _, err := w.Write(p.b); err != nil {
			return err
		}
	}
	if err := mw.Close(); err != nil {
		return err
	}
	tok, err := s.sdkToken()
	if err != nil {
		return err
	}
	return s.post(ctx, "/observability/recordings/v0", "Bearer "+tok, mw.FormDataContentType(), body.Bytes())
}

// Webhook posts a LiveKit webhook event.
func (s *Sender) Webhook(ctx context.Context, ev *livekit.WebhookEvent) error {
	body, err := protojson.Marshal(ev)
	if err != nil {
		return err
	}
	return s.WebhookBody(ctx, body)
}

// Logs posts an OTLP/JSON logs request, as agents-js exports its logs.
func (s *Sender) Logs(ctx context.Context, body []byte) error {
	tok, err := s.sdkToken()
	if err != nil {
		return err
	}
	return s.post(ctx, "/observability/logs/otlp/v0", "Bearer "+tok, "application/json", body)
}

// WebhookBody posts a webhook body as it is (protojson, as livekit-server
// sent it), signed as LiveKit's notifier signs it.
func (s *Sender) WebhookBody(ctx context.Context, body []byte) error {
	tok, err := s.SignWebhook(body)
	if err != nil {
		return err
	}
	return s.PostWebhook(ctx, body, tok)
}

// SignWebhook is the token LiveKit's notifier sends with body: signed by
// the sender's key, valid 5 minutes, vouching for the body's sha256.
func (s *Sender) SignWebhook(body []byte) (string, error) {
	sum := sha256.Sum256(body)
	return auth.NewAccessToken(s.key, s.secret).SetValidFor(5 * time.Minute).
		SetSha256(base64.StdEncoding.EncodeToString(sum[:])).ToJWT()
}

// PostWebhook posts a webhook body with its token (SignWebhook).
func (s *Sender) PostWebhook(ctx context.Context, body []byte, token string) error {
	return s.post(ctx, "/webhook", token, "application/webhook+json", body)
}

// CloseLog posts the log record agents-js 1.9.0 exports when a session
// closes ("AgentSession closed" with its reason), as OTLP/JSON.
func (s *Sender) CloseLog(ctx context.Context, roomID, jobID, agentName, reason string) error {
	return s.jsLog(ctx, roomID, jobID, 9, "INFO", "AgentSession closed", strAttr("lk.agent_name", agentName), strAttr("reason", reason))
}

// ErrorLog sends the record agents-js 1.9.0 logs when an unrecoverable
// error closes a session (voice/agent_session.ts _onError): pino merges
// the SDK's error event into the record, its transport sends each object
// as its JSON in a string attribute, and the "error" key went through
// pino's err serializer ({type, message, stack}).
func (s *Sender) ErrorLog(ctx context.Context, roomID, jobID, errType, message string) error {
	e, err := json.Marshal(map[string]string{"type": errType, "message": message, "stack": errType + ": " + message + "\n    at AgentSession._onError"})
	if err != nil {
		return err
	}
	return s.jsLog(ctx, roomID, jobID, 17, "ERROR", "AgentSession is closing due to an unrecoverable error",
		strAttr("type", "llm_error"), strAttr("label", "llm"), strAttr("error", string(e)),
		map[string]any{"key": "recoverable", "value": map[string]any{"boolValue": false}})
}

func strAttr(k, v string) map[string]any {
	return map[string]any{"key": k, "value": map[string]any{"stringValue": v}}
}

// jsLog sends one log record as agents-js exports it: OTLP/JSON.
func (s *Sender) jsLog(ctx context.Context, roomID, jobID string, severity int, severityText, msg string, attrs ...map[string]any) error {
	now := fmt.Sprint(time.Now().UnixNano())
	all := []any{strAttr("room_id", roomID), strAttr("job_id", jobID), strAttr("logger.name", "livekit.agents")}
	for _, a := range attrs {
		all = append(all, a)
	}
	body, err := json.Marshal(map[string]any{"resourceLogs": []any{map[string]any{
		"resource": map[string]any{"attributes": []any{strAttr("service.name", "livekit-agents"), strAttr("room_id", roomID), strAttr("job_id", jobID)}},
		"scopeLogs": []any{map[string]any{
			"scope": map[string]any{"name": "livekit.agents"},
			"logRecords": []any{map[string]any{
				"timeUnixNano": now, "observedTimeUnixNano": now, "severityNumber": severity, "severityText": severityText,
				"body": map[string]any{"stringValue": msg}, "traceId": "", "spanId": "", "attributes": all,
			}},
		}},
	}}})
	if err != nil {
		return err
	}
	tok, err := s.sdkToken()
	if err != nil {
		return err
	}
	return s.post(ctx, "/observability/logs/otlp/v0", "Bearer "+tok, "application/json", body)
}

// post sends one request and fails unless it is answered 200.
func (s *Sender) post(ctx context.Context, path, authz, contentType string, body []byte) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, s.base+path, bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Authorization", authz)
	req.Header.Set("Content-Type", contentType)
	resp, err := s.Client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	msg, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
	if resp.StatusCode != http.StatusOK {
		return &StatusError{path: path, status: resp.StatusCode, msg: string(bytes.TrimSpace(msg))}
	}
	return nil
}

// StatusError is a non-200 answer.
type StatusError struct {
	path   string
	status int
	msg    string
}

func (e *StatusError) Error() string { return fmt.Sprintf("POST %s: %d %s", e.path, e.status, e.msg) }

// Retryable reports whether LiveKit or the SDK would try again.
func (e *StatusError) Retryable() bool { return e.status >= 500 }
