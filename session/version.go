// Package session is lkscore's vocabulary for one session: what every
// part of the daemon, the CLI and the readers of scorecards mean by "the
// session". It holds rules every reader must apply the same way, starting
// with the one version rule. Standard library only (.ci/run checks it).
package session

import "strings"

const (
	// DefaultVersionTag is regression.version_tag's default: the tag
	// version:1.4.2 names version 1.4.2.
	DefaultVersionTag = "version:"
	// MetadataVersionTag prefixes the tag the daemon makes of the version
	// it read from the job's metadata (regression.version_metadata_key).
	MetadataVersionTag = "lkscore.metadata_version:"
)

// Version is the agent's version of a session, the one rule every reader
// applies (policies, regression, the dashboard, baselines, check): the
// first tag with the configured prefix (regression.version_tag; ""
// means DefaultVersionTag), else the SDK's deployment id, else the version
// from the job's metadata (MetadataVersionTag); "" when none names one.
func Version(tags []string, deploymentID, prefix string) string {
	if prefix == "" {
		prefix = DefaultVersionTag
	}
	if v := tagged(tags, prefix); v != "" {
		return v
	}
	if deploymentID != "" {
		return deploymentID
	}
	return tagged(tags, MetadataVersionTag)
}

// tagged is the value of the first tag with prefix ("" when none).
func tagged(tags []string, prefix string) string {
	for _, t := range tags {
		if v, ok := strings.CutPrefix(t, prefix); ok && v != "" {
			return v
		}
	}
	return ""
}
