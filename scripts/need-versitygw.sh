#!/usr/bin/env bash
# Prints the path of a versitygw binary (the Versity S3 Gateway, a real S3 server the
# object-storage tests run on loopback), building the pinned version with `go install`
# into the tools cache when there is none (the first build takes a few minutes).
set -euo pipefail
VERSITYGW_VERSION="v1.8.0"
CACHE="${KUBEDAV_TOOLS_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/kubedav-tools}"
stamp="$CACHE/bin/.versitygw-${VERSITYGW_VERSION}"
if [ -x "$CACHE/bin/versitygw" ] && [ -e "$stamp" ]; then
  echo "$CACHE/bin/versitygw"; exit 0
fi
command -v go >/dev/null || { echo "need-versitygw: versitygw is missing and Go is not installed to build it" >&2; exit 1; }
mkdir -p "$CACHE/bin"
echo "need-versitygw: building versitygw ${VERSITYGW_VERSION} (go install github.com/versity/versitygw/cmd/versitygw@${VERSITYGW_VERSION})" >&2
GOBIN="$CACHE/bin" go install "github.com/versity/versitygw/cmd/versitygw@${VERSITYGW_VERSION}" >&2
touch "$stamp"
echo "$CACHE/bin/versitygw"
