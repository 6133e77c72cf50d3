#!/usr/bin/env bash
# make bench: throughput of kubedav (all-in-one and microservices) and nginx, measured one
# after the other in the same run with the same load, so figures compare as ratios.
#
#   GET 1 KiB   requests/s   wrk, THREADS threads, CONNS keep-alive connections, DURATION s
#   GET 10 MiB  MB/s         same (1 MB = 10^6 bytes)
#   PUT 10 MiB  MB/s         PUT_COUNT sequential `curl -T` uploads to distinct names
#
# Env (defaults): DURATION=10 THREADS=2 CONNS=64 PUT_COUNT=20 PEERS_DIR=../shared/peers
# Installs wrk, curl and nginx with the dav-ext module from Debian if missing; nginx is
# configured and started by the peers' own peerctl.sh. Every load run is bounded.
set -euo pipefail
REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
PEERS_DIR="${PEERS_DIR:-$REPO/../shared/peers}"
DURATION="${DURATION:-10}"; THREADS="${THREADS:-2}"; CONNS="${CONNS:-64}"; PUT_COUNT="${PUT_COUNT:-20}"
BIN="$REPO/target/release/kubedav"
WORK="$(mktemp -d /tmp/kubedav-bench.XXXXXX)"
PIDS=()
cleanup() {
  for pid in "${PIDS[@]}"; do kill "$pid" 2>/dev/null || true; done
  [ -n "${NGINX_STARTED:-}" ] && bash "$PEERS_DIR/peerctl.sh" stop nginx >/dev/null 2>&1 || true
  rm -rf "$WORK"
}
trap cleanup EXIT

