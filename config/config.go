// Package config holds lkscore's one typed configuration: defaults, an optional
// strict YAML file, environment variables and command-line flags, in that order
// of precedence (flags win). Validate reports every problem at once.
package config

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"runtime"
	"slices"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/lkscore/lkscore/recording"
	"github.com/lkscore/lkscore/regress"
	"github.com/lkscore/lkscore/rules"
	"github.com/lkscore/lkscore/scoring"
	"github.com/lkscore/lkscore/session"
)

// Config is the whole daemon configuration. Pass it by value.
type Config struct {
	// Listen is the address of the webhook and collector HTTP server.
	Listen string `yaml:"listen"`
	// OpsListen is the address of /healthz, /readyz and /metrics.
	OpsListen string `yaml:"ops_listen"`
	// OpsPprof serves Go's profiles (net/http/pprof) under /debug/pprof/ on
	// the ops listener. Off by default: a profile costs CPU while it runs.
	OpsPprof bool `yaml:"ops_pprof"`
	// DataDir holds the embedded NATS store and the local recording store.
	DataDir string `yaml:"data_dir"`
	// LogLevel is one of debug, info, warn, error.
	LogLevel string `yaml:"log_level"`
	// ShutdownTimeout bounds the whole graceful shutdown.
	ShutdownTimeout time.Duration `yaml:"shutdown_timeout"`
	// ShutdownDelay is how long the ingest keeps serving after a SIGTERM,
	// unready meanwhile, before it stops taking requests: Kubernetes
	// removes a terminating pod from its Service's endpoints
	// asynchronously, so requests keep arriving for a moment (the chart:
	// 5s; 0 stops at once).
	ShutdownDelay time.Duration `yaml:"shutdown_delay"`

	HTTP       HTTP       `yaml:"http"`
	LiveKit    LiveKit    `yaml:"livekit"`
	NATS       NATS       `yaml:"nats"`
	Webhook    Webhook    `yaml:"webhook"`
	Limits     Limits     `yaml:"limits"`
	Recordings Recordings `yaml:"recordings"`
	S3         S3         `yaml:"s3"`
	// Scoring holds the weights and thresholds of the scoring model (docs/scoring.md).
	Scoring scoring.Config `yaml:"scoring"`
	// Role is all, ingest (HTTP endpoints) or worker (locator and scoring).
	Role     string   `yaml:"role"`
	Pipeline Pipeline `yaml:"pipeline"`
	// Dashboard configures the web dashboard on the ops listener (/ui).
	Dashboard Dashboard `yaml:"dashboard"`
	// Privacy configures redaction and what is kept of a session.
	Privacy Privacy `yaml:"privacy"`
	// Retention bounds how long recordings and scorecards are kept.
	Retention Retention `yaml:"retention"`
	// Metrics bounds the quality metrics on /metrics.
	Metrics Metrics `yaml:"metrics"`
	// Regression configures regression detection (docs/regression.md).
	Regression Regression `yaml:"regression"`
	// Audio configures heard turn-taking from the stereo recording (docs/audio.md).
	Audio Audio `yaml:"audio"`
	// Alerts configures where regression, drift and failure alerts are
	// delivered besides NATS (docs/alerts.md).
	Alerts Alerts `yaml:"alerts"`
	// Forward relays the agents SDKs' requests lkscore accepted to other
	// collectors, such as LiveKit Cloud's Agent Insights (docs/forward.md).
	Forward Forward `yaml:"forward"`
}

// Forward is the tee: every SDK request (recording upload, OTLP logs,
// traces, metrics) lkscore accepted is copied durably before its answer and
// relayed unchanged, with its own Authorization, to each target by the
// worker role, retried with backoff (pipeline.retry_base, max_deliver).
type Forward struct {
	Targets []ForwardTarget `yaml:"targets"`
	// MaxAge bounds how long a copy waits for its relay: older ones are
	// dropped (counted) and deleted.
	MaxAge time.Duration `yaml:"max_age"`
	// Timeout bounds one relay (one POST, its body included).
	Timeout time.Duration `yaml:"timeout"`
}

