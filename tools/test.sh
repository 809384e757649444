#!/usr/bin/env bash
# The test command (README, .ci/run): every package's tests once, at the end
# the tests that did not run on this machine and why (each skip names what to
# install: versitygw, the agents-js SDK's node_modules, helm, chromium, …).
#
# The packages with goroutines or state shared between them (the daemon, the
# store, the commands, the dashboard, the scorer's pool, the example
# consumer, the test servers and clients) run under the race detector when
# cgo and a C compiler are there (CI installs gcc); the others run plain,
# among them cmd/lkscore/crashtest, whose processes are built without it and
# whose load is timed. Each package runs once. -short skips the crash,
# cluster, load and other slow tests (docs/development.md).
# Arguments go to go test as they are, e.g. tools/test.sh -run TestScenarios ./scoring
set -euo pipefail
cd "$(dirname "$0")/.."
go build -o "${TMPDIR:-/tmp}/lkscore-testsummary" ./tools/testsummary
summary="${TMPDIR:-/tmp}/lkscore-testsummary"
if [ $# -gt 0 ] && [ "${1:-}" != "-short" ]; then
  go test -json "$@" | "$summary"
  exit
fi
race_set='/consumer(/|$)|/store$|/cmd/lkscore(/offline)?$|/dashboard$|/scoring$|/examples/|/internal/(testenv|sdkclient)$'
race=$(go list ./... | grep -E "$race_set" || true)
# The crash tests time how fast scoring resumes after a fault: they run last
# and alone, not beside a CPU-bound package (audio's grid) on two cores.
alone='/cmd/lkscore/crashtest$'
plain=$(go list ./... | grep -vE "$race_set" | grep -vE "$alone" || true)
last=$(go list ./... | grep -E "$alone" || true)
if [ "$(go env CGO_ENABLED)" = 1 ] && command -v "$(go env CC)" >/dev/null 2>&1; then
  race_flag=-race
else
  race_flag=
  echo "no C compiler for cgo: the race detector is off (install gcc to turn it on)" >&2
fi
{
  go test -json $race_flag "$@" $race
  go test -json "$@" $plain
  go test -json "$@" $last
} | "$summary"