need=()
command -v wrk >/dev/null || need+=(wrk)
command -v curl >/dev/null || need+=(curl)
[ -x /usr/sbin/nginx ] || need+=(nginx)
dpkg-query -W -f='${Status}' libnginx-mod-http-dav-ext 2>/dev/null | grep -q 'install ok' || need+=(libnginx-mod-http-dav-ext)
if ((${#need[@]})); then
  echo "installing ${need[*]}"
  made_policy=0
  if [ ! -e /usr/sbin/policy-rc.d ]; then printf '#!/bin/sh\nexit 101\n' > /usr/sbin/policy-rc.d; chmod +x /usr/sbin/policy-rc.d; made_policy=1; fi
  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
  [ "$made_policy" = 1 ] && rm -f /usr/sbin/policy-rc.d
fi
[ -x "$BIN" ] || { echo "build first: make build" >&2; exit 1; }

mkdir -p "$WORK/fixtures"
head -c 1024 /dev/urandom > "$WORK/fixtures/1k.bin"
head -c $((10 * 1048576)) /dev/urandom > "$WORK/fixtures/10m.bin"

# Starts kubedav in the background with "$@", logging to $1.
start_kubedav() {
  local log="$1"; shift
  "$BIN" "$@" > /dev/null 2> "$log" < /dev/null &
  PIDS+=($!)
}

# Prints the address kubedav announced in log $2 for $1 ("gateway HTTP", "fileio gRPC").
announced() {
  local what="$1" log="$2"
  for _ in $(seq 1 300); do
    if grep -q "$what listening on" "$log"; then grep -oP "$what listening on \K\S+" "$log"; return 0; fi
    sleep 0.1
  done
  echo "kubedav did not start; log:" >&2; cat "$log" >&2; exit 1
}

wrk_rps() {  # url -> requests/s
  timeout -k 5 $((DURATION + 30)) wrk -t"$THREADS" -c"$CONNS" -d"${DURATION}s" --timeout 10s "$1" \
    | awk '/Requests\/sec/ {print $2}'
}

# measure NAME BASE_URL DOCROOT [OWNER]
measure() {
  local name="$1" base="$2" docroot="$3" owner="${4:-}"
  mkdir -p "$docroot/bench/put"
  cp "$WORK/fixtures/1k.bin" "$WORK/fixtures/10m.bin" "$docroot/bench/"
  [ -n "$owner" ] && chown -R "$owner" "$docroot/bench"
  for f in 1k.bin 10m.bin; do
    code=$(curl -s -o /dev/null -w '%{http_code}' "$base/bench/$f")
    [ "$code" = 200 ] || { echo "$name: GET $f -> $code" >&2; exit 1; }
  done
  timeout 30 wrk -t"$THREADS" -c"$CONNS" -d2s "$base/bench/1k.bin" >/dev/null   # warm-up
  local get1k get10m t0 t1 put fails=0
  get1k=$(wrk_rps "$base/bench/1k.bin")
  get10m=$(wrk_rps "$base/bench/10m.bin")
  t0=$(date +%s.%N)
  for i in $(seq 1 "$PUT_COUNT"); do
    code=$(curl -s -o /dev/null --max-time 120 -w '%{http_code}' -T "$WORK/fixtures/10m.bin" "$base/bench/put/f$i.bin")
    case "$code" in 2??) ;; *) fails=$((fails + 1)) ;; esac
  done
  t1=$(date +%s.%N)
  put=$(awk -v n="$PUT_COUNT" -v a="$t0" -v b="$t1" 'BEGIN {printf "%.0f", n * 10 * 1048576 / 1e6 / (b - a)}')
  printf '%-26s %12.0f %12.0f %12s %s\n' "$name" "$get1k" "$(awk -v r="$get10m" 'BEGIN {print r * 10.48576}')" "$put" \
    "$([ "$fails" = 0 ] || echo "($fails PUTs failed)")" | tee -a "$WORK/results.txt"
}

echo "machine: $(nproc) cores, $(awk -F': ' '/model name/ {print $2; exit}' /proc/cpuinfo), $(free -g | awk '/Mem:/ {print $2}') GiB, Linux $(uname -r)"
echo "load: wrk -t$THREADS -c$CONNS -d${DURATION}s; PUT: $PUT_COUNT x 10 MiB sequential curl -T"
printf '%-26s %12s %12s %12s\n' "server" "GET 1KiB r/s" "GET 10MiB MB/s" "PUT 10MiB MB/s"

root="$WORK/all"; mkdir -p "$root"
start_kubedav "$WORK/all.log" --target=all --root "$root" --listen 127.0.0.1:0 --admin-listen 127.0.0.1:0
addr=$(announced "gateway HTTP" "$WORK/all.log")
measure "kubedav all-in-one" "http://$addr" "$root"
kill "${PIDS[@]}"; wait "${PIDS[@]}" 2>/dev/null || true; PIDS=()

root="$WORK/micro"; mkdir -p "$root"
start_kubedav "$WORK/fileio.log" --target=fileio --root "$root" --grpc-listen 127.0.0.1:0 --admin-listen 127.0.0.1:0
grpc=$(announced "fileio gRPC" "$WORK/fileio.log")
start_kubedav "$WORK/locks.log" --target=locks --grpc-listen 127.0.0.1:0 --admin-listen 127.0.0.1:0
locks=$(announced "locks gRPC" "$WORK/locks.log")
start_kubedav "$WORK/gateway.log" --target=gateway --fileio-url "http://$grpc" --locks-url "http://$locks" --listen 127.0.0.1:0 --admin-listen 127.0.0.1:0
addr=$(announced "gateway HTTP" "$WORK/gateway.log")
measure "kubedav microservices" "http://$addr" "$root"
kill "${PIDS[@]}" 2>/dev/null || true; wait "${PIDS[@]}" 2>/dev/null || true; PIDS=()

bash "$PEERS_DIR/peerctl.sh" start nginx >/dev/null
NGINX_STARTED=1
measure "nginx $(/usr/sbin/nginx -v 2>&1 | sed 's#.*/##')" "$(bash "$PEERS_DIR/peerctl.sh" url nginx | sed 's#/$##')" /tmp/peers/nginx/data www-data:www-data