// ForwardTarget is one collector the SDK requests are relayed to.
type ForwardTarget struct {
	// Name labels the target in metrics and logs (unique).
	Name string `yaml:"name"`
	// URL is the target's base URL, as LIVEKIT_OBSERVABILITY_URL would be
	// set for it (https://<project>.livekit.cloud for LiveKit Cloud):
	// the request's own path (/observability/…) is appended.
	URL string `yaml:"url"`
	// Signals are what is relayed: upload, logs, traces, metrics (empty: all).
	Signals []string `yaml:"signals"`
}

// ForwardSignals are the requests the tee can relay.
func ForwardSignals() []string { return []string{"upload", "logs", "traces", "metrics"} }

// Relays reports whether t relays signal.
func (t ForwardTarget) Relays(signal string) bool {
	return len(t.Signals) == 0 || slices.Contains(t.Signals, signal)
}

// Alerts configures alert delivery to Prometheus Alertmanager and chat
// webhooks. Every target has its own durable consumer of the alerts
// stream, shared by the worker replicas: each alert state reaches each
// target once, in order, retried with backoff.
type Alerts struct {
	Alertmanager Alertmanager `yaml:"alertmanager"`
	// Webhooks receive every alert, firing and resolved, as a POST.
	Webhooks []AlertWebhook `yaml:"webhooks"`
	// Timeout bounds one delivery (one POST).
	Timeout time.Duration `yaml:"timeout"`
	// ExternalURL is the dashboard's address as the people who get the
	// alert reach it (Alertmanager's generatorURL, the links in a chat
	// message); empty leaves the links out.
	ExternalURL string `yaml:"external_url"`
}

// Alertmanager configures delivery to Alertmanager's v2 API.
type Alertmanager struct {
	// URLs are Alertmanager base addresses (http://alertmanager:9093); every
	// one gets every alert, as Prometheus sends to each member of an HA pair.
	URLs []string `yaml:"urls"`
	// ResendInterval: firing alerts are sent again this often, with an
	// end 4 intervals ahead, so an Alertmanager restart forgets nothing and
	// an alert of a stopped lkscore resolves by itself.
	ResendInterval time.Duration `yaml:"resend_interval"`
}

// resolve fills each webhook's defaults (name webhook-N, format slack) and
// reads url_env.
func (a *Alerts) resolve(getenv func(string) string) {
	hooks := make([]AlertWebhook, len(a.Webhooks))
	for i, w := range a.Webhooks {
		if w.URLEnv != "" && w.URL == "" {
			w.URL = getenv(w.URLEnv)
		}
		if w.Name == "" {
			w.Name = fmt.Sprintf("webhook-%d", i+1)
		}
		if w.Format == "" {
			w.Format = "slack"
		}
		hooks[i] = w
	}
	a.Webhooks = hooks
}

// AlertWebhook is one generic webhook target.
type AlertWebhook struct {
	// Name labels the target in metrics and logs (the URL may hold a secret).
	Name string `yaml:"name"`
	// URL is where the POST goes; from the environment when it holds a
	// secret (url_env).
	URL string `yaml:"url"`
	// URLEnv names an environment variable holding the URL instead.
	URLEnv string `yaml:"url_env"`
	// Format is slack (a Slack-compatible {"text": ...} body, also read by
	// Mattermost and Rocket.Chat) or json (the alert message as on NATS).
	Format string `yaml:"format"`
}

// Audio configures the measurement of the session's recording.ogg.
type Audio struct {
	// Enabled measures the recording when the upload has one.
	Enabled bool `yaml:"enabled"`
	// MaxDuration: longer recordings are refused (a finding, not an error).
	MaxDuration time.Duration `yaml:"max_duration"`
}

