#!/usr/bin/env bash
# Prints the daemon's package graph as docs/architecture.md shows it, from
# `go list`: each package under consumer/ (internal/ dropped from the name)
# and what it imports of lkscore, leaving out config, wire, metrics and
# failure, which nearly every part imports. Run it after moving code and
# paste its output into docs/architecture.md ("Packages").
set -euo pipefail
cd "$(dirname "$0")/.."
mod=github.com/lkscore/lkscore
short() { sed -e "s#^$mod/##" -e 's#^consumer/internal/##' -e 's#^consumer/##' -e 's#^consumer$#consumer#'; }
for p in $(go list ./consumer/... | grep -v '/tools/'); do
  [ "$p" = "$mod/consumer" ] && name=consumer || name=$(echo "$p" | short)
  deps=$(go list -f '{{join .Imports "\n"}}' "$p" | { grep "^$mod/" || true; } | short |
    { grep -vxE 'config|wire|metrics|failure' || true; } | sort | paste -sd, - | sed 's/,/, /g')
  printf '%-10s → %s\n' "$name" "${deps:-—}"
done
