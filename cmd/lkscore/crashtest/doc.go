// Package crashtest holds the tests that run lkscore as the chart runs it:
// separate processes (the binary built from this tree, nats-server from the
// module version in go.mod, versitygw), killed with SIGKILL, stopped,
// restarted, a 3-node NATS cluster losing a node, a locked data dir. The
// processes are built without the race detector, and the load they get is
// timed, so these tests run without -race (tools/test.sh), apart from the
// in-process tests of cmd/lkscore, which run under it.
package crashtest