// Regression configures regression detection over the scorecards.
type Regression struct {
	// Enabled runs detection in the worker role.
	Enabled bool `yaml:"enabled"`
	// VersionTag is the prefix of the session tag that names the agent's
	// version ("version:" makes the tag version:1.4.2 mean 1.4.2).
	VersionTag string `yaml:"version_tag"`
	// VersionMetadataKey, when set, is a key of the job's (else the room's)
	// JSON metadata whose value names the version; lkscore turns it into the
	// version tag when the job ends.
	VersionMetadataKey string `yaml:"version_metadata_key"`
	// EvaluateEvery: judge a version every this many of its sessions (and
	// at the one that reaches min_sessions); every session is recorded.
	EvaluateEvery int `yaml:"evaluate_every"`
	// MinFiring is the hold time: a firing alert resolves only when it has
	// fired this long and its metric is clearly back, so no alert resolves
	// in the evaluation (or the burst of sessions) that fired it.
	MinFiring time.Duration `yaml:"min_firing"`
	// Detect tunes the statistics.
	Detect regress.Config `yaml:",inline"`
	// Thresholds are the team's own alerts on its rules and findings:
	// N of the last M sessions, or a rate within a window (docs/policies.md).
	Thresholds []regress.Threshold `yaml:"thresholds"`
}

// Roles a process can run (config key role).
const (
	RoleAll    = "all"
	RoleIngest = "ingest" // webhook, collector and OTLP endpoints
	RoleWorker = "worker" // locator, settler and scoring pool
)

// Runs reports whether this process runs the given part (RoleIngest or
// RoleWorker): its own role, or all of them.
func (c Config) Runs(role string) bool { return c.Role == RoleAll || c.Role == role }

// Layout is the recording store's key layout: s3.prefix and
// recordings.key_template (Validate checks it builds).
func (c Config) Layout() (recording.Layout, error) {
	return recording.NewLayout(c.S3.Prefix, c.Recordings.KeyTemplate)
}

// Retention bounds what is kept.
type Retention struct {
	// Recordings is how long the local store keeps an upload (0 keeps them
	// forever). For S3, apply a bucket lifecycle rule (README).
	Recordings time.Duration `yaml:"recordings"`
	// Results is how long scorecards stay on the results stream (its MaxAge).
	Results time.Duration `yaml:"results"`
	// SweepInterval is how often the local store is checked for expired uploads.
	SweepInterval time.Duration `yaml:"sweep_interval"`
}

// Metrics bounds the quality metrics' cardinality.
type Metrics struct {
	// MaxAgents is how many agent names get their own label value on
	// lkscore_scorecards_total in one process; later ones count as "other".
	MaxAgents int `yaml:"max_agents"`
}

// Dashboard configures /ui.
type Dashboard struct {
	// Window is how many of the most recent scorecards the dashboard keeps
	// in memory and shows.
	Window int `yaml:"window"`
	// Token lets clients in that are not trusted for connecting from
	// loopback: in an Authorization: Bearer header or the cookie /ui/login
	// sets, never in the URL. From the environment (LKSCORE_DASHBOARD_TOKEN)
	// only.
	Token string `yaml:"-"`
	// ExternalURL is where users reach the dashboard through a proxy or an
	// ingress, e.g. https://lkscore.example.com. Its host is allowed in the
	// Host header, and loopback clients are no longer let in without the
	// token (behind a proxy or a sidecar every client is on loopback).
	ExternalURL string `yaml:"external_url"`
	// AllowedHosts are more host names the dashboard answers to (the Host
	// header), besides loopback names and ExternalURL's host.
	AllowedHosts []string `yaml:"allowed_hosts"`
}

