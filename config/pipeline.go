package config

import (
	"slices"
	"time"

	"github.com/livekit/protocol/livekit/agent"
)

// Pipeline configures the locator, the scoring workers and dead letters.
type Pipeline struct {
	// CloseReasons are the close reasons this worker pool scores (its consumer's FilterSubjects).
	CloseReasons []string `yaml:"close_reasons"`
	// Pool names the worker pool: its durable consumer is "score-<pool>".
	Pool string `yaml:"pool"`
	// AgentResults publishes every scorecard a second time, on
	// lkscore.agent.<agent token>.<close reason> (stream <prefix>_AGENT_RESULTS),
	// so a consumer can take one agent's scorecards filtered by the server.
	// It doubles the scorecards' storage; lkscore.result.<close reason> is
	// unchanged.
	AgentResults bool `yaml:"agent_results"`
	// Concurrency is how many messages one worker process handles at once, per stage.
	Concurrency int `yaml:"concurrency"`
	// MaxAckPending is the pool-wide budget of delivered, unacknowledged
	// messages per consumer (JetStream MaxAckPending), retries waiting their
	// delay included. Far above any one process's concurrency, so a crashed
	// worker's messages cannot block the others.
	MaxAckPending int `yaml:"max_ack_pending"`
	// HealthInterval is how often a store that failed is probed; the
	// pipeline resumes within one interval of its return.
	HealthInterval time.Duration `yaml:"health_interval"`
	// StallAfter is how long a stage may settle nothing while work is
	// pending before the watchdog logs it.
	StallAfter time.Duration `yaml:"stall_after"`
	// SettleWindow is how long after a session's last signal its work waits
	// for more (late OTLP logs, a late webhook) when its facts are not
	// complete yet (docs/facts.md).
	SettleWindow time.Duration `yaml:"settle_window"`
	// RoomFinishedWait is how long, after its last signal, a session whose
	// room's webhooks are flowing (a participant left) and whose room has
	// not finished yet waits for room_finished, to carry the room's end
	// reason: livekit-server sends it departure_timeout (20 s by default)
	// after the room empties. 0 waits only the settle window.
	RoomFinishedWait time.Duration `yaml:"room_finished_wait"`
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
	// LiveKitTimeout bounds one ListEgress call of the reconciler.
	LiveKitTimeout time.Duration `yaml:"livekit_timeout"`
	// LiveKitAPIKey picks the key (from the configured keys) the reconciler
	// signs with; empty takes the first key in sort order.
	LiveKitAPIKey string `yaml:"livekit_api_key"`
}

// CloseReasons are the proto close reason names (livekit.agent.CloseReason),
// in enum order: the one list config, the locator and the workers share.
func CloseReasons() []string {
	nums := make([]int32, 0, len(agent.CloseReason_name))
	for n := range agent.CloseReason_name {
		nums = append(nums, n)
	}
	slices.Sort(nums)
	out := make([]string, len(nums))
	for i, n := range nums {
		out[i] = agent.CloseReason_name[n]
	}
	return out
}

// ValidCloseReason reports whether name is a proto close reason name.
func ValidCloseReason(name string) bool {
	_, ok := agent.CloseReason_value[name]
	return ok
}

// DefaultCloseReasons is every close reason but CR_JOB_SHUTDOWN: a job the
// worker shut down (a deploy, a scale-in) says nothing about the agent.
func DefaultCloseReasons() []string {
	return slices.DeleteFunc(CloseReasons(), func(r string) bool {
		return r == agent.CloseReason_CR_JOB_SHUTDOWN.String()
	})
}
