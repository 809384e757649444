#!/usr/bin/env bash
# Pipeline throughput as the README reports it: an external nats-server
# (built from the version in go.mod), `lkscore serve --role all` on local
# storage, and `lkscore bench` as a separate process. Arguments go to
# `lkscore bench`, e.g.:
#   tools/perf-pipeline.sh --sessions 2000 --concurrency 32
#   tools/perf-pipeline.sh --sessions 3000 --concurrency 64 --rate 150
#   tools/perf-pipeline.sh --webhooks --sessions 20000 --concurrency 64
# LKSCORE_CONCURRENCY and other LKSCORE_* variables reach the daemon;
# PERF_ROLE=ingest runs `serve --role ingest` (webhooks only: no scorecards),
# PERF_ROLE=split `--role ingest` and `--role worker` as two processes. bench
# reports each process's CPU a session (--ops-url).
# PERF_SERVE=BINARY runs that lkscore as the daemon (one built from an earlier
# commit, side by side); bench is always this tree's.
# PERF_PROFILE=FILE takes a CPU profile of `lkscore serve` over the first
# PERF_PROFILE_SECONDS (default 5) of the load (go tool pprof -top FILE).
set -euo pipefail
cd "$(dirname "$0")/.."
. tools/perfenv.sh # $work, pids, cpu; PERF_TMPDIR, PERF_KEEP
perfenv perf
nats_port=${NATS_PORT:-14222}
mon_port=${NATS_MON_PORT:-18222}
"$work/nats-server" -a 127.0.0.1 -p "$nats_port" -m "$mon_port" -js -sd "$work/nats" >"$work/nats.log" 2>&1 &
pids+=($!)
export LIVEKIT_API_KEY=${LIVEKIT_API_KEY:-APIbench} LIVEKIT_API_SECRET=${LIVEKIT_API_SECRET:-bench-secret-0123456789abcdef}
export LKSCORE_NATS_URL="nats://127.0.0.1:$nats_port"
listen=127.0.0.1:${INGEST_PORT:-18080}
for _ in $(seq 50); do (echo >"/dev/tcp/127.0.0.1/$nats_port") 2>/dev/null && break; sleep 0.1; done
[ -n "${PERF_PROFILE:-}" ] && export LKSCORE_OPS_PPROF=true
ops=127.0.0.1:${OPS_PORT:-19090}
role=${PERF_ROLE:-all}
[ "$role" = split ] && role=ingest
LKSCORE_LOG_LEVEL=${LKSCORE_LOG_LEVEL:-warn} "${PERF_SERVE:-$work/lkscore}" serve --role "$role" --listen "$listen" \
  --ops-listen "$ops" --data-dir "$work/data" >"$work/lkscore.log" 2>&1 &
pids+=($!)
opsurls=(--ops-url "http://$ops")
if [ "${PERF_ROLE:-}" = split ]; then
  # PERF_ROLE=split: `--role ingest` and `--role worker` as two processes
  # on the same data directory, as the chart's workloads run.
  wops=127.0.0.1:$(( ${OPS_PORT:-19090} + 1 ))
  LKSCORE_LOG_LEVEL=${LKSCORE_LOG_LEVEL:-warn} "${PERF_SERVE:-$work/lkscore}" serve --role worker --listen 127.0.0.1:0 \
    --ops-listen "$wops" --data-dir "$work/data" >"$work/worker.log" 2>&1 &
  pids+=($!)
  opsurls+=(--ops-url "http://$wops")
  for _ in $(seq 100); do curl -fs "http://$wops/readyz" >/dev/null 2>&1 && break; sleep 0.1; done
fi
for _ in $(seq 100); do curl -fs "http://$ops/readyz" >/dev/null 2>&1 && break; sleep 0.1; done
nats_cpu0=$(cpu "${pids[0]}"); serve_cpu0=$(cpu "${pids[1]}")
# read and write system calls of the daemon (/proc/PID/io syscr, syscw)
syscalls() { awk '/^syscr/ {r=$2} /^syscw/ {w=$2} END {print r, w}' "/proc/$1/io"; }
read -r serve_r0 serve_w0 < <(syscalls "${pids[1]}")
# NATS messages in and out (client requests, publishes, acks, KV reads and
# writes, deliveries), from the server's /varz, to count them per session.
varz() { curl -fs "http://127.0.0.1:$mon_port/varz" | python3 -c 'import json,sys; v=json.load(sys.stdin); print(v["in_msgs"], v["out_msgs"])'; }
read -r in0 out0 < <(varz)
start=$(date +%s.%N)
"$work/lkscore" bench --url "http://$listen" "${opsurls[@]}" "$@" &
bench_pid=$!
if [ -n "${PERF_PROFILE:-}" ]; then
  curl -fs -o "$PERF_PROFILE" "http://127.0.0.1:${OPS_PORT:-19090}/debug/pprof/profile?seconds=${PERF_PROFILE_SECONDS:-5}" &
fi
bench_cpu=0
while kill -0 "$bench_pid" 2>/dev/null; do bench_cpu=$(cpu "$bench_pid" 2>/dev/null || echo "$bench_cpu"); sleep 0.2; done
wait "$bench_pid" && rc=0 || rc=$?
wall=$(echo "$(date +%s.%N) - $start" | bc)
read -r in1 out1 < <(varz)
echo "nats messages: $((in1 - in0)) in, $((out1 - out0)) out"
read -r serve_r1 serve_w1 < <(syscalls "${pids[1]}")
echo "lkscore serve system calls: $((serve_r1 - serve_r0)) reads, $((serve_w1 - serve_w0)) writes"
# The daemon's own per-step latency (lkscore_session_step_seconds) and each
# stage's queue wait (lkscore_stage_queued_seconds), as /metrics shows them:
# p50 and p99 from the histograms' buckets (upper bounds).
curl -fs "http://127.0.0.1:${OPS_PORT:-19090}/metrics" | python3 -c '
import re, sys
b = {}
for line in sys.stdin:
    m = re.match(r"(lkscore_session_step_seconds|lkscore_stage_queued_seconds)_bucket\{(.*)\} (\S+)$", line.strip())
    if not m: continue
    labels = dict(re.findall(r"(\w+)=\"([^\"]*)\"", m.group(2)))
    name = ("step " + labels["step"]) if "step" in labels else ("queued for " + labels.get("stage", "?"))
    le = float("inf") if labels["le"] == "+Inf" else float(labels["le"])
    b.setdefault(name, []).append((le, float(m.group(3))))
for name, bs in sorted(b.items()):
    bs.sort(); total = bs[-1][1]
    if total == 0: continue
    q = lambda p: next(le for le, n in bs if n >= p * total)
    print("%-28s %6d  p50 <= %g ms  p99 <= %g ms" % (name, total, q(0.5) * 1000, q(0.99) * 1000))
' || true
echo "cpu seconds over ${wall%??????} s of wall time: lkscore serve $(echo "$(cpu "${pids[1]}") - $serve_cpu0" | bc), nats-server $(echo "$(cpu "${pids[0]}") - $nats_cpu0" | bc), lkscore bench ≥ $bench_cpu"
exit $rc
