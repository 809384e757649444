package wire

import (
	"fmt"
	"hash/fnv"
)

// Stages of the pipeline, as named in dead letters (Subjects.DLQ,
// HeaderDLQStage) and metrics.
const (
	StageLocate  = "locate"
	StageScore   = "score"
	StageRegress = "regress"
	StageNotify  = "notify"
	// StageForward relays the SDK requests the tee copied (forward.targets).
	StageForward = "forward"
)

// Durable consumers of the pipeline's stages.
const (
	LocatorWebhooks = "locator-webhooks"
	LocatorUploads  = "locator-uploads"
	RegressConsumer = "lkscore-regress"
)

// ScoreConsumer names a worker pool's durable consumer.
func ScoreConsumer(pool string) string { return "score-" + pool }

// NotifyConsumer names the durable consumer of one alert delivery target,
// from its kind ("am", "webhook") and URL: reordering the configuration
// keeps every target's place in the stream.
func NotifyConsumer(kind, url string) string {
	h := fnv.New32a()
	_, _ = h.Write([]byte(url))
	return fmt.Sprintf("lkscore-notify-%s-%08x", kind, h.Sum32())
}

// ForwardConsumer names the durable consumer that relays the tee's copies
// to one forward target, from its name.
func ForwardConsumer(name string) string {
	h := fnv.New32a()
	_, _ = h.Write([]byte(name))
	return fmt.Sprintf("lkscore-forward-%08x", h.Sum32())
}
