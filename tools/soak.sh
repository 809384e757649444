#!/usr/bin/env bash
# A long run as a deployment has it: an external nats-server (built from the
# version in go.mod, monitoring on), `lkscore serve --role all` on local
# storage, and `lkscore bench` offering a steady rate for a duration, as a
# separate process. Every 10 s it samples the daemon's RSS, Go heap,
# goroutines and open file descriptors and the NATS streams' and KV buckets'
# messages and bytes into a CSV, then draws them (tools/soak-plot.py).
#   tools/soak.sh 30m 20            # 30 minutes at 20 sessions/s
#   SOAK_OUT=docs/img tools/soak.sh 30m 20
#   SOAK_TOPOLOGY=split SOAK_KILL_AT=900 tools/soak.sh 30m 20
# SOAK_TOPOLOGY=split runs the chart's split workloads as processes instead:
# `--role ingest` and two `--role worker` on one data directory. SOAK_KILL_AT
# (seconds) kill -9s the second worker then and starts it again
# SOAK_RESTART_AFTER (default 5) seconds later. In split mode the CSV samples
# the first worker (the survivor), and workers.csv counts each worker's
# scorecards every second, so a stall of the survivor shows as a gap.
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
  for p in "${pids[@]}" $(cat "$work/restarted.pid" 2>/dev/null); do kill "$p" 2>/dev/null || true; done
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
topology=${SOAK_TOPOLOGY:-all}
log_level=${LKSCORE_LOG_LEVEL:-warn}
start_role() { # role ops-addr log [listen]
  local extra=()
  [ -n "${4:-}" ] && extra=(--listen "$4")
  LKSCORE_LOG_LEVEL=$log_level "$work/lkscore" serve --role "$1" "${extra[@]}" --ops-listen "$2" \
    --data-dir "$work/data" >>"$work/$3" 2>&1 &
  started=$!
  pids+=($started)
  for _ in $(seq 300); do curl -sf "http://$2/readyz" >/dev/null && break; sleep 0.1; done
}
if [ "$topology" = split ]; then
  start_role ingest "$ops" ingest.log "$listen"
  w1_ops=127.0.0.1:${W1_OPS_PORT:-18491}
  w2_ops=127.0.0.1:${W2_OPS_PORT:-18492}
  start_role worker "$w1_ops" worker1.log
  daemon=$started
  start_role worker "$w2_ops" worker2.log
  worker2=$started
  sampled_ops=$w1_ops
else
  start_role all "$ops" lkscore.log "$listen"
  daemon=$started
  sampled_ops=$ops
fi

metric() { awk -v m="$1" '$1 == m { print $2; exit }' <<<"$2"; }
# Goroutines and FDs move with the work in flight at the instant of a sample
# (a request being served, a message being scored), so they are read every
# second and each row carries the median of its 10 s window (the level a
# leak would raise) and the window's maximum (the excursions).
sample() {
  local start=$1 i=0 gors=() fdss=()
  echo "t_s,rss_mb,heap_inuse_mb,goroutines,open_fds,stream_msgs,stream_mb,facts_msgs,facts_mb,results_msgs,results_mb,goroutines_max,open_fds_max"
  while kill -0 "$daemon" 2>/dev/null; do
    local m jsz rss
    m=$(curl -sf "http://$sampled_ops/metrics" || true)
    gors+=("$(metric go_goroutines "$m")")
    fdss+=("$(ls "/proc/$daemon/fd" 2>/dev/null | wc -l)")
    i=$((i + 1))
    if [ $((i % 10)) -eq 1 ]; then
      jsz=$(curl -sf "http://127.0.0.1:$mon_port/jsz?streams=true" || echo '{}')
      rss=$(awk '/^VmRSS:/ { print $2 / 1024 }' "/proc/$daemon/status" 2>/dev/null || echo 0)
      python3 - "$(( $(date +%s) - start ))" "$rss" "$(metric go_memstats_heap_inuse_bytes "$m")" "${gors[*]}" \
        "${fdss[*]}" "$jsz" <<'PY'
import json, statistics, sys
t, rss, heap, gors, fdss, jsz = sys.argv[1:7]
gors = [int(float(g)) for g in gors.split() if g]
fdss = [int(f) for f in fdss.split() if f]
streams = {}
for acc in json.loads(jsz).get("account_details", []):
    for d in acc.get("stream_detail", []):
        st = d.get("state", {})
        streams[d["name"]] = (st.get("messages", 0), st.get("bytes", 0))
tot = (sum(v[0] for v in streams.values()), sum(v[1] for v in streams.values()))
f = streams.get("KV_LKSCORE_SESSION_FACTS", (0, 0))
r = streams.get("LKSCORE_RESULTS", (0, 0))
mb = lambda b: "%.2f" % (b / 1048576)
med = lambda xs: "%g" % statistics.median(xs) if xs else "0"
print(",".join([t, "%.1f" % float(rss), mb(float(heap or 0)), med(gors), med(fdss),
                str(tot[0]), mb(tot[1]), str(f[0]), mb(f[1]), str(r[0]), mb(r[1]),
                str(max(gors or [0])), str(max(fdss or [0]))]))
PY
      gors=() fdss=()
    fi
    sleep 1
  done
}
sample "$(date +%s)" >"$out/soak.csv" &
sampler=$!
pids+=($sampler)
scored() { curl -sf "http://$1/metrics" 2>/dev/null | awk '$1 ~ /^lkscore_pipeline_done_total\{/ && /stage="score"/ && /outcome="done"/ { n += $2 } END { print n + 0 }'; }
count_workers() {
  local start=$1
  echo "t_s,epoch_s,worker1_scored,worker2_scored"
  while kill -0 "$daemon" 2>/dev/null; do
    local now
    now=$(date +%s)
    echo "$(( now - start )),$now,$(scored "$w1_ops"),$(scored "$w2_ops")"
    sleep 1
  done
}
if [ "$topology" = split ]; then
  count_workers "$(date +%s)" >"$out/workers.csv" &
  pids+=($!)
  if [ -n "${SOAK_KILL_AT:-}" ]; then
    (
      sleep "$SOAK_KILL_AT"
      kill -9 "$worker2"
      echo "$(date +%s) kill -9 worker2 (pid $worker2)" >>"$out/restart.txt"
      sleep "${SOAK_RESTART_AFTER:-5}"
      LKSCORE_LOG_LEVEL=$log_level "$work/lkscore" serve --role worker --ops-listen "$w2_ops" --data-dir "$work/data" \
        >>"$work/worker2.log" 2>&1 &
      echo $! >"$work/restarted.pid"
      echo "$(date +%s) worker2 restarted (pid $!)" >>"$out/restart.txt"
      for _ in $(seq 300); do curl -sf "http://$w2_ops/readyz" >/dev/null && break; sleep 0.1; done
      echo "$(date +%s) worker2 ready" >>"$out/restart.txt"
      wait
    ) &
    pids+=($!)
  fi
