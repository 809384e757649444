#!/usr/bin/env bash
# `lkscore rescore` over stored history, as an operator runs it
# (docs/policies.md, "How fast"): a fresh `lkscore serve` (embedded NATS,
# local store) scores SESSIONS sessions of the field mix (`lkscore bench`:
# 20 to 200 turns, both SDKs' forms), then `lkscore rescore --dry-run`
# under examples/policies.yaml runs ROUNDS times (wall clock, median), then
# once without --dry-run (the daemon's workers publish the new scorecards).
# Each dry run's peak RSS (GNU time's maximum resident set size) is printed
# beside its time. PUBLISH=0 leaves out the publishing run.
#   SESSIONS=2000 ROUNDS=3 tools/rescore-bench.sh
#   SESSIONS=100000 ROUNDS=1 PUBLISH=0 tools/rescore-bench.sh
set -euo pipefail
cd "$(dirname "$0")/.."
SESSIONS=${SESSIONS:-2000} ROUNDS=${ROUNDS:-3} PUBLISH=${PUBLISH:-1}
work=$(mktemp -d "${TMPDIR:-/tmp}/lkscore-rescore.XXXXXX")
pid=""
trap '[ -n "$pid" ] && kill "$pid" 2>/dev/null; wait 2>/dev/null; rm -rf "$work"' EXIT
go build -o "$work/lkscore" ./cmd/lkscore
export LIVEKIT_API_KEY=APIrescore LIVEKIT_API_SECRET=rescore-secret-0123456789abcdef LKSCORE_LOG_LEVEL=warn
printf 'nats:\n  embedded_port: 14609\n' >"$work/config.yaml"
# The new model: the same daemon config with examples/policies.yaml's scoring
# section, and a policy and a rule for the agent `lkscore bench` names.
{
  cat "$work/config.yaml"
  sed 's/^  agents:$/  agents:\n    lkscore-bench:\n      latency: {e2e_good_ms: 1000, e2e_bad_ms: 1800}\n      verdict: {pass: 85, warn: 65}/' examples/policies.yaml
  cat <<'YAML'
    - name: bench_latency_budget
      when: {agents: [lkscore-bench]}
      expr: has(metrics.e2e_latency_p95_ms) && metrics.e2e_latency_p95_ms > 1500
      severity: warning
      cost: 10
      component: response_latency
YAML
} >"$work/new.yaml"
"$work/lkscore" serve --config "$work/config.yaml" --listen 127.0.0.1:18680 --ops-listen 127.0.0.1:18690 \
  --data-dir "$work/data" >"$work/lkscore.log" 2>&1 &
pid=$!
for _ in $(seq 1200); do curl -sf http://127.0.0.1:18690/readyz >/dev/null && break; sleep 0.1; done
"$work/lkscore" bench --config "$work/config.yaml" --data-dir "$work/data" --url http://127.0.0.1:18680 \
  --sessions "$SESSIONS" --json >"$work/bench.json"
python3 - "$work/bench.json" <<'PY'
import json, sys
b = json.load(open(sys.argv[1]))
print(f"stored: {b['scored']} sessions scored ({b['sessions_per_sec']:.0f}/s), {b['lost']} lost, {b['duplicated']} duplicated")
PY
args=(rescore --config "$work/new.yaml" --data-dir "$work/data" --since 1h)
for r in $(seq "$ROUNDS"); do
  start=$(date +%s.%N)
  /usr/bin/time -f %M -o "$work/rss-$r" "$work/lkscore" "${args[@]}" --dry-run --json >"$work/dry-$r.json" 2>/dev/null
  end=$(date +%s.%N)
  echo "dry run $r: $(python3 -c "print(round($end-$start, 2))") s, peak RSS $(( $(tail -1 "$work/rss-$r") / 1024 )) MiB" | tee -a "$work/times"
done
python3 - "$work/dry-1.json" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
print(f"dry run: {r['sessions']} sessions, {r['rescored']} rescored, {len(r['removed'])} removed, {len(r['changed'])} changed")
for m in r["movers"][:3]:
    print(f"  mover {m['session']}: {m['old']['verdict']} {m['old']['score']} -> {m['new']['verdict']} {m['new']['score']} {m['new'].get('rules_violated')}")
for a in r["agents"]:
    print(f"  {a['agent'] or '(no agent)'}: {a['sessions']} sessions, transitions {a['transitions']}, mean delta {a['mean_score_delta']}")
PY
python3 -c 'import statistics,sys; t=[float(l.split()[3]) for l in open(sys.argv[1])]; print(f"dry run median: {statistics.median(t):.2f} s over {len(t)} runs")' "$work/times"
[ "$PUBLISH" = 1 ] || exit 0
start=$(date +%s.%N)
"$work/lkscore" "${args[@]}" --json >"$work/pub.json" 2>"$work/pub.log"
end=$(date +%s.%N)
python3 - "$work/pub.json" "$(python3 -c "print(round($end-$start, 2))")" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
print(f"publish: {r['enqueued']} enqueued, {r['published']} published by the workers, {len(r.get('mismatched') or [])} differ from the dry run, in {sys.argv[2]} s")
PY
