package config

import (
	"errors"
	"fmt"
	"net"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/lkscore/lkscore/rules"
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

// problems collects validation errors, each naming its key.
type problems []error

func (p *problems) add(format string, a ...any) { *p = append(*p, fmt.Errorf(format, a...)) }

func (p *problems) positive(key string, d time.Duration) {
	if d <= 0 {
		p.add("%s: must be positive, got %s", key, d)
	}
}

func (p *problems) url(key, v string, schemes ...string) {
	for _, s := range schemes {
		if strings.HasPrefix(v, s) {
			return
		}
	}
	p.add("%s: %q must start with %s", key, v, strings.Join(schemes, " or "))
}

// Validate reports every problem at once, each naming its key.
func (c Config) Validate() error {
	var p problems
	c.validateServer(&p)
	c.NATS.validate(&p)
	c.Webhook.validate(&p)
	c.Limits.validate(&p)
	c.validateStorage(&p)
	if err := rules.Validate(c.Scoring); err != nil {
		p = append(p, err)
	}
	c.validatePipeline(&p)
	if err := c.Regression.Detect.Validate(); err != nil {
		p = append(p, err)
	}
	p.positive("audio.max_duration", c.Audio.MaxDuration)
	if c.Regression.EvaluateEvery < 1 {
		p.add("regression.evaluate_every: must be at least 1, got %d", c.Regression.EvaluateEvery)
	}
	if c.Regression.MinFiring < 0 {
		p.add("regression.min_firing: must not be negative, got %s", c.Regression.MinFiring)
	}
	c.validateThresholds(&p)
	c.Alerts.validate(&p)
	c.Forward.validate(&p)
	switch c.HTTP.UploadSync {
	case "group", "each":
	default:
		p.add("http.upload_sync: %q is not group or each", c.HTTP.UploadSync)
	}
	if c.Regression.VersionTag == "" {
		p.add("regression.version_tag: must not be empty")
	}
	switch c.Privacy.Redaction {
	case "auto", "always":
	default:
		p.add("privacy.redaction: %q is not auto or always", c.Privacy.Redaction)
	}
	switch c.Privacy.Mode {
	case "full", "metadata_only":
	default:
		p.add("privacy.mode: %q is not full or metadata_only", c.Privacy.Mode)
	}
	if n := len(c.Privacy.IdentityKeys); n > 4 {
		p.add("LKSCORE_IDENTITY_KEYS: %d keys, at most 4 (a rotation needs two: the new key, then the old one)", n)
	}
	for i, k := range c.Privacy.IdentityKeys {
		if len(k) < 16 {
			p.add("LKSCORE_IDENTITY_KEYS: key %d is %d bytes, at least 16 needed (e.g. openssl rand -hex 32)", i+1, len(k))
		}
	}
	if c.Retention.Recordings < 0 {
		p.add("retention.recordings: must not be negative (0 keeps recordings forever)")
	}
	if c.Retention.Recordings > 0 && c.Retention.Recordings < c.Pipeline.RecordingDeadline {
		p.add("retention.recordings: %s is shorter than pipeline.recording_deadline (%s)", c.Retention.Recordings, c.Pipeline.RecordingDeadline)
	}
	p.positive("retention.sweep_interval", c.Retention.SweepInterval)
	p.positive("retention.results", c.Retention.Results)
	if c.Retention.Results > 0 && c.Pipeline.DedupWindow > c.Retention.Results {
		p.add("retention.results: %s is shorter than pipeline.dedup_window (%s)", c.Retention.Results, c.Pipeline.DedupWindow)
	}
	if c.Dashboard.Window < 1 || c.Dashboard.Window > 1_000_000 {
		p.add("dashboard.window: must be 1..1000000, got %d", c.Dashboard.Window)
	}
	if u := c.Dashboard.ExternalURL; u != "" {
		if pu, err := url.Parse(u); err != nil || pu.Hostname() == "" || (pu.Scheme != "http" && pu.Scheme != "https") {
			p.add("dashboard.external_url: %q is not an http(s) URL", u)
		}
	}
	if c.Metrics.MaxAgents < 0 || c.Metrics.MaxAgents > 1000 {
		p.add("metrics.max_agents: must be 0..1000, got %d", c.Metrics.MaxAgents)
	}
	return errors.Join(p...)
}

func (c Config) validateServer(p *problems) {
	for key, addr := range map[string]string{"listen": c.Listen, "ops_listen": c.OpsListen} {
		if _, _, err := net.SplitHostPort(addr); err != nil {
			p.add("%s: %q is not host:port", key, addr)
		}
	}
	if c.Listen == c.OpsListen && c.Listen != "" && !strings.HasSuffix(c.Listen, ":0") {
		p.add("ops_listen: must differ from listen (%q)", c.Listen)
	}
	if c.DataDir == "" {
		p.add("data_dir: required")
	}
	if c.Dashboard.Token != "" {
		if err := TokenStrength(c.Dashboard.Token); err != nil {
			p.add("LKSCORE_DASHBOARD_TOKEN: too weak to guard the dashboard: %w", err)
		}
	}
	switch c.LogLevel {
	case "debug", "info", "warn", "error":
	default:
		p.add("log_level: %q is not one of debug, info, warn, error", c.LogLevel)
	}
	p.positive("shutdown_timeout", c.ShutdownTimeout)
	if c.ShutdownDelay < 0 || (c.ShutdownDelay > 0 && c.ShutdownDelay >= c.ShutdownTimeout) {
		p.add("shutdown_delay: must be 0 or positive and under shutdown_timeout (%s), got %s", c.ShutdownTimeout, c.ShutdownDelay)
	}
	p.positive("http.read_header_timeout", c.HTTP.ReadHeaderTimeout)
	p.positive("http.idle_timeout", c.HTTP.IdleTimeout)
	p.positive("http.upload_wait", c.HTTP.UploadWait)
	p.positive("http.body_timeout", c.HTTP.BodyTimeout)
	if c.HTTP.MaxInflightWebhooks < 1 {
		p.add("http.max_inflight_webhooks: must be at least 1, got %d", c.HTTP.MaxInflightWebhooks)
	}
	if c.HTTP.MaxInflightOTLP < 1 {
		p.add("http.max_inflight_otlp: must be at least 1, got %d", c.HTTP.MaxInflightOTLP)
	}
	if c.HTTP.MaxInflightUploads < 1 {
		p.add("http.max_inflight_uploads: must be at least 1, got %d", c.HTTP.MaxInflightUploads)
	}
	switch c.Role {
	case RoleAll, RoleIngest, RoleWorker:
	default:
		p.add("role: %q is not all, ingest or worker", c.Role)
	}
}

func (n NATS) validate(p *problems) {
	if _, _, err := n.EmbeddedSyncInterval(); err != nil {
		p.add("nats.embedded_sync: %v", err)
	}
	if !subjectPrefixRE.MatchString(n.SubjectPrefix) {
		p.add("nats.subject_prefix: %q must be dot-separated tokens ending in a dot, e.g. \"lkscore.\"", n.SubjectPrefix)
	}
	if !streamPrefixRE.MatchString(n.StreamPrefix) {
		p.add("nats.stream_prefix: %q may hold only letters, digits, '-' and '_'", n.StreamPrefix)
	}
	if n.Replicas < 1 || n.Replicas > 5 {
		p.add("nats.replicas: must be 1..5, got %d", n.Replicas)
	}
	if n.Storage != "file" && n.Storage != "memory" {
		p.add("nats.storage: %q is not file or memory", n.Storage)
	}
	if n.EmbeddedPort < -1 || n.EmbeddedPort > 65535 {
		p.add("nats.embedded_port: %d is not a port (-1 = random)", n.EmbeddedPort)
	}
	if (n.TLSCertFile == "") != (n.TLSKeyFile == "") {
		p.add("nats.tls_cert_file and nats.tls_key_file: set both or neither")
	}
	if n.CredsFile != "" && n.NKeyFile != "" {
		p.add("nats.nkey_file: set either nats.creds_file or nats.nkey_file, not both")
	}
	p.positive("nats.max_age", n.MaxAge)
	p.positive("nats.publish_timeout", n.PublishTimeout)
	if n.UnhealthyAfter < 0 {
		p.add("nats.unhealthy_after: must be 0 (off) or positive, got %s", n.UnhealthyAfter)
	}
	p.positive("nats.request_timeout", n.RequestTimeout)
	if n.DuplicateWindow < TokenLifetime {
		p.add("nats.duplicate_window: %s is shorter than a LiveKit token's lifetime (%s): replays would be stored twice", n.DuplicateWindow, TokenLifetime)
	}
	if n.MaxAge > 0 && n.DuplicateWindow > n.MaxAge {
		p.add("nats.duplicate_window: %s exceeds nats.max_age %s", n.DuplicateWindow, n.MaxAge)
	}
	if n.MaxBytes == 0 || n.MaxBytes < -1 {
		p.add("nats.max_bytes: must be positive or -1 (unlimited), got %d", n.MaxBytes)
	}
	if n.PublishTimeout >= 10*time.Second {
		p.add("nats.publish_timeout: %s must stay under LiveKit's 10s webhook timeout", n.PublishTimeout)
	}
}

func (w Webhook) validate(p *problems) {
	if w.MaxBodyBytes < 1024 {
		p.add("webhook.max_body_bytes: must be at least 1024, got %d", w.MaxBodyBytes)
	}
	if len(w.Events) == 0 {
		p.add("webhook.events: at least one event is required")
	}
	for i, e := range w.Events {
		if !knownEvents[e] {
			p.add("webhook.events[%d]: %q is not a LiveKit webhook event", i, e)
		}
	}
}

func (l Limits) validate(p *problems) {
	for _, v := range []struct {
		key string
		v   int64
	}{
		{"limits.header_bytes", l.HeaderBytes},
		{"limits.chat_history_bytes", l.ChatHistoryBytes},
		{"limits.chat_items", int64(l.ChatItems)},
		{"limits.audio_bytes", l.AudioBytes},
		{"limits.otlp_bytes", l.OTLPBytes},
		{"limits.otlp_elements", int64(l.OTLPElements)},
	} {
		if v.v <= 0 {
			p.add("%s: must be positive, got %d", v.key, v.v)
		}
	}
	if l.HeaderBytes > 1<<20 {
		p.add("limits.header_bytes: %d is over 1 MiB; a header is ~16.5 KiB at most", l.HeaderBytes)
	}
}

// validateStorage checks the recording layout and the S3 settings.
func (c Config) validateStorage(p *problems) {
	if _, err := c.Layout(); err != nil {
		p.add("recordings.key_template: %v", err)
	}
	if c.S3.Bucket == "" && (c.S3.Endpoint != "" || c.S3.Prefix != "") {
		p.add("s3.bucket: required when s3.endpoint or s3.prefix is set")
	}
	if c.S3.Endpoint != "" {
		p.url("s3.endpoint", c.S3.Endpoint, "http://", "https://")
	}
	p.positive("s3.request_timeout", c.S3.RequestTimeout)
	if c.S3.MaxAttempts < 1 || c.S3.MaxAttempts > 20 {
		p.add("s3.max_attempts: must be 1..20, got %d", c.S3.MaxAttempts)
	}
}

func (c Config) validatePipeline(p *problems) {
	pl := c.Pipeline
	if len(pl.CloseReasons) == 0 {
		p.add("pipeline.close_reasons: at least one close reason is required")
	}
	seen := map[string]bool{}
	for i, r := range pl.CloseReasons {
		if !ValidCloseReason(r) {
			p.add("pipeline.close_reasons[%d]: %q is not a proto close reason name (%s)", i, r, strings.Join(CloseReasons(), ", "))
		}
		if seen[r] {
			p.add("pipeline.close_reasons[%d]: %q listed twice", i, r)
		}
		seen[r] = true
	}
	if !streamPrefixRE.MatchString(pl.Pool) {
		p.add("pipeline.pool: %q may hold only letters, digits, '-' and '_'", pl.Pool)
	}
	if pl.Concurrency < 1 || pl.Concurrency > 1024 {
		p.add("pipeline.concurrency: must be 1..1024, got %d", pl.Concurrency)
	}
	p.positive("pipeline.recording_deadline", pl.RecordingDeadline)
	p.positive("pipeline.settle_window", pl.SettleWindow)
	if pl.RoomFinishedWait < 0 || pl.RoomFinishedWait > pl.DedupWindow/2 {
		p.add("pipeline.room_finished_wait: %s must be 0 or more and well inside pipeline.dedup_window (%s)", pl.RoomFinishedWait, pl.DedupWindow)
	}
	if pl.SettleWindow > 0 && pl.SettleWindow > pl.DedupWindow/2 {
		p.add("pipeline.settle_window: %s must be well inside pipeline.dedup_window (%s)", pl.SettleWindow, pl.DedupWindow)
	}
	p.positive("pipeline.ack_wait", pl.AckWait)
	if pl.AckWait > 0 && pl.AckWait < 3*time.Second {
		p.add("pipeline.ack_wait: %s is too short: progress is signalled every third of it", pl.AckWait)
	}
	if pl.MaxAckPending < pl.Concurrency {
		p.add("pipeline.max_ack_pending: %d is below pipeline.concurrency (%d); it is the whole pool's budget", pl.MaxAckPending, pl.Concurrency)
	}
	p.positive("pipeline.health_interval", pl.HealthInterval)
	p.positive("pipeline.stall_after", pl.StallAfter)
	p.positive("pipeline.retry_base", pl.RetryBase)
	if n := c.NATS; pl.DedupWindow < n.DuplicateWindow || pl.DedupWindow > n.MaxAge {
		p.add("pipeline.dedup_window: %s must lie between nats.duplicate_window (%s) and nats.max_age (%s)", pl.DedupWindow, n.DuplicateWindow, n.MaxAge)
	}
	if pl.MaxDeliver < 2 {
		p.add("pipeline.max_deliver: must be at least 2, got %d", pl.MaxDeliver)
	}
	if pl.SweepInterval < 0 {
		p.add("pipeline.sweep_interval: must not be negative")
	}
	if pl.SweepRate < 1 {
		p.add("pipeline.sweep_rate: must be at least 1 per second, got %d", pl.SweepRate)
	}
	if pl.LiveKitAPIKey != "" && c.LiveKit.Keys != nil && c.LiveKit.Keys[pl.LiveKitAPIKey] == "" {
		p.add("pipeline.livekit_api_key: %q is not one of the configured API keys", pl.LiveKitAPIKey)
	}
	if pl.LiveKitURL != "" {
		p.positive("pipeline.reconcile_interval", pl.ReconcileInterval)
		p.positive("pipeline.livekit_timeout", pl.LiveKitTimeout)
		p.url("pipeline.livekit_url", pl.LiveKitURL, "http://", "https://", "ws")
	}
}

func (a Alerts) validate(p *problems) {
	p.positive("alerts.timeout", a.Timeout)
	if len(a.Alertmanager.URLs) > 0 {
		p.positive("alerts.alertmanager.resend_interval", a.Alertmanager.ResendInterval)
	}
	for i, u := range a.Alertmanager.URLs {
		if err := httpURL(u); err != nil {
			p.add("alerts.alertmanager.urls[%d]: %v", i, err)
		}
	}
	if a.ExternalURL != "" {
		if err := httpURL(a.ExternalURL); err != nil {
			p.add("alerts.external_url: %v", err)
		}
	}
	names := map[string]bool{}
	for i, w := range a.Webhooks {
		key := fmt.Sprintf("alerts.webhooks[%d]", i)
		switch {
		case w.URL == "":
			p.add("%s.url: required (or url_env naming a variable that is set)", key)
		default:
			if err := httpURL(w.URL); err != nil {
				p.add("%s.url: %v", key, err)
			}
		}
		switch w.Format {
		case "", "slack", "json": // empty: slack
		default:
			p.add("%s.format: %q is not slack or json", key, w.Format)
		}
		if w.Name != "" && names[w.Name] {
			p.add("%s.name: %q names another webhook too", key, w.Name)
		}
		names[w.Name] = true
	}
}

// EmbeddedSyncInterval is nats.embedded_sync as nats-server takes it: the
// interval (0: the server's default) and whether every write is synced.
func (n NATS) EmbeddedSyncInterval() (interval time.Duration, always bool, err error) {
	switch n.EmbeddedSync {
	case "":
		return 0, false, nil
	case "always":
		return 0, true, nil
	}
	d, err := time.ParseDuration(n.EmbeddedSync)
	if err != nil || d <= 0 {
		return 0, false, fmt.Errorf("%q is neither \"always\" nor a positive duration", n.EmbeddedSync)
	}
	return d, false, nil
}

func (f Forward) validate(p *problems) {
	if len(f.Targets) == 0 {
		return
	}
	p.positive("forward.max_age", f.MaxAge)
	p.positive("forward.timeout", f.Timeout)
	names := map[string]bool{}
	for i, t := range f.Targets {
		key := fmt.Sprintf("forward.targets[%d]", i)
		if err := httpURL(t.URL); err != nil {
			p.add("%s.url: %v", key, err)
		}
		if t.Name == "" {
			p.add("%s.name: required (it labels the target's metrics and logs)", key)
		} else if names[t.Name] {
			p.add("%s.name: %q names another target too", key, t.Name)
		}
		names[t.Name] = true
		for _, s := range t.Signals {
			if !slices.Contains(ForwardSignals(), s) {
				p.add("%s.signals: %q is not one of %s", key, s, strings.Join(ForwardSignals(), ", "))
			}
		}
	}
}

// httpURL checks an absolute http(s) address, saying what is wrong without
// repeating the address (it may hold a secret).
func httpURL(s string) error {
	u, err := url.Parse(s)
	switch {
	case err != nil:
		return errors.New("not a URL")
	case u.Scheme != "http" && u.Scheme != "https":
		return fmt.Errorf("scheme %q is not http or https", u.Scheme)
	case u.Host == "":
		return errors.New("has no host")
	}
	return nil
}

// validateThresholds checks regression.thresholds: each names a rule of
// scoring.rules (or a finding), and names are unique; they run in the
// detector, so regression.enabled must be on.
func (c Config) validateThresholds(p *problems) {
	ts := c.Regression.Thresholds
	if len(ts) == 0 {
		return
	}
	if !c.Regression.Enabled {
		p.add("regression.thresholds: set regression.enabled: true too (the detector counts them)")
	}
	names := make([]string, len(c.Scoring.Rules))
	for i, r := range c.Scoring.Rules {
		names[i] = r.Name
	}
	seen := map[string]bool{}
	for i, t := range ts {
		if err := t.Validate(i, names); err != nil {
			*p = append(*p, err)
		}
		if seen[t.Name] {
			p.add("regression.thresholds[%d] (%s): name used by an earlier threshold", i, t.Name)
		}
		seen[t.Name] = true
	}
}
