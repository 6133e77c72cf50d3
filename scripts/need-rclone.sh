#!/usr/bin/env bash
# Prints the path of an rclone binary recent enough to upload in chunks with its
# `nextcloud` vendor (v1.63 and later; Debian's is 1.60), built at the pinned version into
# the tools cache when there is none (scripts/go-tool.sh).
set -euo pipefail
exec bash "$(dirname "$0")/go-tool.sh" rclone github.com/rclone/rclone v1.76.0
