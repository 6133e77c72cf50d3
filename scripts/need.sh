#!/usr/bin/env bash
# Installs the Debian package of each missing command: need.sh COMMAND:PACKAGE ...
# (`make test` uses it for the real peers and clients its suites start: redis-server,
# prometheus, litmus, rclone, cadaver, davfs2).
set -euo pipefail
missing=()
for pair in "$@"; do
  command -v "${pair%%:*}" >/dev/null 2>&1 || missing+=("${pair#*:}")
done
[ "${#missing[@]}" -eq 0 ] && exit 0
echo "need.sh: installing ${missing[*]}"
SUDO=""
[ "$(id -u)" -eq 0 ] || SUDO="sudo"
# Packages such as redis-server and prometheus start a system daemon on install; the
# tests start their own on free ports, so a policy-rc.d keeps the daemons off meanwhile.
made_policy=0
if [ ! -e /usr/sbin/policy-rc.d ]; then
  printf '#!/bin/sh\nexit 101\n' | $SUDO tee /usr/sbin/policy-rc.d >/dev/null
  $SUDO chmod +x /usr/sbin/policy-rc.d
  made_policy=1
fi
$SUDO apt-get update -qq
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
if [ "$made_policy" = 1 ]; then $SUDO rm -f /usr/sbin/policy-rc.d; fi
