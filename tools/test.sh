#!/usr/bin/env bash
# The test command (README, .ci/run): `go test ./...`, with at the end the
# tests that did not run on this machine and why (each skip names what to
# install: versitygw, the agents-js SDK's node_modules, helm, chromium, …).
# Arguments go to go test, e.g. tools/test.sh -run TestScenarios ./scoring
set -euo pipefail
cd "$(dirname "$0")/.."
go build -o "${TMPDIR:-/tmp}/lkscore-testsummary" ./tools/testsummary
[ $# -gt 0 ] || set -- ./...
go test -json "$@" | "${TMPDIR:-/tmp}/lkscore-testsummary"
