#!/usr/bin/env bash
# The whole audio evaluation grid (docs/audio.md): 56 calls, one line per
# call, then the tuning set, the held-out set, all of them and each noise
# colour, SNR band and encoder; then the floor sweep (SNR 0-20 dB, what is
# refused as too_noisy and how the rest measures); then the independent
# calls (audio/independent_test.go). Needs espeak-ng, flite, festival,
# sox and opus-tools (apt-get install espeak-ng flite sox opus-tools), and
# npm ci in consumer/testdata/agents-js for the RecorderIO calls.
set -euo pipefail
cd "$(dirname "$0")/.."
LKSCORE_REQUIRE_AUDIO_TOOLS=1 LKSCORE_REQUIRE_AGENTS_JS=1 go test ./audio -run '^(TestGrid|TestGridFloor|TestIndependentCalls)$' -grid all -count=1 -v -timeout 30m "$@" |
	grep -E 'grid_test.go|^(ok|FAIL|---)'
