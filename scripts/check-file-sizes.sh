#!/usr/bin/env bash
# Fails on a Rust source file under services/*/src longer than MAX_LINES (700): a file
# that long holds more than one concern, and is split by what it does
# (docs/architecture.md, "Where things live"). make lint runs it.
set -euo pipefail
cd "$(dirname "$0")/.."
MAX_LINES="${MAX_LINES:-700}"
long=$(find services/*/src -name '*.rs' -print0 | xargs -0 wc -l | awk -v max="$MAX_LINES" '$2 != "total" && $1 > max')
if [ -n "$long" ]; then
  echo "source files over $MAX_LINES lines: split each by concern" >&2
  echo "$long" >&2
  exit 1
fi
echo "no source file under services/*/src is over $MAX_LINES lines"
