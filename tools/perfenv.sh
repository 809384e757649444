# Sourced by the scripts that measure a running lkscore (perf-pipeline.sh,
# restart-cost.sh, startup-history.sh), from the repository's root:
#   . tools/perfenv.sh; perfenv NAME
# makes a work directory $work under PERF_TMPDIR (default /tmp), builds
# lkscore and nats-server into it, and on exit ends every process whose PID
# the script added to pids and removes $work. PERF_KEEP=1 keeps $work:
# deleting thousands of files makes ext4 scan its inode tables on every file
# created in the next minutes (recently_deleted), which a next run would
# count as the daemon's CPU (docs/performance.md).

perfenv() {
  work=$(mktemp -d "${PERF_TMPDIR:-/tmp}/lkscore-$1.XXXXXX")
  pids=()
  trap perfenv_cleanup EXIT
  go build -o "$work/lkscore" ./cmd/lkscore
  go build -o "$work/nats-server" github.com/nats-io/nats-server/v2
}

perfenv_cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
  if [ -n "${PERF_KEEP:-}" ]; then echo "kept $work" >&2; else rm -rf "$work"; fi
}

# cpu PID prints the process's user+sys CPU seconds so far.
cpu() { awk '{printf "%.2f", ($14+$15)/100}' "/proc/$1/stat"; }
