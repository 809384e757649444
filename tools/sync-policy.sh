#!/usr/bin/env bash
# JetStream's sync policy measured on lkscore's own workload, side by side
# (docs/performance.md, "JetStream's sync policy"): nats-server's default
# (sync_interval 2 min) against `always` (fsync before each ack), on the
# embedded server (`serve` without nats.url) and on a 3-node cluster with
# every stream at 3 replicas. Each round runs the four set-ups in turn, each
# fresh: `lkscore bench` with the field mix of sessions (upload +
# agent_job_ended, as fast as 32 clients go: sessions/s and the webhook 2xx →
# scorecard latency), then `bench --webhooks` (webhooks/s and their 2xx
# latency). Prints one JSON line per run and a table of medians.
#   ROUNDS=3 SESSIONS=600 WEBHOOKS=6000 tools/sync-policy.sh
set -euo pipefail
cd "$(dirname "$0")/.."
ROUNDS=${ROUNDS:-3} SESSIONS=${SESSIONS:-600} WEBHOOKS=${WEBHOOKS:-6000}
work=$(mktemp -d "${TMPDIR:-/tmp}/lkscore-sync.XXXXXX")
pids=()
stop_all() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  for p in "${pids[@]}"; do wait "$p" 2>/dev/null || true; done
  pids=()
}
trap 'stop_all; rm -rf "$work"' EXIT
go build -o "$work/lkscore" ./cmd/lkscore
go build -o "$work/nats-server" github.com/nats-io/nats-server/v2
export LIVEKIT_API_KEY=APIsync LIVEKIT_API_SECRET=sync-secret-0123456789abcdef LKSCORE_LOG_LEVEL=warn
base=${NATS_BASE_PORT:-14500}

wait_ready() {
  for _ in $(seq 1200); do curl -sf http://127.0.0.1:18590/readyz >/dev/null && return 0; sleep 0.1; done
  echo "lkscore not ready" >&2; tail -20 "$1" >&2; exit 1
}

# run <setup> <round>: one fresh set-up, both benches, one JSON line.
run() {
  local setup=$1 round=$2 dir="$work/$1-$2" nats_url="" sync
  mkdir -p "$dir"
  case $setup in *always) sync=always ;; *) sync="" ;; esac
  printf 'nats:\n  embedded_port: %d\n' $((base + 9)) >"$dir/config.yaml"
  [ -n "$sync" ] && printf '  embedded_sync: always\n' >>"$dir/config.yaml"
  if [[ $setup == cluster* ]]; then
    local routes="nats://127.0.0.1:$((base + 11)),nats://127.0.0.1:$((base + 12)),nats://127.0.0.1:$((base + 13))"
    for i in 1 2 3; do
      cat >"$dir/n$i.conf" <<CONF
server_name: n$i
listen: 127.0.0.1:$((base + i))
jetstream { store_dir: "$dir/n$i"${sync:+, sync_interval: always} }
cluster { name: lkscore, listen: 127.0.0.1:$((base + 10 + i)), routes: [$routes] }
CONF
      "$work/nats-server" -c "$dir/n$i.conf" >>"$dir/n$i.log" 2>&1 &
      pids+=($!)
      nats_url="${nats_url:+$nats_url,}nats://127.0.0.1:$((base + i))"
    done
  fi
  LKSCORE_NATS_URL="$nats_url" LKSCORE_NATS_REPLICAS=$([ -n "$nats_url" ] && echo 3 || echo 1) \
    "$work/lkscore" serve --config "$dir/config.yaml" --listen 127.0.0.1:18580 --ops-listen 127.0.0.1:18590 \
    --data-dir "$dir/data" >"$dir/lkscore.log" 2>&1 &
  pids+=($!)
  wait_ready "$dir/lkscore.log"
  local bargs=(--config "$dir/config.yaml" --data-dir "$dir/data" --url http://127.0.0.1:18580 --json)
  [ -n "$nats_url" ] && bargs+=(--nats-url "$nats_url")
  "$work/lkscore" bench "${bargs[@]}" --sessions "$SESSIONS" >"$dir/sessions.json" || true
  "$work/lkscore" bench "${bargs[@]}" --webhooks --sessions "$WEBHOOKS" >"$dir/webhooks.json" || true
  stop_all
  python3 - "$setup" "$round" "$dir" <<'PY'
import json, sys
setup, rnd, d = sys.argv[1:]
s, w = json.load(open(d + "/sessions.json")), json.load(open(d + "/webhooks.json"))
print(json.dumps({"setup": setup, "round": int(rnd), "sessions_per_sec": round(s["sessions_per_sec"], 1),
  "scorecard_p50_ms": s["latency_ms"]["p50"], "scorecard_p99_ms": s["latency_ms"]["p99"], "lost": s["lost"],
  "duplicated": s["duplicated"], "refused": s["refused"] + w["refused"], "webhooks_per_sec": round(w["webhooks_per_sec"]),
  "webhook_p99_ms": w["latency_ms"]["p99"]}))
PY
}

for round in $(seq "$ROUNDS"); do
  for setup in embedded-default embedded-always cluster-default cluster-always; do
    run "$setup" "$round" | tee -a "$work/runs.jsonl"
  done
done
python3 - "$work/runs.jsonl" <<'PY'
import json, statistics, sys
runs = [json.loads(l) for l in open(sys.argv[1])]
keys = ["sessions_per_sec", "scorecard_p50_ms", "scorecard_p99_ms", "webhooks_per_sec", "webhook_p99_ms"]
print("| set-up | runs | " + " | ".join(keys) + " | lost | duplicated | refused |")
print("|---" * (len(keys) + 5) + "|")
for setup in ["embedded-default", "embedded-always", "cluster-default", "cluster-always"]:
    rs = [r for r in runs if r["setup"] == setup]
    if not rs:
        continue
    med = [statistics.median(r[k] for r in rs) for k in keys]
    print(f"| {setup} | {len(rs)} | " + " | ".join(f"{m:g}" for m in med) + f" | {sum(r['lost'] for r in rs)} | {sum(r['duplicated'] for r in rs)} | {sum(r['refused'] for r in rs)} |")
PY