// LiveKit holds the API keys that sign webhooks and recording uploads.
// Secrets never come from the YAML file or flags: only from the environment
// (LIVEKIT_API_KEY, LIVEKIT_API_SECRET) or the keys file.
type LiveKit struct {
	// KeysFile is a livekit-server style key file (`key: secret` YAML).
	KeysFile string `yaml:"keys_file"`

	// Keys maps API key to secret; filled from env and KeysFile by Load.
	Keys map[string]string `yaml:"-"`
}

// NATS configures the JetStream connection and the streams lkscore owns.
type NATS struct {
	// URL of the NATS server; empty starts an embedded server.
	URL string `yaml:"url"`
	// CredsFile is a NATS credentials file (JWT + NKey seed).
	CredsFile string `yaml:"creds_file"`
	// NKeyFile is a file holding an NKey seed.
	NKeyFile string `yaml:"nkey_file"`
	// TLS client settings: a CA to trust, and a client certificate and key.
	TLSCAFile   string `yaml:"tls_ca_file"`
	TLSCertFile string `yaml:"tls_cert_file"`
	TLSKeyFile  string `yaml:"tls_key_file"`
	// Token authenticates with a token; from the env (LKSCORE_NATS_TOKEN) only.
	Token string `yaml:"-"`
	// EmbeddedPort is the loopback port of the embedded server (-1 = random).
	EmbeddedPort int `yaml:"embedded_port"`
	// EmbeddedSync is how often the embedded server fsyncs JetStream's
	// files: "always" (every write, before its ack) or a duration (nats-
	// server's own default is 2m: acknowledged writes of the last interval
	// are lost in an OS crash or power loss; docs/guarantees.md).
	EmbeddedSync string `yaml:"embedded_sync"`
	// SubjectPrefix prefixes every subject, e.g. "lkscore." gives lkscore.webhook.room_finished.
	SubjectPrefix string `yaml:"subject_prefix"`
	// StreamPrefix prefixes every stream name, e.g. "LKSCORE" gives LKSCORE_WEBHOOKS.
	StreamPrefix string `yaml:"stream_prefix"`
	// Replicas of each stream (3 on a production cluster).
	Replicas int `yaml:"replicas"`
	// Storage is "file" or "memory".
	Storage string `yaml:"storage"`
	// MaxAge is how long stored webhooks and upload notices are kept.
	MaxAge time.Duration `yaml:"max_age"`
	// MaxBytes caps each stream's size (-1 = unlimited).
	MaxBytes int64 `yaml:"max_bytes"`
	// DuplicateWindow is the stream dedup window; at least a LiveKit token's lifetime (6m).
	DuplicateWindow time.Duration `yaml:"duplicate_window"`
	// PublishTimeout bounds one acknowledged publish.
	PublishTimeout time.Duration `yaml:"publish_timeout"`
	// RequestTimeout bounds one JetStream API request (stream, consumer and
	// bucket management, message lookups, lag polls) and the embedded
	// server's start-up.
	RequestTimeout time.Duration `yaml:"request_timeout"`
	// UnhealthyAfter is how long the connection may stay down before
	// /healthz fails, so that Kubernetes restarts a process that cannot
	// recover (0: never on time alone; a connection the client closed
	// for good fails /healthz at once).
	UnhealthyAfter time.Duration `yaml:"unhealthy_after"`
}

// Webhook configures POST /webhook.
type Webhook struct {
	// MaxBodyBytes caps a webhook body (413 beyond).
	MaxBodyBytes int64 `yaml:"max_body_bytes"`
	// Events lists the event names that are stored; others get 200 and are counted.
	Events []string `yaml:"events"`
}

// Limits bound what the collector accepts and what the parsers read.
type Limits struct {
	HeaderBytes      int64 `yaml:"header_bytes"`
	ChatHistoryBytes int64 `yaml:"chat_history_bytes"`
	ChatItems        int   `yaml:"chat_items"`
	AudioBytes       int64 `yaml:"audio_bytes"`
	// OTLPBytes caps an OTLP body, compressed and decompressed alike.
	OTLPBytes int64 `yaml:"otlp_bytes"`
	// OTLPElements caps the messages (resource, scope, record, attribute,
	// value…) one OTLP body may decode into: what decoding costs in memory
	// grows with them, not with the bytes (an empty message is 2 bytes).
	OTLPElements int `yaml:"otlp_elements"`
}

