#!/usr/bin/env bash
# Prints the path of an rclone binary recent enough to upload in chunks with its
# `nextcloud` vendor (v1.63 and later; Debian's is 1.60), building the pinned version with
# `go install` into the tools cache when there is none (the first build takes minutes).
set -euo pipefail
RCLONE_VERSION="v1.76.0"
CACHE="${KUBEDAV_TOOLS_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/kubedav-tools}"
stamp="$CACHE/bin/.rclone-${RCLONE_VERSION}"
if [ -x "$CACHE/bin/rclone" ] && [ -e "$stamp" ]; then
  echo "$CACHE/bin/rclone"; exit 0
fi
command -v go >/dev/null || { echo "need-rclone: rclone is missing and Go is not installed to build it" >&2; exit 1; }
mkdir -p "$CACHE/bin"
echo "need-rclone: building rclone ${RCLONE_VERSION} (go install github.com/rclone/rclone@${RCLONE_VERSION})" >&2
GOBIN="$CACHE/bin" go install "github.com/rclone/rclone@${RCLONE_VERSION}" >&2
touch "$stamp"
echo "$CACHE/bin/rclone"
