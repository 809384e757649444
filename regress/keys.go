package regress

import (
	"encoding/base64"
	"strings"
)

// Keys of the regression bucket (Subjects.RegressionBucket). Each part is
// base64url, so any agent, version or scoring version is one token.

func b64(s string) string { return base64.RawURLEncoding.EncodeToString([]byte(s)) }

// HistoryKey is an agent version's capped history of samples.
func HistoryKey(k Key) string {
	return "h." + b64(k.Agent) + "." + b64(k.Version) + "." + b64(k.ScoringVersion)
}

// HistoryKeysFilter matches every history key.
const HistoryKeysFilter = "h.>"

// VersionIndexKey lists an agent's versions under one scoring version.
func VersionIndexKey(agent, scoringVersion string) string {
	return "i." + b64(agent) + "." + b64(scoringVersion)
}

// AlertStateKey is an agent version's alert state.
func AlertStateKey(k Key) string {
	return "a." + b64(k.Agent) + "." + b64(k.Version) + "." + b64(k.ScoringVersion)
}

// AlertStatesFilter matches every alert state entry.
const AlertStatesFilter = "a.>"

// BaselineKeysFilter matches every sealed baseline's key.
const BaselineKeysFilter = "b.>"

// BaselineKey is where `lkscore baseline seal` keeps an agent's sealed baseline.
func BaselineKey(agent, scoringVersion string) string {
	return "b." + b64(agent) + "." + b64(scoringVersion)
}

// AgentBaselinesFilter matches the keys of an agent's sealed baselines,
// one per scoring version.
func AgentBaselinesFilter(agent string) string { return "b." + b64(agent) + ".*" }

// BaselineScoringVersion is the scoring version a baseline key names.
func BaselineScoringVersion(key string) (string, bool) {
	parts := strings.Split(key, ".")
	if len(parts) != 3 || parts[0] != "b" {
		return "", false
	}
	v, err := base64.RawURLEncoding.DecodeString(parts[2])
	return string(v), err == nil
}
