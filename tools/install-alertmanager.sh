#!/usr/bin/env bash
# Builds Prometheus Alertmanager (pinned) into $(go env GOPATH)/bin for the
# alert delivery tests. `go install .../cmd/alertmanager` fails from the
# module proxy: the module zip lacks ui/app/dist, the npm output ui/web.go
# embeds. So: download the module, write placeholder UI pages, build.
set -euo pipefail
version=${ALERTMANAGER_VERSION:-v0.35.0}
bin="$(go env GOPATH)/bin/alertmanager"
if [ -x "$bin" ] && "$bin" --version 2>&1 | grep -q "version ${version#v}"; then
  exit 0
fi
dir=$(go mod download -json "github.com/prometheus/alertmanager@$version" | python3 -c 'import json,sys; print(json.load(sys.stdin)["Dir"])')
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cp -r "$dir/." "$work/"
chmod -R u+w "$work"
for ui in elm mantine; do
  mkdir -p "$work/ui/app/dist/$ui"
  echo '<!doctype html><title>Alertmanager</title><p>UI not built (lkscore test build)</p>' >"$work/ui/app/dist/$ui/index.html"
done
mkdir -p "$(dirname "$bin")"
(cd "$work" && GOFLAGS=-mod=mod go build -o "$bin" \
  -ldflags "-X github.com/prometheus/common/version.Version=${version#v}" ./cmd/alertmanager)
"$bin" --version 2>&1 | head -1
