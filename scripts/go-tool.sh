#!/usr/bin/env bash
# Prints the path of the Go program NAME at VERSION in the tools cache, building it from
# MODULE with `go install` when it is not there yet (the first build takes minutes); what
# scripts/need-versitygw.sh and scripts/need-rclone.sh share.
#
#   go-tool.sh NAME MODULE VERSION     e.g. go-tool.sh rclone github.com/rclone/rclone v1.76.0
set -euo pipefail
name="$1" module="$2" version="$3"
CACHE="${KUBEDAV_TOOLS_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/kubedav-tools}"
stamp="$CACHE/bin/.${name}-${version}"
if [ -x "$CACHE/bin/$name" ] && [ -e "$stamp" ]; then
  echo "$CACHE/bin/$name"; exit 0
fi
command -v go >/dev/null || { echo "need-$name: $name is missing and Go is not installed to build it" >&2; exit 1; }
mkdir -p "$CACHE/bin"
echo "need-$name: building $name ${version} (go install ${module}@${version})" >&2
GOBIN="$CACHE/bin" go install "${module}@${version}" >&2
touch "$stamp"
echo "$CACHE/bin/$name"
