#!/usr/bin/env bash
# Per-session CPU of a whole `lkscore score` against Python's json.loads
# alone on the same bytes, both as processes, as a user would run them.
#   tools/perf-vs-python.sh [SESSIONS] [FIXTURE...]
# Writes SESSIONS (default 100) session directories (header.binpb +
# chat_history.json) from the field mix's full-precision 200-turn histories
# (scenarios/load/field/py_200.json and js_200.json, alternating), then, in
# alternation, RUNS (default 7) times each:
#   lkscore score --format json DIR…   (the process's user+sys CPU)
#   python3: open, read and json.loads each chat_history.json (same)
# Each side's per-session figure is (CPU with all sessions − CPU with one
# session) / (SESSIONS − 1), so process start-up (Go runtime, Python
# interpreter) is left out of both. Prints the medians and the ratio.
set -euo pipefail
cd "$(dirname "$0")/.."
n=${1:-100}
shift || true
fixtures=("$@")
[ ${#fixtures[@]} -gt 0 ] || fixtures=(scenarios/load/field/py_200.json scenarios/load/field/js_200.json)
runs=${RUNS:-7}
work=$(mktemp -d "${PERF_TMPDIR:-/tmp}/lkscore-perf-py.XXXXXX")
trap 'rm -rf "$work"' EXIT

go build -o "$work/lkscore" ./cmd/lkscore
go run ./tools/mksessions "$work/sessions" "$n" "${fixtures[@]}"
dirs=("$work"/sessions/*)

# cpu CMD… prints the command's user+sys CPU seconds (its output
# discarded), from wait4's rusage at microsecond resolution.
cpu() {
  python3 -c '
import resource, subprocess, sys
before = resource.getrusage(resource.RUSAGE_CHILDREN)
subprocess.run(sys.argv[1:], stdout=subprocess.DEVNULL, check=True)
after = resource.getrusage(resource.RUSAGE_CHILDREN)
print("%.6f" % (after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime))' "$@"
}
cat >"$work/loads.py" <<'PY'
import json, sys
for d in sys.argv[1:]:
    with open(d + "/chat_history.json", "rb") as f:
        json.loads(f.read())
PY
go_all=() go_one=() py_all=() py_one=()
for _ in $(seq "$runs"); do
  go_all+=("$(cpu "$work/lkscore" score --format json "${dirs[@]}")")
  go_one+=("$(cpu "$work/lkscore" score --format json "${dirs[0]}")")
  py_all+=("$(cpu python3 "$work/loads.py" "${dirs[@]}")")
  py_one+=("$(cpu python3 "$work/loads.py" "${dirs[0]}")")
done
python3 - "$n" "${go_all[*]}" "${go_one[*]}" "${py_all[*]}" "${py_one[*]}" "${fixtures[*]}" <<'PY'
import statistics as st, sys
n = int(sys.argv[1])
ga, go1, pa, py1 = ([float(x) for x in a.split()] for a in sys.argv[2:6])
per = lambda all_, one: [(a - o) / (n - 1) * 1000 for a, o in zip(all_, one)]
g, p = per(ga, go1), per(pa, py1)
gm, pm = st.median(g), st.median(p)
print("fixtures: %s, %d sessions, %d runs each, alternating" % (sys.argv[6], n, len(ga)))
print("lkscore score (whole process):  %.2f ms CPU per session (runs %s)" % (gm, " ".join("%.2f" % x for x in sorted(g))))
print("python3 json.loads alone:       %.2f ms CPU per session (runs %s)" % (pm, " ".join("%.2f" % x for x in sorted(p))))
print("ratio: %.2f, lkscore %.2fx as fast (goal: at least 3x, a ratio at most 0.33; issue 58)" % (gm / pm, pm / gm))
PY