// multipartOverhead is room for part headers and boundaries in a raw
// multipart upload, on top of the parts' own limits.
const multipartOverhead = 64 << 10

// UploadBytes caps a whole multipart upload: every part at its limit plus
// the framing. The collector, the egress path and inspect all use it.
func (l Limits) UploadBytes() int64 {
	return l.HeaderBytes + l.ChatHistoryBytes + l.AudioBytes + multipartOverhead
}

// Parser returns the limits the recording parser enforces.
func (l Limits) Parser() recording.Limits {
	return recording.Limits{HeaderBytes: int(l.HeaderBytes),
		Chat: recording.ChatLimits{MaxBytes: l.ChatHistoryBytes, MaxItems: l.ChatItems}}
}

// HTTP configures both HTTP servers (ingest and ops).
type HTTP struct {
	// ReadHeaderTimeout bounds how long a client may take to send request headers.
	ReadHeaderTimeout time.Duration `yaml:"read_header_timeout"`
	// IdleTimeout closes keep-alive connections idle for this long.
	IdleTimeout time.Duration `yaml:"idle_timeout"`
	// BodyTimeout bounds how long a request body may take to arrive: the
	// whole body of a webhook, an OTLP request or any other request, and, for
	// an authenticated recording upload, each wait for the next bytes (an
	// upload may take longer as long as it keeps sending).
	BodyTimeout time.Duration `yaml:"body_timeout"`
	// MaxInflightWebhooks bounds the signed webhook bodies read at once;
	// beyond it a webhook is answered 503 at once (LiveKit retries 5xx).
	MaxInflightWebhooks int `yaml:"max_inflight_webhooks"`
	// MaxInflightOTLP bounds the authenticated OTLP bodies read and decoded
	// at once; a request waits up to 5 s for one, then gets 503 with
	// Retry-After (the exporters retry).
	MaxInflightOTLP int `yaml:"max_inflight_otlp"`
	// MaxInflightUploads bounds the recording uploads received and written
	// at once; more wait their turn. An upload waiting only for its sync to
	// disk gives its slot back. Default: the process's cores (GOMAXPROCS),
	// so that in --role all a burst of uploads cannot starve scoring of CPU.
	MaxInflightUploads int `yaml:"max_inflight_uploads"`
	// UploadWait is how long an upload may wait for a slot before it is
	// answered 503 with RetryInfo (the SDK retries).
	UploadWait time.Duration `yaml:"upload_wait"`
	// UploadSync is how the local store makes an upload durable before the
	// 2xx: "group" (one syncfs(2) for the uploads that commit together; the
	// default on Linux) or "each" (an fsync of every file and directory).
	UploadSync string `yaml:"upload_sync"`
}

// Recordings configures where recording uploads live.
type Recordings struct {
	// KeyTemplate maps a session to its directory, e.g. "{room_id}/{job_id}/".
	KeyTemplate string `yaml:"key_template"`
}

// S3 configures the S3 recording store; with no bucket, recordings are kept
// under DataDir/recordings. Credentials come from the default AWS chain.
type S3 struct {
	Bucket         string        `yaml:"bucket"`
	Prefix         string        `yaml:"prefix"`
	Region         string        `yaml:"region"`
	Endpoint       string        `yaml:"endpoint"`
	ForcePathStyle bool          `yaml:"force_path_style"`
	RequestTimeout time.Duration `yaml:"request_timeout"`
	MaxAttempts    int           `yaml:"max_attempts"`
}