fi
"$work/lkscore" bench --url "http://$listen" --sessions $((secs * rate)) --rate "$rate" --concurrency 32 --timeout 2m \
  | tee "$out/soak-bench.txt"
sleep 10
kill "$sampler" 2>/dev/null || true
python3 tools/soak-plot.py "$out/soak.csv" "$out/soak.svg"
# The flatness bound: each of RSS, goroutines and descriptors over the last
# 10 minutes of load against its value at the 10-minute mark.
python3 - "$out/soak.csv" "$secs" <<'PY' | tee "$out/flat.txt"
import csv, sys
rows = [r for r in csv.DictReader(open(sys.argv[1])) if int(r["t_s"]) <= int(sys.argv[2])]
mark = next((r for r in rows if int(r["t_s"]) >= 600), None)
if mark is None or int(sys.argv[2]) < 1200:
    print("flatness: the run is shorter than 20 minutes"); sys.exit(0)
last = [r for r in rows if int(r["t_s"]) >= int(sys.argv[2]) - 600]
for col in ("rss_mb", "goroutines", "open_fds"):
    ref = float(mark[col])
    vals = [float(r[col]) for r in last]
    off = max(abs(v - ref) for v in vals) / ref * 100
    print("%s: %g at %s s; last 10 min %g-%g, up to %.1f%% off: %s" % (
        col, ref, mark["t_s"], min(vals), max(vals), off, "flat" if off <= 10 else "NOT flat"))
PY
if [ -f "$out/workers.csv" ]; then
  # The survivor's longest run of seconds without a new scorecard while the
  # load ran, and the same after the kill (to the end of the restart + 60 s).
  python3 - "$out/workers.csv" "$out/restart.txt" <<'PY' | tee "$out/stall.txt"
import csv, os, sys
recs = list(csv.DictReader(open(sys.argv[1])))
rows = [(int(r["t_s"]), int(r["worker1_scored"]), int(r["worker2_scored"])) for r in recs]
base = int(recs[0]["epoch_s"]) - rows[0][0]
active = [r for r in rows if r[1] + r[2] > 0]
end = min(r[0] for r in rows if r[1] + r[2] == max(x[1] + x[2] for x in rows))
def longest_gap(lo, hi):
    best, last_t, last_n = 0, None, None
    for t, n, _ in rows:
        if t < lo or t > hi:
            continue
        if last_n is None or n != last_n:
            last_t, last_n = t, n
        best = max(best, t - last_t)
    return best
start = active[0][0]
print("survivor's longest gap without a scorecard, whole run: %d s" % longest_gap(start, end))
if os.path.exists(sys.argv[2]):
    k = int(open(sys.argv[2]).read().split()[0]) - base
    print("kill -9 at %d s; survivor's longest gap from then to %d s: %d s" % (k, k + 120, longest_gap(k, min(k + 120, end))))
    print("worker2 scored %d before the kill and %d after its restart" % (max(r[2] for r in rows if r[0] < k),
          rows[-1][2]))
PY
fi
echo "samples: $out/soak.csv, plot: $out/soak.svg"
