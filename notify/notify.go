// Package notify delivers lkscore's alerts where teams look: Prometheus
// Alertmanager's v2 API and chat webhooks (a Slack-compatible body, or the
// alert message as lkscore publishes it on NATS). It formats and sends one
// delivery; retries, ordering and once-per-target belong to the caller
// (consumer's notify stages over the alerts stream).
package notify

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
)

// maxResponse bounds how much of a refusal's body is read into the error.
const maxResponse = 512

// Error is a delivery that did not succeed: Status is the HTTP status (0
// when no response came), Retry whether trying again may help.
type Error struct {
	Target string
	Status int
	Body   string
	Retry  bool
	Err    error
}

func (e *Error) Error() string {
	switch {
	case e.Err != nil:
		return fmt.Sprintf("deliver to %s: %v", e.Target, e.Err)
	case e.Body != "":
		return fmt.Sprintf("deliver to %s: HTTP %d: %s", e.Target, e.Status, e.Body)
	}
	return fmt.Sprintf("deliver to %s: HTTP %d", e.Target, e.Status)
}

func (e *Error) Unwrap() error { return e.Err }

// Retryable reports whether err may succeed when tried again: no answer,
// a timeout, 408, 429 or a 5xx. Other refusals (400 a malformed body, 401,
// 403, 404 a wrong URL) will not change by themselves.
func Retryable(err error) bool {
	var e *Error
	if errors.As(err, &e) {
		return e.Retry
	}
	return true
}

// post sends body to u and reads the answer; target names u in errors
// without its path or query (a chat webhook's secret lives there).
func post(ctx context.Context, client *http.Client, target, u, contentType string, body []byte, header http.Header) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, u, bytes.NewReader(body))
	if err != nil {
		return &Error{Target: target, Err: errors.New("bad URL"), Retry: false}
	}
	req.Header.Set("Content-Type", contentType)
	for k, vs := range header {
		req.Header[k] = vs
	}
	resp, err := client.Do(req)
	if err != nil {
		return &Error{Target: target, Err: scrub(err, u), Retry: true}
	}
	defer resp.Body.Close()
	msg, _ := io.ReadAll(io.LimitReader(resp.Body, maxResponse))
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<20)) // let the connection be reused
	if resp.StatusCode >= 200 && resp.StatusCode < 300 {
		return nil
	}
	s := resp.StatusCode
	return &Error{Target: target, Status: s, Body: strings.TrimSpace(string(msg)),
		Retry: s == http.StatusRequestTimeout || s == http.StatusTooManyRequests || s >= 500}
}

// scrub drops the URL from a transport error: net/http quotes it whole.
func scrub(err error, u string) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		return fmt.Errorf("%s: %w", ue.Op, ue.Err)
	}
	return errors.New(strings.ReplaceAll(err.Error(), u, "<url>"))
}

// TargetName is a URL's scheme and host, for logs and metrics.
func TargetName(u string) string {
	p, err := url.Parse(u)
	if err != nil || p.Host == "" {
		return "invalid-url"
	}
	return p.Host
}
