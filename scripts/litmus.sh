#!/usr/bin/env bash
# Runs the litmus WebDAV suites against kubedav in both run modes (all-in-one, and
# gateway + fileio over gRPC), prints litmus's summary lines, and fails on any failed
# test. Installs litmus (Debian package) when it is missing.
#
# Env: LITMUS_SUITES (default: basic copymove props locks http), KUBEDAV_BIN.
set -euo pipefail
REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BIN="${KUBEDAV_BIN:-$REPO/target/release/kubedav}"
SUITES="${LITMUS_SUITES:-basic copymove props locks http}"
[ -x "$BIN" ] || { echo "litmus.sh: $BIN is missing; build with: cargo build --release" >&2; exit 1; }
if ! command -v litmus >/dev/null 2>&1; then
  echo "litmus.sh: installing litmus"
  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends litmus >/dev/null
fi

WORK="$(mktemp -d /tmp/kubedav-litmus.XXXXXX)"
PIDS=()
cleanup() {
  for pid in "${PIDS[@]}"; do kill "$pid" 2>/dev/null || true; done
  wait 2>/dev/null || true
  rm -rf "$WORK"
}
trap cleanup EXIT

start() {  # log, args...
  local log="$1"; shift
  "$BIN" "$@" > /dev/null 2> "$log" < /dev/null &
  PIDS+=($!)
}
announced() {  # what, log
  for _ in $(seq 1 300); do
    if grep -q "$1 listening on" "$2"; then grep -oP "$1 listening on \K\S+" "$2"; return 0; fi
    sleep 0.1
  done
  echo "litmus.sh: kubedav did not start; log:" >&2; cat "$2" >&2; exit 1
}

failed=0
run_litmus() {  # mode, url
  local mode="$1" url="$2" out="$WORK/litmus-$1.txt"
  echo "== litmus ($mode) against $url: $SUITES"
  # litmus writes debug.log and child.log into its working directory: keep them in $WORK.
  (cd "$WORK" && TESTS="$SUITES" timeout 600 litmus "$url") > "$out" 2>&1 || true
  grep -E "^<- summary|warning" "$out" | sed "s/^/[$mode] /"
  local suites_run
  suites_run=$(grep -c "^<- summary" "$out" || true)
  if [ "$suites_run" -ne "$(wc -w <<< "$SUITES")" ] || grep -E "^<- summary" "$out" | grep -vq " 0 failed"; then
    echo "[$mode] litmus FAILED; full output:"; sed "s/^/[$mode] /" "$out"
    failed=1
  fi
}

mkdir -p "$WORK/all" "$WORK/micro"
start "$WORK/all.log" --target=all --root "$WORK/all" --listen 127.0.0.1:0 --admin-listen 127.0.0.1:0
run_litmus all-in-one "http://$(announced "gateway HTTP" "$WORK/all.log")/"

start "$WORK/fileio.log" --target=fileio --root "$WORK/micro" --grpc-listen 127.0.0.1:0 --admin-listen 127.0.0.1:0
grpc=$(announced "fileio gRPC" "$WORK/fileio.log")
start "$WORK/locks.log" --target=locks --grpc-listen 127.0.0.1:0 --admin-listen 127.0.0.1:0
locks=$(announced "locks gRPC" "$WORK/locks.log")
start "$WORK/gateway.log" --target=gateway --fileio-url "http://$grpc" --locks-url "http://$locks" --listen 127.0.0.1:0 --admin-listen 127.0.0.1:0
run_litmus microservices "http://$(announced "gateway HTTP" "$WORK/gateway.log")/"

[ "$failed" = 0 ] && echo "litmus: every suite passed in both modes ($SUITES)"
exit "$failed"
