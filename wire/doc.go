// Package wire is lkscore's public contract on NATS: the subjects and
// streams it publishes on, the headers it sets, the token mappings of names
// in subjects, and its published messages (alerts, dead letters). The
// scorecard type is session.Scorecard. It imports nothing of lkscore, nor
// any NATS, AWS or HTTP package (CI checks): a program that consumes
// scorecards or alerts imports this package (and scoring) and nothing of
// the daemon (github.com/lkscore/lkscore/consumer).
//
// Subjects also spells the names of lkscore's own streams and buckets
// (session work, facts, regression state), so one prefix moves them all;
// what those hold is the daemon's and not part of the contract.
//
// Changes within v1 are additive: new subjects, headers and fields may
// appear, none is renamed or removed, and a consumer must ignore what it
// does not know (docs/contract.md).
package wire
