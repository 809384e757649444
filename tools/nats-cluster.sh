#!/usr/bin/env bash
# A real 3-node NATS JetStream cluster on loopback, as production runs it
# (the README's deploy section; TestNATSClusterNodeLoss runs the same shape):
# nats-server built from the version in go.mod, one store per node, and the
# client URL lkscore takes. Then two lkscore replicas (--role all) with every
# stream at 3 replicas, sharing one local store (one host; use S3 across
# hosts), and `lkscore bench` against
# them. Arguments go to `lkscore bench`, e.g.:
#   tools/nats-cluster.sh --sessions 600 --rate 40
# While it runs, kill a node (its pid is printed) and watch scoring continue;
# NODE_KILL_AFTER=10 kills node n1 after 10 s and
# restarts it 8 s later. bench does not retry: requests answered 503 while the
# cluster elects new leaders count as "refused" (LiveKit and the SDKs retry
# them); every acknowledged session is still scored once. Ctrl-C stops
# everything.
set -euo pipefail
cd "$(dirname "$0")/.."
work=$(mktemp -d "${CLUSTER_TMPDIR:-/tmp}/lkscore-cluster.XXXXXX")
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT

go build -o "$work/lkscore" ./cmd/lkscore
go build -o "$work/nats-server" github.com/nats-io/nats-server/v2
base=${NATS_BASE_PORT:-14300}
routes="nats://127.0.0.1:$((base + 11)),nats://127.0.0.1:$((base + 12)),nats://127.0.0.1:$((base + 13))"
urls=""
declare -A node_pid
start_node() {
  local i=$1
  "$work/nats-server" -a 127.0.0.1 -p $((base + i)) -n "n$i" -js -sd "$work/n$i" --cluster_name lkscore \
    --cluster "nats://127.0.0.1:$((base + 10 + i))" --routes "$routes" >>"$work/n$i.log" 2>&1 &
  node_pid[$i]=$!
  pids+=($!)
  echo "nats node n$i: pid $! client nats://127.0.0.1:$((base + i))"
}
for i in 1 2 3; do
  start_node "$i"
  urls="${urls:+$urls,}nats://127.0.0.1:$((base + i))"
done
export LIVEKIT_API_KEY=${LIVEKIT_API_KEY:-APIcluster} LIVEKIT_API_SECRET=${LIVEKIT_API_SECRET:-cluster-secret-0123456789abcdef}
export LKSCORE_NATS_URL="$urls" LKSCORE_NATS_REPLICAS=3 LKSCORE_LOG_LEVEL=${LKSCORE_LOG_LEVEL:-warn}
for r in a b; do
  port=$([ "$r" = a ] && echo 18180 || echo 18181)
  "$work/lkscore" serve --role all --listen "127.0.0.1:$port" --ops-listen "127.0.0.1:$((port + 100))" \
    --data-dir "$work/data" >"$work/lk-$r.log" 2>&1 &
  pids+=($!)
done
for port in 18280 18281; do
  for _ in $(seq 900); do curl -sf "http://127.0.0.1:$port/readyz" >/dev/null && break; sleep 0.1; done
  curl -sf "http://127.0.0.1:$port/readyz" >/dev/null || { echo "lkscore on ops port $port is not ready:" >&2; tail -5 "$work"/lk-*.log >&2; exit 1; }
done
echo "lkscore replicas ready on 127.0.0.1:18180 and :18181 (NATS $urls)"
if [ -n "${NODE_KILL_AFTER:-}" ]; then
  (
    sleep "$NODE_KILL_AFTER"
    kill -9 "${node_pid[1]}" && echo "killed n1 (pid ${node_pid[1]})"
    sleep 8
    start_node 1
  ) &
  pids+=($!)
fi
"$work/lkscore" bench --url http://127.0.0.1:18180 "$@"
