#!/usr/bin/env bash
# What 20 rules cost the daemon, side by side (README "Policies, rules and
# rescoring"): a fresh `lkscore serve` (embedded NATS, local store) scores
# SESSIONS sessions of the field mix from `lkscore bench`, once with the
# default config and once with two policies and 20 rules
# (cmd/lkscore/offline/testdata/rules20.yaml, plus the same policy for the
# agent bench names), ROUNDS rounds alternating. Reported per set-up: the
# serve process's CPU per session (user + system, from /proc) and the
# sessions/s; then the medians and the ratio. With the rules, a CPU profile
# of the daemon while it scores (ops_pprof) gives the share of the score
# stage's CPU (score.(*Worker).Handle) spent evaluating rules
# (scoring.applyRules).
#   SESSIONS=1000 ROUNDS=3 tools/rules-cost.sh
set -euo pipefail
cd "$(dirname "$0")/.."
SESSIONS=${SESSIONS:-1000} ROUNDS=${ROUNDS:-3}
work=$(mktemp -d "${TMPDIR:-/tmp}/lkscore-rules.XXXXXX")
pid=""
trap '[ -n "$pid" ] && kill "$pid" 2>/dev/null; wait 2>/dev/null; rm -rf "$work"' EXIT
go build -o "$work/lkscore" ./cmd/lkscore
export LIVEKIT_API_KEY=APIrules LIVEKIT_API_SECRET=rules-secret-0123456789abcdef LKSCORE_LOG_LEVEL=warn
printf 'ops_pprof: true\nnats:\n  embedded_port: 14709\n' >"$work/none.yaml"
{
  cat "$work/none.yaml"
  sed 's/^  agents:$/  agents:\n    lkscore-bench:\n      latency: {e2e_good_ms: 1200, e2e_bad_ms: 2000}\n      verdict: {pass: 85, warn: 65}/' \
    cmd/lkscore/offline/testdata/rules20.yaml | sed 's/when: {agents: \[booking\]}/when: {agents: [booking, lkscore-bench]}/'
} >"$work/rules.yaml"
"$work/lkscore" score --config "$work/rules.yaml" scenarios/data/1_clean_call >/dev/null # the config loads
ticks=$(getconf CLK_TCK)
run() {
  local setup=$1 round=$2 dir="$work/$1-$2"
  mkdir -p "$dir"
  "$work/lkscore" serve --config "$work/$setup.yaml" --listen 127.0.0.1:18780 --ops-listen 127.0.0.1:18790 \
    --data-dir "$dir/data" >"$dir/lkscore.log" 2>&1 &
  pid=$!
  for _ in $(seq 1200); do curl -sf http://127.0.0.1:18790/readyz >/dev/null && break; sleep 0.1; done
  local before after
  before=$(awk '{print $14+$15}' "/proc/$pid/stat")
  curl -sf -o "$dir/cpu.pprof" "http://127.0.0.1:18790/debug/pprof/profile?seconds=6" &
  local prof=$!
  "$work/lkscore" bench --config "$work/$setup.yaml" --data-dir "$dir/data" --url http://127.0.0.1:18780 \
    --sessions "$SESSIONS" --json >"$dir/bench.json"
  after=$(awk '{print $14+$15}' "/proc/$pid/stat")
  wait "$prof" || true
  local share=""
  if [ -s "$dir/cpu.pprof" ]; then
    share=$(go tool pprof -top -cum "$work/lkscore" "$dir/cpu.pprof" 2>/dev/null | awk '
      function sec(x) { if (x ~ /ms$/) { sub("ms", "", x); return x / 1000 } sub("s", "", x); return x + 0 }
      /score\.\(\*Worker\)\.Handle$/ {h=sec($4)} /scoring\.applyRules$/ {r=sec($4)}
      END {if (h > 0) printf "%.4f", r/h}')
  fi
  kill "$pid"; wait "$pid" 2>/dev/null || true; pid=""
  python3 - "$setup" "$round" "$dir/bench.json" "$before" "$after" "$ticks" "$share" <<'PY'
import json, sys
setup, rnd, path, before, after, ticks, share = sys.argv[1:]
b = json.load(open(path))
cpu_ms = (int(after) - int(before)) * 1000 / int(ticks) / max(b["scored"], 1)
print(json.dumps({"setup": setup, "round": int(rnd), "cpu_ms_per_session": round(cpu_ms, 3),
  "sessions_per_sec": round(b["sessions_per_sec"], 1), "p50_ms": b["latency_ms"]["p50"], "p99_ms": b["latency_ms"]["p99"],
  "scored": b["scored"], "lost": b["lost"], "duplicated": b["duplicated"],
  "rules_share_of_score_stage": float(share) if share else None}))
PY
}
for round in $(seq "$ROUNDS"); do
  for setup in none rules; do run "$setup" "$round" | tee -a "$work/runs.jsonl"; done
done
python3 - "$work/runs.jsonl" <<'PY'
import json, statistics, sys
runs = [json.loads(l) for l in open(sys.argv[1])]
keys = ("cpu_ms_per_session", "sessions_per_sec", "p50_ms", "p99_ms")
med = {s: {k: statistics.median(r[k] for r in runs if r["setup"] == s) for k in keys} for s in ("none", "rules")}
for s, m in med.items():
    print(f"{s}: {m['cpu_ms_per_session']:.3f} ms CPU per session, {m['sessions_per_sec']:.0f} sessions/s, "
          f"webhook -> scorecard p50 {m['p50_ms']:.1f} ms, p99 {m['p99_ms']:.1f} ms (medians of {sum(r['setup'] == s for r in runs)})")
shares = sorted(r["rules_share_of_score_stage"] for r in runs if r["setup"] == "rules" and r["rules_share_of_score_stage"] is not None)
if shares:
    print(f"rule evaluation: {100 * statistics.median(shares):.1f}% of the score stage's CPU (median of {len(shares)} profiles: "
          + ", ".join(f"{100 * x:.1f}%" for x in shares) + ")")
print(f"rules / none: CPU {med['rules']['cpu_ms_per_session'] / med['none']['cpu_ms_per_session']:.3f}x, "
      f"throughput {med['rules']['sessions_per_sec'] / med['none']['sessions_per_sec']:.3f}x")
PY
