// Package wire is lkscore's public contract on NATS: the subjects and
// streams it publishes on, the headers it sets, and the alert message. A
// program that consumes scorecards or alerts imports this package (and
// scoring for the scorecard type) and nothing of the daemon.
//
// Changes within v1 are additive: new subjects, headers and fields may
// appear, none is renamed or removed, and a consumer must ignore what it
// does not know (docs/contract.md).
package wire
