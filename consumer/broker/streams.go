package broker

import (
	"context"
	"log/slog"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/lkscore/lkscore/config"
	"github.com/lkscore/lkscore/wire"
)

// streamConfigs returns lkscore's streams, with explicit settings.
func streamConfigs(s wire.Subjects, c config.Config) []jetstream.StreamConfig {
	n, p := c.NATS, c.Pipeline
	base := jetstream.StreamConfig{
		Retention:  jetstream.LimitsPolicy,
		Storage:    StorageType(n.Storage),
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
	webhooks.Subjects = []string{s.WebhookAll()}
	uploads := base
	uploads.Name = s.UploadStream()
	uploads.Description = "Recording uploads stored by the lkscore collector, one message per session"
	uploads.Subjects = []string{s.UploadAll()}
	// sessions and results deduplicate on the session key over a longer
	// window: a replayed webhook a day later must not score a session twice.
	sessions := base
	sessions.Name = s.SessionStream()
	sessions.Description = "Session work by close reason, one message per session key"
	sessions.Subjects = []string{s.SessionAll()}
	sessions.Duplicates = p.DedupWindow
	results := sessions
	results.Name = s.ResultStream()
	results.Description = "Scorecards by close reason, one per session key and scoring version"
	results.Subjects = []string{s.ResultAll()}
	results.MaxAge = c.Retention.Results // retention.results
	dlq := base
	dlq.Name = s.DLQStream()
	dlq.Description = "Dead letters by stage: the original message, the error, the stage, the delivery count"
	dlq.Subjects = []string{s.DLQAll()}
	// alerts deduplicate on the detector's state change (consumer/internal/detect).
	alerts := sessions
	alerts.Name = s.AlertStream()
	alerts.Description = "Regression, drift and failure alerts by kind and agent: firing, then resolved"
	alerts.Subjects = []string{s.AlertAll()}
	out := []jetstream.StreamConfig{webhooks, uploads, sessions, results, dlq, alerts}
	if p.AgentResults {
		byAgent := results
		byAgent.Name = s.AgentResultStream()
		byAgent.Description = "Scorecards by agent token and close reason (pipeline.agent_results): the results stream again"
		byAgent.Subjects = []string{s.AgentResultAll()}
		out = append(out, byAgent)
	}
	if len(c.Forward.Targets) > 0 {
		// The tee's notices, one per copy and target, removed once relayed
		// (work queue: each target's consumer filters its own subject);
		// none waits past forward.max_age.
		fwd := base
		fwd.Name = s.ForwardStream()
		fwd.Description = "SDK requests copied by the tee, one notice per target, until relayed (forward.targets)"
		fwd.Subjects = []string{s.ForwardAll()}
		fwd.Retention = jetstream.WorkQueuePolicy
		fwd.MaxAge = c.Forward.MaxAge
		out = append(out, fwd)
	}
	return out
}

// StorageType maps nats.storage to JetStream's storage type, for streams
// and the key-value bucket alike.
func StorageType(s string) jetstream.StorageType {
	if s == "memory" {
		return jetstream.MemoryStorage
	}
	return jetstream.FileStorage
}

// EnsureStreams creates or updates lkscore's streams idempotently.
func EnsureStreams(ctx context.Context, js jetstream.JetStream, s wire.Subjects, c config.Config, log *slog.Logger) error {
	for _, cfg := range streamConfigs(s, c) {
		err := RetrySetup(ctx, log, "create or update stream "+cfg.Name, c.NATS.RequestTimeout, func(ctx context.Context) error {
			_, err := js.CreateOrUpdateStream(ctx, cfg)
			return err
		})
		if err != nil {
			return err
		}
	}
	return nil
}
