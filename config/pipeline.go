package config

import "time"

// Pipeline configures the locator, the scoring workers and dead letters.
type Pipeline struct {
	// CloseReasons are the close reasons this worker pool scores (its consumer's FilterSubjects).
	CloseReasons []string `yaml:"close_reasons"`
	// Pool names the worker pool: its durable consumer is "score-<pool>".
	Pool string `yaml:"pool"`
	// Concurrency is how many sessions a worker scores at once (= MaxAckPending).
	Concurrency int `yaml:"concurrency"`
	// RecordingDeadline is how long the locator waits for a recording after its webhook.
	RecordingDeadline time.Duration `yaml:"recording_deadline"`
	// DedupWindow is the duplicate window of the session and result streams.
	DedupWindow time.Duration `yaml:"dedup_window"`
	// AckWait is how long a delivered message may go without an ack or a progress signal.
	AckWait time.Duration `yaml:"ack_wait"`
	// MaxDeliver bounds deliveries of one message before it is dead-lettered.
	MaxDeliver int `yaml:"max_deliver"`
	// RetryBase is the first retry delay; it doubles per delivery up to 5 min.
	RetryBase time.Duration `yaml:"retry_base"`
	// SweepInterval, when positive, lists the recording store for sessions never announced.
	SweepInterval time.Duration `yaml:"sweep_interval"`
	// SweepRate caps the sessions per second a sweep or reconcile submits.
	SweepRate int `yaml:"sweep_rate"`
	// LiveKitURL, when set, enables the egress reconciler (ListEgress every ReconcileInterval).
	LiveKitURL        string        `yaml:"livekit_url"`
	ReconcileInterval time.Duration `yaml:"reconcile_interval"`
	// LiveKitAPIKey picks the key (from the configured keys) the reconciler
	// signs with; empty takes the first key in sort order.
	LiveKitAPIKey string `yaml:"livekit_api_key"`
}
