package consumer

import (
	"context"
	"fmt"
	"time"

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

// WebhookStream is the stream holding received webhooks.
func (s Subjects) WebhookStream() string { return s.streamPrefix + "_WEBHOOKS" }

// UploadStream is the stream holding upload notices.
func (s Subjects) UploadStream() string { return s.streamPrefix + "_UPLOADS" }

// streamConfigs returns the streams ingest owns, with explicit settings.
func streamConfigs(s Subjects, n config.NATS) []jetstream.StreamConfig {
	storage := jetstream.FileStorage
	if n.Storage == "memory" {
		storage = jetstream.MemoryStorage
	}
	base := jetstream.StreamConfig{
		Retention:  jetstream.LimitsPolicy,
		Storage:    storage,
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
	return []jetstream.StreamConfig{webhooks, uploads}
}

// EnsureStreams creates or updates lkscore's streams idempotently.
func EnsureStreams(ctx context.Context, js jetstream.JetStream, s Subjects, n config.NATS) error {
	for _, cfg := range streamConfigs(s, n) {
		ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		_, err := js.CreateOrUpdateStream(ctx, cfg)
		cancel()
		if err != nil {
			return fmt.Errorf("create or update stream %s: %w", cfg.Name, err)
		}
	}
	return nil
}
