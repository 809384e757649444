#!/usr/bin/env bash
# What a restart costs with history (issue 70): an external nats-server,
# `lkscore serve --role all` on local storage, N sessions of the field mix
# sent by `lkscore bench` (scored, stored, in the detector's history), then
# the daemon stopped and started again on the same NATS and data: its CPU
# seconds in the first 8 s after the start (and its time to /readyz).
# Several N in one run, e.g.:
#   tools/restart-cost.sh 0 12000 20000
# RESTART_SERVE=BINARY runs that lkscore as the daemon (one built from an
# earlier commit, side by side); bench is always this tree's.
# RESTART_PROFILE=PREFIX writes a CPU profile of each restart's first 8 s
# to PREFIX-N.prof (go tool pprof -top FILE).
set -euo pipefail
cd "$(dirname "$0")/.."
. tools/perfenv.sh # $work, pids, cpu; PERF_TMPDIR, PERF_KEEP
perfenv restart
export LIVEKIT_API_KEY=APIrestart LIVEKIT_API_SECRET=restart-secret-0123456789abcdef LKSCORE_LOG_LEVEL=warn
[ -n "${RESTART_PROFILE:-}" ] && export LKSCORE_OPS_PPROF=true
ready() { for _ in $(seq 3000); do curl -sf http://127.0.0.1:18690/readyz >/dev/null && return 0; sleep 0.01; done; return 1; }
serve() {
  "${RESTART_SERVE:-$work/lkscore}" serve --role all --listen 127.0.0.1:18680 --ops-listen 127.0.0.1:18690 --data-dir "$work/data-$1" \
    >>"$work/lkscore.log" 2>&1 &
  daemon=$!
}
for n in "$@"; do
  port=$((14600 + RANDOM % 1000))
  "$work/nats-server" -a 127.0.0.1 -p "$port" -js -sd "$work/nats-$n" >"$work/nats-$n.log" 2>&1 &
  nats=$!
  pids+=("$nats")
  export LKSCORE_NATS_URL="nats://127.0.0.1:$port"
  for _ in $(seq 50); do (echo >"/dev/tcp/127.0.0.1/$port") 2>/dev/null && break; sleep 0.1; done
  serve "$n"; ready
  if [ "$n" -gt 0 ]; then
    "$work/lkscore" bench --url http://127.0.0.1:18680 --sessions "$n" --concurrency 32 --rate 300 --timeout 3m | grep -E "sessions:|lost"
  fi
  sleep 2
  kill -TERM "$daemon"; wait "$daemon" || true
  t0=$(date +%s%N)
  serve "$n"
  ready; t1=$(date +%s%N)
  if [ -n "${RESTART_PROFILE:-}" ]; then
    curl -fs -o "$RESTART_PROFILE-$n.prof" "http://127.0.0.1:18690/debug/pprof/profile?seconds=7" &
    prof=$!
  fi
  sleep $(echo "8 - ($(date +%s%N) - $t0) / 1000000000" | bc -l)
  echo "sessions stored $n: ready after $(( (t1 - t0) / 1000000 )) ms, CPU in the first 8 s $(cpu "$daemon") s, RSS $(awk '/VmRSS/ {print $2/1024 " MiB"}' /proc/$daemon/status)"
  [ -n "${prof:-}" ] && { wait "$prof" || true; prof=; }
  kill -TERM "$daemon"; wait "$daemon" || true
  kill "$nats"; wait "$nats" 2>/dev/null || true
done