// TokenLifetime is how long a LiveKit webhook token can be replayed: 5 min
// validity plus the verifier's 1 min leeway (livekit/protocol webhook + auth).
const TokenLifetime = 6 * time.Minute

// Default returns the documented defaults.
func Default() Config {
	return Config{
		Listen:          ":8080",
		OpsListen:       "127.0.0.1:9090", // the chart and the image listen on :9090
		DataDir:         "./lkscore-data",
		LogLevel:        "info",
		ShutdownTimeout: 25 * time.Second,
		NATS: NATS{
			EmbeddedPort:    4222,
			EmbeddedSync:    "always", // docs/performance.md, "JetStream's sync policy"
			SubjectPrefix:   "lkscore.",
			StreamPrefix:    "LKSCORE",
			Replicas:        1,
			Storage:         "file",
			MaxAge:          7 * 24 * time.Hour,
			MaxBytes:        -1,
			DuplicateWindow: 10 * time.Minute,
			PublishTimeout:  3 * time.Second,
			UnhealthyAfter:  5 * time.Minute,
			RequestTimeout:  10 * time.Second,
		},
		HTTP: HTTP{ReadHeaderTimeout: 10 * time.Second, IdleTimeout: 2 * time.Minute, BodyTimeout: 30 * time.Second,
			MaxInflightWebhooks: 256, MaxInflightOTLP: 2, MaxInflightUploads: runtime.GOMAXPROCS(0),
			UploadWait: 30 * time.Second,
			UploadSync: defaultUploadSync()},
		Dashboard: Dashboard{Window: 10_000},
		Metrics:   Metrics{MaxAgents: 20},
		Privacy:   Privacy{Redaction: "auto", Mode: "full"},
		Retention: Retention{Recordings: 30 * 24 * time.Hour, Results: 7 * 24 * time.Hour, SweepInterval: time.Hour},
		Webhook: Webhook{
			MaxBodyBytes: 1 << 20,
			Events: []string{"room_finished", "egress_ended", "agent_job_started", "agent_job_ended",
				"participant_left", "participant_connection_aborted"},
		},
		Limits: Limits{
			HeaderBytes:      64 << 10,
			ChatHistoryBytes: 32 << 20,
			ChatItems:        100_000,
			AudioBytes:       2 << 30,
			OTLPBytes:        16 << 20,
			OTLPElements:     100_000,
		},
		Recordings: Recordings{KeyTemplate: "{room_id}/{job_id}/"},
		S3:         S3{RequestTimeout: 30 * time.Second, MaxAttempts: 5},
		Scoring:    scoring.DefaultConfig(), // its VersionTag is Regression's (load)
		Role:       "all",
		Audio:      Audio{Enabled: true, MaxDuration: 4 * time.Hour},
		Regression: Regression{Enabled: true, VersionTag: session.DefaultVersionTag, EvaluateEvery: 10, MinFiring: 5 * time.Minute,
			Detect: regress.DefaultConfig()},
		Alerts:  Alerts{Timeout: 10 * time.Second, Alertmanager: Alertmanager{ResendInterval: time.Minute}},
		Forward: Forward{MaxAge: 24 * time.Hour, Timeout: 30 * time.Second},
		Pipeline: Pipeline{
			CloseReasons:      DefaultCloseReasons(),
			Pool:              "default",
			Concurrency:       DefaultConcurrency(),
			RecordingDeadline: 30 * time.Minute,
			SettleWindow:      20 * time.Second,
			RoomFinishedWait:  25 * time.Second,
			DedupWindow:       24 * time.Hour,
			AckWait:           5 * time.Second,
			MaxAckPending:     10_000,
			HealthInterval:    time.Second,
			StallAfter:        time.Minute,
			MaxDeliver:        50,
			RetryBase:         5 * time.Second,
			SweepRate:         50,
			ReconcileInterval: 5 * time.Minute,
			LiveKitTimeout:    30 * time.Second,
		},
	}
}

