#!/usr/bin/env bash
# Runs the litmus WebDAV suites against kubedav in both run modes (all-in-one, and
# gateway + fileio + locks over gRPC), then once more in microservices mode with the
# locks in a real redis-server. Prints litmus's summary lines and fails on any failed
# test. Installs litmus and redis-server (Debian packages) when they are missing.
#
# Env: LITMUS_SUITES (default: basic copymove props locks http), KUBEDAV_BIN.
set -euo pipefail
REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BIN="${KUBEDAV_BIN:-${CARGO_TARGET_DIR:-$REPO/target}/release/kubedav}"
SUITES="${LITMUS_SUITES:-basic copymove props locks http}"
[ -x "$BIN" ] || { echo "litmus.sh: $BIN is missing; build with: cargo build --release" >&2; exit 1; }
bash "$REPO/scripts/need.sh" litmus:litmus redis-server:redis-server

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

mkdir -p "$WORK/all" "$WORK/micro" "$WORK/redis" "$WORK/micro-redis"
start "$WORK/all.log" --target=all --root "$WORK/all" --listen 127.0.0.1:0 --admin-listen 127.0.0.1:0
run_litmus all-in-one "http://$(announced "gateway HTTP" "$WORK/all.log")/"

microservices() {  # name, root, locks args...
  local name="$1" root="$2"; shift 2
  start "$WORK/$name-fileio.log" --target=fileio --root "$root" --grpc-listen 127.0.0.1:0 --admin-listen 127.0.0.1:0
  local grpc locks
  grpc=$(announced "fileio gRPC" "$WORK/$name-fileio.log")
  start "$WORK/$name-locks.log" --target=locks --grpc-listen 127.0.0.1:0 --admin-listen 127.0.0.1:0 "$@"
  locks=$(announced "locks gRPC" "$WORK/$name-locks.log")
  start "$WORK/$name-gateway.log" --target=gateway --fileio-url "http://$grpc" --locks-url "http://$locks" \
    --listen 127.0.0.1:0 --admin-listen 127.0.0.1:0
  run_litmus "$name" "http://$(announced "gateway HTTP" "$WORK/$name-gateway.log")/"
}
microservices microservices "$WORK/micro"

# The same with the locks in Redis: a real redis-server on a unix socket in $WORK.
redis-server --port 0 --unixsocket "$WORK/redis.sock" --dir "$WORK/redis" --save "" --daemonize no \
  > "$WORK/redis.log" 2>&1 < /dev/null &
PIDS+=($!)
for _ in $(seq 1 100); do
  [ -S "$WORK/redis.sock" ] && redis-cli -s "$WORK/redis.sock" ping 2>/dev/null | grep -q PONG && break
  sleep 0.1
done
microservices microservices-redis "$WORK/micro-redis" --lock-store "redis+unix://$WORK/redis.sock"

[ "$failed" = 0 ] && echo "litmus: every suite passed in every mode ($SUITES)"
exit "$failed"
