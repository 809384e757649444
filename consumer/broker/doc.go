// Package broker is the daemon's JetStream plumbing: the embedded server and
// the connection, the streams, set-up requests retried while a cluster
// elects its leaders, the timeouts of NATS calls, and KV, the one
// read-modify-write helper over a key-value bucket. Env is the plumbing
// every stage shares, passed once.
package broker
