package config

// Privacy configures redaction and what is kept (README "Data and privacy").
type Privacy struct {
	// Redaction is "auto" (honour the session's flags: the header's
	// redaction_enabled, the job's enable_redaction, lk.redaction.enabled)
	// or "always" (treat every session as redacted).
	Redaction string `yaml:"redaction"`
	// Mode is "full" (keep the upload) or "metadata_only" (drop the chat
	// history and audio from the store once the scorecard is published).
	Mode string `yaml:"mode"`
	// IdentityKeys are the keys participant identities are hashed under
	// (HMAC-SHA256), the current one first; a rotation lists the new key
	// then the old one until rooms stored under the old one have aged out
	// (docs/security.md). Empty derives one from the LiveKit API secret.
	// From the environment (LKSCORE_IDENTITY_KEYS, comma-separated) only.
	IdentityKeys []string `yaml:"-"`
}

// Redacted reports whether a session with the given flag is redacted.
func (p Privacy) Redacted(sessionFlag bool) bool { return sessionFlag || p.Redaction == "always" }