// DefaultConcurrency is pipeline.concurrency's default: 8 messages per core
// (GOMAXPROCS, which follows a container's CPU limit) per stage. Scoring is
// CPU-bound, the rest waits on NATS and the store; docs/performance.md has
// the measurements behind the factor.
func DefaultConcurrency() int { return 8 * runtime.GOMAXPROCS(0) }

// Load builds a Config: defaults, then the YAML file at path (if non-empty),
// then environment variables read through getenv, then set (flags). It
// validates the result and returns every problem at once.
func Load(path string, getenv func(string) string, set func(*Config)) (Config, error) {
	return load(path, getenv, set, true)
}

// LoadForTools is Load for operator commands that do not verify LiveKit
// signatures (dlq): no API key is required.
func LoadForTools(path string, getenv func(string) string, set func(*Config)) (Config, error) {
	return load(path, getenv, set, false)
}

func load(path string, getenv func(string) string, set func(*Config), requireKeys bool) (Config, error) {
	cfg := Default()
	var decodeErr error
	if path != "" {
		b, err := os.ReadFile(path)
		if err != nil {
			return Config{}, fmt.Errorf("read config: %w", err)
		}
		// A key or value the decoder refused leaves the rest decoded:
		// its problems are reported with the validation's, in one round.
		problems, fatal := decodeStrict(b, &cfg)
		if fatal != nil {
			return Config{}, fmt.Errorf("config %s: %w", path, fatal)
		}
		if problems != nil {
			decodeErr = fmt.Errorf("config %s: %w", path, problems)
		}
	}
	envErr := cfg.applyEnv(getenv)
	if set != nil {
		set(&cfg)
	}
	cfg.Scoring.VersionTag = cfg.Regression.VersionTag // the one version rule reads it
	keysErr := cfg.LiveKit.loadKeys(getenv)
	cfg.Alerts.resolve(getenv)
	// Only signature checks (ingest) and the reconciler need a key.
	needKeys := requireKeys && (cfg.Role != "worker" || cfg.Pipeline.LiveKitURL != "")
	if !needKeys && len(cfg.LiveKit.Keys) == 0 {
		keysErr = nil
	}
	if err := errors.Join(decodeErr, envErr, keysErr, cfg.Validate()); err != nil {
		return Config{}, err
	}
	return cfg, nil
}

// decodeStrict decodes YAML, rejecting unknown keys and trailing
// documents. problems are keys and values it refused, each with its line,
// the rest decoded; fatal is a document it could not decode at all.
func decodeStrict(b []byte, cfg *Config) (problems, fatal error) {
	dec := yaml.NewDecoder(bytes.NewReader(b))
	dec.KnownFields(true)
	if err := dec.Decode(cfg); err != nil && !errors.Is(err, io.EOF) {
		var te *yaml.TypeError
		if !errors.As(err, &te) {
			return nil, explainYAML(b, err)
		}
		problems = explainYAML(b, err)
	}
	var extra any
	if err := dec.Decode(&extra); !errors.Is(err, io.EOF) {
		return problems, errors.New("more than one YAML document")
	}
	if err := overlayPolicies(b, &cfg.Scoring); err != nil {
		problems = errors.Join(problems, err)
	}
	return problems, nil
}

// overlayPolicies resolves scoring.agents: each agent's policy is the
// scoring section with what the agent's own keys override. The strict
// decode has checked every key; this decode starts each policy from the
// scoring section instead of from zero.
func overlayPolicies(b []byte, sc *scoring.Config) error {
	if len(sc.Agents) == 0 {
		return nil
	}
	var doc struct {
		Scoring struct {
			Agents map[string]yaml.Node `yaml:"agents"`
		} `yaml:"scoring"`
	}
	if err := yaml.Unmarshal(b, &doc); err != nil {
		return err
	}
	for name, node := range doc.Scoring.Agents {
		p := scoring.AgentPolicy{Config: *sc}
		p.Agents, p.Rules = nil, nil
		if err := node.Decode(&p); err != nil {
			return fmt.Errorf("scoring.agents.%s: %w", name, err)
		}
		sc.Agents[name] = p
	}
	return nil
}

