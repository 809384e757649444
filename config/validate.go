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

var closeReasons = map[string]bool{"CR_UNKNOWN": true, "CR_ERROR": true, "CR_JOB_SHUTDOWN": true,
	"CR_PARTICIPANT_DISCONNECTED": true, "CR_USER_INITIATED": true, "CR_COMPLETED": true}

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
	if (n.TLSCertFile == "") != (n.TLSKeyFile == "") {
		add("nats.tls_cert_file and nats.tls_key_file: set both or neither")
	}
	if n.CredsFile != "" && n.NKeyFile != "" {
		add("nats.nkey_file: set either nats.creds_file or nats.nkey_file, not both")
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
	switch c.Role {
	case "all", "ingest", "worker":
	default:
		add("role: %q is not all, ingest or worker", c.Role)
	}
	p := c.Pipeline
	if len(p.CloseReasons) == 0 {
		add("pipeline.close_reasons: at least one close reason is required")
	}
	seen := map[string]bool{}
	for i, r := range p.CloseReasons {
		if !closeReasons[r] {
			add("pipeline.close_reasons[%d]: %q is not a proto close reason name (CR_UNKNOWN, CR_ERROR, CR_JOB_SHUTDOWN, CR_PARTICIPANT_DISCONNECTED, CR_USER_INITIATED, CR_COMPLETED)", i, r)
		}
		if seen[r] {
			add("pipeline.close_reasons[%d]: %q listed twice", i, r)
		}
		seen[r] = true
	}
	if !streamPrefixRE.MatchString(p.Pool) {
		add("pipeline.pool: %q may hold only letters, digits, '-' and '_'", p.Pool)
	}
	if p.Concurrency < 1 || p.Concurrency > 1024 {
		add("pipeline.concurrency: must be 1..1024, got %d", p.Concurrency)
	}
	positive("pipeline.recording_deadline", p.RecordingDeadline)
	positive("pipeline.ack_wait", p.AckWait)
	positive("pipeline.retry_base", p.RetryBase)
	if p.DedupWindow < n.DuplicateWindow || p.DedupWindow > n.MaxAge {
		add("pipeline.dedup_window: %s must lie between nats.duplicate_window (%s) and nats.max_age (%s)", p.DedupWindow, n.DuplicateWindow, n.MaxAge)
	}
	if p.MaxDeliver < 2 {
		add("pipeline.max_deliver: must be at least 2, got %d", p.MaxDeliver)
	}
	if p.SweepInterval < 0 {
		add("pipeline.sweep_interval: must not be negative")
	}
	if p.SweepRate < 1 {
		add("pipeline.sweep_rate: must be at least 1 per second, got %d", p.SweepRate)
	}
	if p.LiveKitAPIKey != "" && c.LiveKit.Keys != nil && c.LiveKit.Keys[p.LiveKitAPIKey] == "" {
		add("pipeline.livekit_api_key: %q is not one of the configured API keys", p.LiveKitAPIKey)
	}
	if p.LiveKitURL != "" {
		positive("pipeline.reconcile_interval", p.ReconcileInterval)
		if !strings.HasPrefix(p.LiveKitURL, "http://") && !strings.HasPrefix(p.LiveKitURL, "https://") && !strings.HasPrefix(p.LiveKitURL, "ws") {
			add("pipeline.livekit_url: %q must be an http(s):// or ws(s):// URL", p.LiveKitURL)
		}
	}
	positive("s3.request_timeout", c.S3.RequestTimeout)
	if c.S3.MaxAttempts < 1 || c.S3.MaxAttempts > 20 {
		add("s3.max_attempts: must be 1..20, got %d", c.S3.MaxAttempts)
	}
	return errors.Join(errs...)
}
