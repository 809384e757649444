// Package wire is lkscore's public contract on NATS: the subjects,
// streams and buckets it uses and their keys, the headers it sets, and its
// messages (work items, upload notices, dead letters, alerts, session
// facts). It lives beside the daemon's parts but imports none of them, nor
// any NATS, AWS or HTTP package: a program that consumes scorecards or
// alerts imports this package (and scoring for the scorecard type) and
// nothing of the daemon (github.com/lkscore/lkscore/consumer).
//
// Changes within v1 are additive: new subjects, headers and fields may
// appear, none is renamed or removed, and a consumer must ignore what it
// does not know (docs/contract.md).
package wire
