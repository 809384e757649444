#!/usr/bin/env bash
# The whole audio evaluation grid (48 calls, docs/audio.md): one line per
# call, then the tuning set, the held-out set and all of them. Needs
# espeak-ng, flite, sox and opus-tools (apt-get install espeak-ng flite sox opus-tools).
set -euo pipefail
cd "$(dirname "$0")/.."
LKSCORE_REQUIRE_AUDIO_TOOLS=1 go test ./audio -run '^TestGrid$' -grid all -count=1 -v -timeout 20m "$@" | grep -E 'grid_test.go|^(ok|FAIL|---)'
