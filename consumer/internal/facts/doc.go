// Package facts is what every signal said about one session (the recording
// header, webhooks, OTLP logs and spans), kept as a set of observations with
// their provenance in the KV bucket <stream prefix>_SESSION_FACTS, key
// "<room_id>.<job_id>" ("<room_id>._" for an upload without a job id). The
// set only grows, duplicates are dropped and everything derived from it is a
// pure function of the set (Merge, Resolve, the room's story), so the final
// facts depend neither on the order in which signals arrive nor on how
// often. The package is pure (no NATS, S3 or store: CI checks); package
// factstore keeps the sets in the bucket. docs/facts.md has the rules.
package facts
