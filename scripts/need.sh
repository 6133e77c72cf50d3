#!/usr/bin/env bash
# Installs the Debian package of each missing command: need.sh COMMAND:PACKAGE ...
# (`make test` uses it for the real peers its suites start: redis-server, litmus).
set -euo pipefail
missing=()
for pair in "$@"; do
  command -v "${pair%%:*}" >/dev/null 2>&1 || missing+=("${pair#*:}")
done
[ "${#missing[@]}" -eq 0 ] && exit 0
echo "need.sh: installing ${missing[*]}"
SUDO=""
[ "$(id -u)" -eq 0 ] || SUDO="sudo"
$SUDO apt-get update -qq
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
