package consumer

import (
	"context"
	"log/slog"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/lkscore/lkscore/config"
)

// Subjects names every NATS subject and stream lkscore uses. It is the one
// place where they are spelled; everything else asks it.
type Subjects struct {
	prefix       string // e.g. "lkscore."
	streamPrefix string // e.g. "LKSCORE"
}

// NewSubjects builds the naming scheme from the configured prefixes.
func NewSubjects(subjectPrefix, streamPrefix string) Subjects {
	return Subjects{prefix: subjectPrefix, streamPrefix: streamPrefix}
}

// Webhook is the subject a webhook event of the given name is stored on.
func (s Subjects) Webhook(event string) string { return s.prefix + "webhook." + event }

// UploadStored is the subject announcing a stored recording upload.
func (s Subjects) UploadStored() string { return s.prefix + "upload.stored" }

// Session is the subject of session work with the given close reason.
func (s Subjects) Session(closeReason string) string { return s.prefix + "session." + closeReason }

// Result is the subject of a scorecard for a session with the given close reason.
func (s Subjects) Result(closeReason string) string { return s.prefix + "result." + closeReason }

// DLQ is the dead-letter subject of a stage (locate, score).
func (s Subjects) DLQ(stage string) string { return s.prefix + "dlq." + stage }

// DLQAll matches every dead letter.
func (s Subjects) DLQAll() string { return s.prefix + "dlq.>" }

// SessionStream holds session work, one message per session.
func (s Subjects) SessionStream() string { return s.streamPrefix + "_SESSIONS" }

// ResultStream holds scorecards, replayable by any number of consumers.
func (s Subjects) ResultStream() string { return s.streamPrefix + "_RESULTS" }

// DLQStream holds dead letters.
func (s Subjects) DLQStream() string { return s.streamPrefix + "_DLQ" }

// SessionFacts is the key-value bucket of session facts (room_id.job_id).
func (s Subjects) SessionFacts() string { return s.streamPrefix + "_SESSION_FACTS" }

// EgressLinks is the key-value bucket of egress files by room.
func (s Subjects) EgressLinks() string { return s.streamPrefix + "_EGRESS_LINKS" }

// LocatorConsumers names the locator's durable consumers.
const (
	LocatorWebhooks = "locator-webhooks"
	LocatorUploads  = "locator-uploads"
)

// ScoreConsumer names a worker pool's durable consumer.
func ScoreConsumer(pool string) string { return "score-" + pool }

// WebhookStream is the stream holding received webhooks.
func (s Subjects) WebhookStream() string { return s.streamPrefix + "_WEBHOOKS" }

// UploadStream is the stream holding upload notices.
func (s Subjects) UploadStream() string { return s.streamPrefix + "_UPLOADS" }

// streamConfigs returns lkscore's streams, with explicit settings.
func streamConfigs(s Subjects, c config.Config) []jetstream.StreamConfig {
	n, p := c.NATS, c.Pipeline
	base := jetstream.StreamConfig{
		Retention:  jetstream.LimitsPolicy,
		Storage:    storageType(n.Storage),
		Replicas:   n.Replicas,
		MaxAge:     n.MaxAge,
		MaxBytes:   n.MaxBytes,
		MaxMsgs:    -1,
		Discard:    jetstream.DiscardOld,
		Duplicates: n.DuplicateWindow,
	}
	webhooks := base
	webhooks.Name = s.WebhookStream()
	webhooks.Description = "LiveKit webhooks received by lkscore, one message per event id"
	webhooks.Subjects = []string{s.prefix + "webhook.>"}
	uploads := base
	uploads.Name = s.UploadStream()
	uploads.Description = "Recording uploads stored by the lkscore collector, one message per session"
	uploads.Subjects = []string{s.prefix + "upload.>"}
	// Sessions and results deduplicate on the session key over a longer
	// window: a replayed webhook a day later must not score a session twice.
	sessions := base
	sessions.Name = s.SessionStream()
	sessions.Description = "Session work by close reason, one message per session key"
	sessions.Subjects = []string{s.prefix + "session.>"}
	sessions.Duplicates = p.DedupWindow
	results := sessions
	results.Name = s.ResultStream()
	results.Description = "Scorecards by close reason, one per session key and scoring version"
	results.Subjects = []string{s.prefix + "result.>"}
	results.MaxAge = c.Retention.Results // retention.results
	dlq := base
	dlq.Name = s.DLQStream()
	dlq.Description = "Dead letters by stage: the original message, the error, the stage, the delivery count"
	dlq.Subjects = []string{s.DLQAll()}
	// Alerts deduplicate on the detector's state change (regression.go).
	alerts := sessions
	alerts.Name = s.AlertStream()
	alerts.Description = "Regression, drift and failure alerts by kind and agent: firing, then resolved"
	alerts.Subjects = []string{s.AlertAll()}
	return []jetstream.StreamConfig{webhooks, uploads, sessions, results, dlq, alerts}
}

// storageType maps nats.storage to JetStream's storage type, for streams
// and the key-value bucket alike.
func storageType(s string) jetstream.StorageType {
	if s == "memory" {
		return jetstream.MemoryStorage
	}
	return jetstream.FileStorage
}

// EnsureStreams creates or updates lkscore's streams idempotently.
func EnsureStreams(ctx context.Context, js jetstream.JetStream, s Subjects, c config.Config, log *slog.Logger) error {
	for _, cfg := range streamConfigs(s, c) {
		err := retrySetup(ctx, log, "create or update stream "+cfg.Name, c.NATS.RequestTimeout, func(ctx context.Context) error {
			_, err := js.CreateOrUpdateStream(ctx, cfg)
			return err
		})
		if err != nil {
			return err
		}
	}
	return nil
}