// LogValue redacts secrets so a Config can be logged.
func (c Config) LogValue() slog.Value {
	keys := make([]string, 0, len(c.LiveKit.Keys))
	for k := range c.LiveKit.Keys {
		keys = append(keys, k)
	}
	return slog.GroupValue(
		slog.String("listen", c.Listen),
		slog.String("ops_listen", c.OpsListen),
		slog.String("data_dir", c.DataDir),
		slog.String("nats_url", redactURL(c.NATS.URL)),
		slog.String("subject_prefix", c.NATS.SubjectPrefix),
		slog.String("stream_prefix", c.NATS.StreamPrefix),
		slog.Int("api_keys", len(keys)),
		slog.Any("webhook_events", c.Webhook.Events),
		slog.String("s3_bucket", c.S3.Bucket),
		slog.String("key_template", c.Recordings.KeyTemplate),
		slog.Bool("dashboard_token", c.Dashboard.Token != ""),
		slog.Int("alertmanagers", len(c.Alerts.Alertmanager.URLs)),
		slog.Int("alert_webhooks", len(c.Alerts.Webhooks)),
		slog.String("privacy_mode", c.Privacy.Mode),
		slog.String("redaction", c.Privacy.Redaction),
	)
}

// redactURL hides user info (tokens, passwords) in a NATS URL.
func redactURL(u string) string {
	if i := strings.Index(u, "@"); i >= 0 {
		if j := strings.Index(u, "://"); j >= 0 && j < i {
			return u[:j+3] + "REDACTED@" + u[i+1:]
		}
		return "REDACTED@" + u[i+1:]
	}
	return u
}

// LoadScoring reads only the scoring section of a config file (defaults for
// the rest), for tools that score recordings without running the daemon.
// The file is still parsed strictly. An empty path gives the defaults.
func LoadScoring(path string) (scoring.Config, error) {
	sc, err := readScoring(path)
	if err != nil {
		return scoring.Config{}, err
	}
	if err := rules.Validate(sc); err != nil {
		return scoring.Config{}, err
	}
	return sc, nil
}

// Scorer is the scorer of c's scoring section, reading versions by the
// regression section's version_tag (the one version rule): every part of
// the daemon and the CLI that scores builds its scorer here.
func (c Config) Scorer() (*scoring.Scorer, error) {
	sc := c.Scoring
	sc.VersionTag = c.Regression.VersionTag
	return rules.NewScorer(sc)
}

// LoadScorer is LoadScoring and the scorer of what it read: the rules are
// compiled once, not validated and then compiled again.
func LoadScorer(path string) (*scoring.Scorer, error) {
	sc, err := readScoring(path)
	if err != nil {
		return nil, err
	}
	return rules.NewScorer(sc)
}

// readScoring reads a config file's scoring section, strictly.
func readScoring(path string) (scoring.Config, error) {
	cfg := Default()
	if path != "" {
		b, err := os.ReadFile(path)
		if err != nil {
			return scoring.Config{}, fmt.Errorf("read config: %w", err)
		}
		problems, fatal := decodeStrict(b, &cfg)
		if err := errors.Join(problems, fatal); err != nil {
			return scoring.Config{}, fmt.Errorf("config %s: %w", path, err)
		}
	}
	cfg.Scoring.VersionTag = cfg.Regression.VersionTag
	return cfg.Scoring, nil
}

// defaultUploadSync is http.upload_sync's default: group where the kernel
// has syncfs(2) (Linux), else each.
func defaultUploadSync() string {
	if runtime.GOOS == "linux" {
		return "group"
	}
	return "each"
}
