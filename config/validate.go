package config

import (
	"errors"
	"fmt"
	"net"
	"regexp"
	"strings"
	"time"

	"github.com/lkscore/lkscore/recording"
)

// knownEvents are the webhook event names LiveKit sends (livekit/protocol webhook/consts.go).
var knownEvents = map[string]bool{
	"room_started": true, "room_finished": true,
	"participant_joined": true, "participant_left": true, "participant_connection_aborted": true,
	"track_published": true, "track_unpublished": true,
	"egress_started": true, "egress_updated": true, "egress_ended": true,
	"ingress_started": true, "ingress_ended": true,
	"agent_job_pending": true, "agent_job_started": true, "agent_job_ended": true,
}

// KnownEvent reports whether name is a LiveKit webhook event name.
func KnownEvent(name string) bool { return knownEvents[name] }

var (
	subjectPrefixRE = regexp.MustCompile(`^([A-Za-z0-9_-]+\.)+$`)
	streamPrefixRE  = regexp.MustCompile(`^[A-Za-z0-9_-]+$`)
)

// Validate reports every problem at once, each naming its key.
func (c Config) Validate() error {
	var errs []error
	add := func(format string, a ...any) { errs = append(errs, fmt.Errorf(format, a...)) }

	for key, addr := range map[string]string{"listen": c.Listen, "ops_listen": c.OpsListen} {
		if _, _, err := net.SplitHostPort(addr); err != nil {
			add("%s: %q is not host:port", key, addr)
		}
	}
	if c.Listen == c.OpsListen && c.Listen != "" && !strings.HasSuffix(c.Listen, ":0") {
		add("ops_listen: must differ from listen (%q)", c.Listen)
	}
	if c.DataDir == "" {
		add("data_dir: required")
	}
	switch c.LogLevel {
	case "debug", "info", "warn", "error":
	default:
		add("log_level: %q is not one of debug, info, warn, error", c.LogLevel)
	}
	positive := func(key string, d time.Duration) {
		if d <= 0 {
			add("%s: must be positive, got %s", key, d)
		}
	}
	positive("shutdown_timeout", c.ShutdownTimeout)

	n := c.NATS
	if !subjectPrefixRE.MatchString(n.SubjectPrefix) {
		add("nats.subject_prefix: %q must be dot-separated tokens ending in a dot, e.g. \"lkscore.\"", n.SubjectPrefix)
	}
	if !streamPrefixRE.MatchString(n.StreamPrefix) {
		add("nats.stream_prefix: %q may hold only letters, digits, '-' and '_'", n.StreamPrefix)
	}
	if n.Replicas < 1 || n.Replicas > 5 {
		add("nats.replicas: must be 1..5, got %d", n.Replicas)
	}
	if n.Storage != "file" && n.Storage != "memory" {
		add("nats.storage: %q is not file or memory", n.Storage)
	}
	if n.EmbeddedPort < -1 || n.EmbeddedPort > 65535 {
		add("nats.embedded_port: %d is not a port (-1 = random)", n.EmbeddedPort)
	}
	positive("nats.max_age", n.MaxAge)
	positive("nats.publish_timeout", n.PublishTimeout)
	if n.DuplicateWindow < TokenLifetime {
		add("nats.duplicate_window: %s is shorter than a LiveKit token's lifetime (%s): replays would be stored twice", n.DuplicateWindow, TokenLifetime)
	}
	if n.MaxAge > 0 && n.DuplicateWindow > n.MaxAge {
		add("nats.duplicate_window: %s exceeds nats.max_age %s", n.DuplicateWindow, n.MaxAge)
	}
	if n.MaxBytes == 0 || n.MaxBytes < -1 {
		add("nats.max_bytes: must be positive or -1 (unlimited), got %d", n.MaxBytes)
	}
	if n.PublishTimeout >= 10*time.Second {
		add("nats.publish_timeout: %s must stay under LiveKit's 10s webhook timeout", n.PublishTimeout)
	}

	if c.Webhook.MaxBodyBytes < 1024 {
		add("webhook.max_body_bytes: must be at least 1024, got %d", c.Webhook.MaxBodyBytes)
	}
	if len(c.Webhook.Events) == 0 {
		add("webhook.events: at least one event is required")
	}
	for i, e := range c.Webhook.Events {
		if !knownEvents[e] {
			add("webhook.events[%d]: %q is not a LiveKit webhook event", i, e)
		}
	}

	limits := []struct {
		key string
		v   int64
	}{
		{"limits.header_bytes", c.Limits.HeaderBytes},
		{"limits.chat_history_bytes", c.Limits.ChatHistoryBytes},
		{"limits.chat_items", int64(c.Limits.ChatItems)},
		{"limits.audio_bytes", c.Limits.AudioBytes},
		{"limits.otlp_bytes", c.Limits.OTLPBytes},
	}
	for _, l := range limits {
		if l.v <= 0 {
			add("%s: must be positive, got %d", l.key, l.v)
		}
	}
	if c.Limits.HeaderBytes > 1<<20 {
		add("limits.header_bytes: %d is over 1 MiB; a header is ~16.5 KiB at most", c.Limits.HeaderBytes)
	}
	if _, err := recording.NewLayout(c.S3.Prefix, c.Recordings.KeyTemplate); err != nil {
		add("recordings.key_template: %v", err)
	}
	if c.S3.Bucket == "" && (c.S3.Endpoint != "" || c.S3.Prefix != "") {
		add("s3.bucket: required when s3.endpoint or s3.prefix is set")
	}
	if c.S3.Endpoint != "" && !strings.HasPrefix(c.S3.Endpoint, "http://") && !strings.HasPrefix(c.S3.Endpoint, "https://") {
		add("s3.endpoint: %q must start with http:// or https://", c.S3.Endpoint)
	}
	if err := c.Scoring.Validate(); err != nil {
		errs = append(errs, err)
	}
	positive("s3.request_timeout", c.S3.RequestTimeout)
	if c.S3.MaxAttempts < 1 || c.S3.MaxAttempts > 20 {
		add("s3.max_attempts: must be 1..20, got %d", c.S3.MaxAttempts)
	}
	return errors.Join(errs...)
}
