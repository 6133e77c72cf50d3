#!/usr/bin/env bash
# Prints the path of a k6 binary, building the pinned version with `go install` into the
# tools cache when there is none (the first build takes a few minutes).
set -euo pipefail
K6_VERSION="v1.8.1"
CACHE="${KUBEDAV_TOOLS_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/kubedav-tools}"
if command -v k6 >/dev/null 2>&1; then command -v k6; exit 0; fi
if [ -x "$CACHE/bin/k6" ] && "$CACHE/bin/k6" version 2>/dev/null | grep -q "${K6_VERSION}"; then
  echo "$CACHE/bin/k6"; exit 0
fi
command -v go >/dev/null || { echo "need-k6: k6 is missing and Go is not installed to build it" >&2; exit 1; }
mkdir -p "$CACHE/bin"
echo "need-k6: building k6 ${K6_VERSION} (go install go.k6.io/k6@${K6_VERSION})" >&2
GOBIN="$CACHE/bin" go install "go.k6.io/k6@${K6_VERSION}" >&2
echo "$CACHE/bin/k6"
