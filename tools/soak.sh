#!/usr/bin/env bash
# A long run as a deployment has it: an external nats-server (built from the
# version in go.mod, monitoring on), `lkscore serve --role all` on local
# storage, and `lkscore bench` offering a steady rate for a duration, as a
# separate process. Every 10 s it samples the daemon's RSS, Go heap,
# goroutines and open file descriptors and the NATS streams' and KV buckets'
# messages and bytes into a CSV, then draws them (tools/soak-plot.py).
#   tools/soak.sh 30m 20            # 30 minutes at 20 sessions/s
#   SOAK_OUT=docs/img tools/soak.sh 30m 20
# Output: $SOAK_OUT/soak.csv and $SOAK_OUT/soak.svg (default: the work dir,
# printed at the end), and bench's report (lost, duplicated).
set -euo pipefail
cd "$(dirname "$0")/.."
duration=${1:-30m}
rate=${2:-20}
secs=$(( $(echo "$duration" | sed -E 's/m$/*60/; s/s$//; s/h$/*3600/') ))
work=$(mktemp -d "${SOAK_TMPDIR:-/tmp}/lkscore-soak.XXXXXX")
out=${SOAK_OUT:-$work}
mkdir -p "$out"
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
}
trap cleanup EXIT

go build -o "$work/lkscore" ./cmd/lkscore
go build -o "$work/nats-server" github.com/nats-io/nats-server/v2
nats_port=${NATS_PORT:-14422}
mon_port=${NATS_MON_PORT:-18422}
"$work/nats-server" -a 127.0.0.1 -p "$nats_port" -m "$mon_port" -js -sd "$work/nats" >"$work/nats.log" 2>&1 &
pids+=($!)
export LIVEKIT_API_KEY=${LIVEKIT_API_KEY:-APIsoak} LIVEKIT_API_SECRET=${LIVEKIT_API_SECRET:-soak-secret-0123456789abcdef}
export LKSCORE_NATS_URL="nats://127.0.0.1:$nats_port"
listen=127.0.0.1:${INGEST_PORT:-18480}
ops=127.0.0.1:${OPS_PORT:-18490}
for _ in $(seq 50); do (echo >"/dev/tcp/127.0.0.1/$nats_port") 2>/dev/null && break; sleep 0.1; done
LKSCORE_LOG_LEVEL=${LKSCORE_LOG_LEVEL:-warn} "$work/lkscore" serve --role all --listen "$listen" --ops-listen "$ops" \
  --data-dir "$work/data" >"$work/lkscore.log" 2>&1 &
daemon=$!
pids+=($daemon)
for _ in $(seq 300); do curl -sf "http://$ops/readyz" >/dev/null && break; sleep 0.1; done

metric() { awk -v m="$1" '$1 == m { print $2; exit }' <<<"$2"; }
sample() {
  local start=$1
  echo "t_s,rss_mb,heap_inuse_mb,goroutines,open_fds,stream_msgs,stream_mb,facts_msgs,facts_mb,results_msgs,results_mb"
  while kill -0 "$daemon" 2>/dev/null; do
    local m jsz rss
    m=$(curl -sf "http://$ops/metrics" || true)
    jsz=$(curl -sf "http://127.0.0.1:$mon_port/jsz?streams=true" || echo '{}')
    rss=$(awk '/^VmRSS:/ { print $2 / 1024 }' "/proc/$daemon/status" 2>/dev/null || echo 0)
    python3 - "$(( $(date +%s) - start ))" "$rss" "$(metric go_memstats_heap_inuse_bytes "$m")" "$(metric go_goroutines "$m")" \
      "$(ls "/proc/$daemon/fd" 2>/dev/null | wc -l)" "$jsz" <<'PY'
import json, sys
t, rss, heap, gor, fds, jsz = sys.argv[1:7]
streams = {}
for acc in json.loads(jsz).get("account_details", []):
    for d in acc.get("stream_detail", []):
        st = d.get("state", {})
        streams[d["name"]] = (st.get("messages", 0), st.get("bytes", 0))
tot = (sum(v[0] for v in streams.values()), sum(v[1] for v in streams.values()))
f = streams.get("KV_LKSCORE_SESSION_FACTS", (0, 0))
r = streams.get("LKSCORE_RESULTS", (0, 0))
mb = lambda b: "%.2f" % (b / 1048576)
print(",".join([t, "%.1f" % float(rss), mb(float(heap or 0)), str(int(float(gor or 0))), fds.strip(),
                str(tot[0]), mb(tot[1]), str(f[0]), mb(f[1]), str(r[0]), mb(r[1])]))
PY
    sleep 10
  done
}
sample "$(date +%s)" >"$out/soak.csv" &
sampler=$!
pids+=($sampler)
"$work/lkscore" bench --url "http://$listen" --sessions $((secs * rate)) --rate "$rate" --concurrency 32 --timeout 2m \
  | tee "$out/soak-bench.txt"
sleep 10
kill "$sampler" 2>/dev/null || true
python3 tools/soak-plot.py "$out/soak.csv" "$out/soak.svg"
echo "samples: $out/soak.csv, plot: $out/soak.svg"
