#!/usr/bin/env bash
# Start-up with a large history (README "Performance"): an external
# nats-server, the session facts bucket filled with N published sessions by
# consumer/tools/fillfacts (as a week of sessions leaves it), then `lkscore serve
# --role all` started on it: the time to /readyz, and the time from a new
# session being complete (its agent_job_ended acknowledged) to its scorecard,
# from `lkscore bench --sessions 5`. NO_MARK=1 deletes the settler's low-water
# mark first, as after an upgrade from a version without it: the settler
# then replays the whole bucket once.
#   tools/startup-history.sh 1000000
set -euo pipefail
cd "$(dirname "$0")/.."
n=${1:-100000}
PERF_TMPDIR=${STARTUP_TMPDIR:-${PERF_TMPDIR:-/tmp}}
. tools/perfenv.sh # $work, pids; PERF_TMPDIR, PERF_KEEP
perfenv startup
go build -o "$work/fillfacts" ./consumer/tools/fillfacts
port=${NATS_PORT:-14522}
"$work/nats-server" -a 127.0.0.1 -p "$port" -js -sd "$work/nats" >"$work/nats.log" 2>&1 &
pids+=($!)
export LIVEKIT_API_KEY=APIstartup LIVEKIT_API_SECRET=startup-secret-0123456789abcdef
export LKSCORE_NATS_URL="nats://127.0.0.1:$port" LKSCORE_LOG_LEVEL=warn
for _ in $(seq 50); do (echo >"/dev/tcp/127.0.0.1/$port") 2>/dev/null && break; sleep 0.1; done
serve() {
  "$work/lkscore" serve --role all --listen 127.0.0.1:18580 --ops-listen 127.0.0.1:18590 --data-dir "$work/data" \
    >>"$work/lkscore.log" 2>&1 &
  daemon=$!
}
ready_ms() {
  local t0 t1
  t0=$(date +%s%N)
  for _ in $(seq 3000); do curl -sf http://127.0.0.1:18590/readyz >/dev/null && break; sleep 0.01; done
  t1=$(date +%s%N)
  echo $(( (t1 - t0) / 1000000 ))
}
serve; ready_ms >/dev/null; kill -TERM "$daemon"; wait "$daemon" || true   # creates the streams and buckets
[ "$n" -gt 0 ] && "$work/fillfacts" --nats-url "$LKSCORE_NATS_URL" --entries "$n"
if [ -n "${NO_MARK:-}" ]; then
  "$work/fillfacts" --nats-url "$LKSCORE_NATS_URL" --delete-mark
fi
serve
r=$(ready_ms)
pids+=($daemon)
echo "entries $n: ready after $r ms"
"$work/lkscore" bench --url http://127.0.0.1:18580 --sessions 5 --concurrency 1 --timeout 2m | grep -E "latency|lost"
