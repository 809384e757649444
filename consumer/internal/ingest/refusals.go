package ingest

import (
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/livekit/protocol/webhook"

	"github.com/lkscore/lkscore/consumer/internal/seen"
)

// Why a request was refused before anything was stored, as the warn log and
// the 401's text name it: a wiring mistake (the wrong key, the wrong secret,
// the wrong URL) shows at the default log level, once per reason and minute
// in full.
const (
	refusedNoToken      = "no_token"
	refusedBadToken     = "bad_token"
	refusedUnknownKey   = "unknown_key"
	refusedBadSignature = "bad_signature"
	refusedBadChecksum  = "bad_checksum"
	refusedNoGrant      = "no_grant"
	refusedBadUpload    = "bad_upload"
	refusedUnknownPath  = "unknown_path"
	refusedBadID        = "bad_id" // an id or name out of the one id rule (wire.CheckID)
)

// authError is a refused token: its reason, the key it named, and what to
// say about it.
type authError struct {
	reason, key string
	err         error
}

func (e *authError) Error() string {
	key := cleanPath(e.key) // the token's own claim, unverified: bounded before it is echoed
	switch e.reason {
	case refusedNoToken:
		return "no token in the Authorization header"
	case refusedUnknownKey:
		return fmt.Sprintf("API key %q is not one lkscore knows (LIVEKIT_API_KEY, or livekit.keys_file / LKSCORE_KEYS_FILE)", key)
	case refusedBadSignature:
		return fmt.Sprintf("the token does not verify with the secret of API key %q (the secret differs, or the token expired)", key)
	case refusedBadChecksum:
		return "the body does not match the token's sha256"
	case refusedNoGrant:
		return fmt.Sprintf("the token of API key %q lacks the observability write grant", key)
	}
	return fmt.Sprintf("the token does not parse: %v", e.err)
}

func (e *authError) Unwrap() error { return e.err }

// authReason is err's refusal reason and API key.
func authReason(err error) (reason, key string) {
	var ae *authError
	if errors.As(err, &ae) {
		return ae.reason, ae.key
	}
	if errors.Is(err, webhook.ErrInvalidChecksum) {
		return refusedBadChecksum, ""
	}
	return refusedBadToken, ""
}

// refusalLog logs refusals at warn: per endpoint and reason, the first
// perMinute of each minute in full, then only counts them, and says how
// many it left out with the next one it logs.
type refusalLog struct {
	log       *slog.Logger
	now       func() time.Time
	perMinute int
	seen      *seen.Tracker // counts every refusal, logged or not (nil: none)

	mu      sync.Mutex
	windows map[string]*refusalWindow
}

type refusalWindow struct {
	start   time.Time
	logged  int
	skipped int
}

// maxRefusalKeys bounds the windows kept: endpoints × reasons is a closed set.
const maxRefusalKeys = 64

func newRefusalLog(log *slog.Logger, now func() time.Time) *refusalLog {
	if now == nil {
		now = time.Now
	}
	return &refusalLog{log: log, now: now, perMinute: 3, windows: map[string]*refusalWindow{}}
}

// refused logs one refusal of endpoint for reason; attrs say the rest (the
// path, the API key, the error).
func (l *refusalLog) refused(endpoint, reason, msg string, attrs ...any) {
	if l == nil {
		return
	}
	l.seen.Refuse(endpoint, reason, attrValue(attrs, "api_key"))
	if l.log == nil {
		return
	}
	key := endpoint + "\x00" + reason
	now := l.now()
	l.mu.Lock()
	w := l.windows[key]
	if w == nil && len(l.windows) < maxRefusalKeys {
		w = &refusalWindow{start: now}
		l.windows[key] = w
	}
	if w == nil {
		l.mu.Unlock()
		return
	}
	skipped := 0
	if now.Sub(w.start) >= time.Minute {
		skipped = w.skipped
		*w = refusalWindow{start: now}
	}
	log := w.logged < l.perMinute
	if log {
		w.logged++
	} else {
		w.skipped++
	}
	l.mu.Unlock()
	if skipped > 0 {
		l.log.Warn(fmt.Sprintf("%d more %s requests refused (%s) in the minute before, not logged one by one", skipped, endpoint, reason),
			"endpoint", endpoint, "reason", reason, "count", skipped)
	}
	if log {
		l.log.Warn(msg, append([]any{"endpoint", endpoint, "reason", reason}, attrs...)...)
	}
}

// tokenHint is what a refused token's log line suggests.
func tokenHint(reason string) string {
	switch reason {
	case refusedUnknownKey:
		return "add the key and its secret (LIVEKIT_API_KEY and LIVEKIT_API_SECRET, or livekit.keys_file), as the server or the agent has it"
	case refusedBadSignature:
		return "the secret configured for this key differs from the server's or the agent's, or their clocks differ by more than a minute"
	case refusedNoToken:
		return "LiveKit signs every webhook and the SDK every upload: is this request from LiveKit?"
	case refusedNoGrant:
		return "the agent's token needs ObservabilityGrants(write=True), as the SDK mints it"
	}
	return ""
}

// cleanPath is a request path fit for a log line.
func cleanPath(p string) string {
	if len(p) > 120 {
		p = p[:120] + "…"
	}
	return strings.ToValidUTF8(p, "?")
}

// attrValue is the string value of key among slog's alternating attrs.
func attrValue(attrs []any, key string) string {
	for i := 0; i+1 < len(attrs); i += 2 {
		if k, ok := attrs[i].(string); ok && k == key {
			v, _ := attrs[i+1].(string)
			return v
		}
	}
	return ""
}
