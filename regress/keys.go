package regress

import (
	"encoding/base64"
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
