#!/usr/bin/env bash
# Per-session CPU against Python: lkscore's parse + score + encode of the
# realistic 200-turn chat history (BenchmarkSessionCPU/all, one core, so the
# garbage collector's work counts too) next to Python's json.loads alone on
# the same bytes (CPU time, median of 7 runs of 200 loads).
set -euo pipefail
cd "$(dirname "$0")/.."
fixture=scenarios/load/history_200turns.json
go_ns=$(go test ./recording -run '^$' -bench 'SessionCPU/all$' -cpu 1 -count 5 |
  awk '/^BenchmarkSessionCPU\/all/ {print $3}' | sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}')
py_ns=$(python3 - "$fixture" <<'PY'
import json, sys, time
data = open(sys.argv[1], "rb").read()
runs = []
for _ in range(7):
    t = time.process_time_ns()
    for _ in range(200):
        json.loads(data)
    runs.append((time.process_time_ns() - t) / 200)
runs.sort()
print(int(runs[3]))
PY
)
echo "fixture: $fixture ($(wc -c <"$fixture") bytes)"
echo "lkscore parse+score+encode: $(echo "scale=3; $go_ns/1000000" | bc) ms per session (median of 5, one core)"
echo "python3 json.loads alone:   $(echo "scale=3; $py_ns/1000000" | bc) ms ($(python3 --version))"
echo "ratio: $(echo "scale=2; $go_ns/$py_ns" | bc) (goal: at most 0.67)"
