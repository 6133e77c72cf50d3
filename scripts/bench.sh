#!/usr/bin/env bash
# make bench: first the headline, the server's CPU time per request of kubedav (both
# modes) against nginx in alternating rounds, plainly and under a CPU hog
# (scripts/bench_cpu.py); then throughput of kubedav (all-in-one and microservices), nginx
# and Apache, measured one after the other in the same run, with the same load, so
# figures compare as ratios.
#
#   GET 1 KiB    requests/s   wrk, THREADS threads, CONNS keep-alive connections, DURATION s
#   GET 1 MiB    MB/s         same (1 MB = 10^6 bytes)
#   PUT 10 MiB   MB/s         PUT_COUNT sequential `curl -T` uploads to distinct names
#   PROPFIND d1  requests/s and p99 ms: Depth 1, allprop, on a collection of 1,000 files
#   PROPFIND d0  requests/s: Depth 0, allprop, on one file
#   LOCK+UNLOCK  pairs/s: exclusive LOCK then UNLOCK, one connection per wrk thread
#   idle MiB     memory of all the server's processes before the load (summed Pss)
#   peak MiB     the largest peak resident set (VmHWM) of any one of them after the load
#
# Then scripts/bench-growth.sh: PROPFIND cost per entry at 10 to 100,000 entries (both
# modes, each with the gateway keeping listings and keeping nothing), and GET memory at
# 1 KiB to 1 GiB.
#
# At the end the whole output, with the machine's details and the command, replaces the
# "latest make bench comparison" section of docs/benchmarks.md (scripts/bench-report.sh).
#
# Env (defaults): DURATION=10 THREADS=2 CONNS=64 PUT_COUNT=20 PEERS_DIR=../shared/peers
# Installs wrk, curl, Apache and nginx with the dav-ext module from Debian if missing;
# the peers are configured and started by their own peerctl.sh. Every load run is bounded.
set -euo pipefail
REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
PEERS_DIR="${PEERS_DIR:-$REPO/../shared/peers}"
DURATION="${DURATION:-10}"; THREADS="${THREADS:-2}"; CONNS="${CONNS:-64}"; PUT_COUNT="${PUT_COUNT:-20}"
BIN="${CARGO_TARGET_DIR:-$REPO/target}/dist/kubedav"
WORK="$(mktemp -d /tmp/kubedav-bench.XXXXXX)"
PIDS=()
cleanup() {
  for pid in "${PIDS[@]}"; do kill "$pid" 2>/dev/null || true; done
  [ -n "${NGINX_STARTED:-}" ] && bash "$PEERS_DIR/peerctl.sh" stop nginx >/dev/null 2>&1 || true
  [ -n "${APACHE_STARTED:-}" ] && bash "$PEERS_DIR/peerctl.sh" stop apache >/dev/null 2>&1 || true
  rm -rf "$WORK"
}
trap cleanup EXIT
# Everything printed goes to the screen and to the report (scripts/bench-report.sh).
exec 3>&1 > >(tee "$WORK/output.txt") 2>&1
TEE_PID=$!
# CPU time the hypervisor took ("steal"): its share of all CPU time, from /proc/stat.
steal_counters() { awk '/^cpu / {t = 0; for (i = 2; i <= NF; i++) t += $i; print $9, t}' /proc/stat; }
STEAL_BEGIN="$(steal_counters)"

need=()
command -v wrk >/dev/null || need+=(wrk)
command -v curl >/dev/null || need+=(curl)
command -v stress-ng >/dev/null || need+=(stress-ng)
[ -x /usr/sbin/nginx ] || need+=(nginx)
[ -x /usr/sbin/apache2 ] || need+=(apache2)
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
head -c 1048576 /dev/urandom > "$WORK/fixtures/1m.bin"
printf 'small file for the PROPFIND Depth 1 test, 100 bytes ..........................................\n' | head -c 100 > "$WORK/fixtures/small.txt"

# start_kubedav, announced, stop_all, wrk_stats, wrk_run, wrk_rps.
source "$REPO/scripts/bench-lib.sh"

# measure NAME BASE_URL DOCROOT OWNER PIDS: PIDS (space-separated) are the server's
# processes, whose memory is read before the load (idle) and after it (peak).
measure() {
  local name="$1" base="$2" docroot="$3" owner="${4:-}" pids="$5"
  mkdir -p "$docroot/bench/put" "$docroot/bench/dir1000" "$docroot/bench/lock"
  cp "$WORK/fixtures/1k.bin" "$WORK/fixtures/1m.bin" "$docroot/bench/"
  for i in $(seq -w 1 1000); do cp "$WORK/fixtures/small.txt" "$docroot/bench/dir1000/f$i.txt"; done
  for t in $(seq 0 $((THREADS - 1))); do : > "$docroot/bench/lock/t$t.txt"; done
  [ -n "$owner" ] && chown -R "$owner" "$docroot/bench"
  for f in 1k.bin 1m.bin; do
    code=$(curl -s -o /dev/null -w '%{http_code}' "$base/bench/$f")
    [ "$code" = 200 ] || { echo "$name: GET $f -> $code" >&2; exit 1; }
  done
  local idle
  idle=$(memory_mib $pids | cut -d' ' -f1)
  timeout 30 wrk -t"$THREADS" -c"$CONNS" -d2s "$base/bench/1k.bin" >/dev/null   # warm-up
  local get1k get1m t0 t1 put fails=0
  get1k=$(wrk_rps "$base/bench/1k.bin")
  get1m=$(wrk_rps "$base/bench/1m.bin")
  t0=$(date +%s.%N)
  for i in $(seq 1 "$PUT_COUNT"); do
    code=$(curl -s -o /dev/null --max-time 120 -w '%{http_code}' -T "$WORK/fixtures/10m.bin" "$base/bench/put/f$i.bin")
    case "$code" in 2??) ;; *) fails=$((fails + 1)) ;; esac
  done
  t1=$(date +%s.%N)
  put=$(awk -v n="$PUT_COUNT" -v a="$t0" -v b="$t1" 'BEGIN {printf "%.0f", n * 10 * 1048576 / 1e6 / (b - a)}')
  local pfd1 pfd0 locks
  pfd1=$(DEPTH=1 wrk_run "$base/bench/dir1000/" -s "$PEERS_DIR/propfind.lua")
  pfd0=$(DEPTH=0 wrk_run "$base/bench/1k.bin" -s "$PEERS_DIR/propfind.lua")
  locks=$(LOCKDIR=/bench/lock/ CONNS="$THREADS" wrk_run "$base/bench/lock/" -s "$REPO/scripts/lockunlock.lua")
  local peak notes=""
  peak=$(memory_mib $pids | cut -d' ' -f2)
  [ "$fails" = 0 ] || notes="$notes ($fails PUTs failed)"
  for f in "pfd1:$pfd1" "pfd0:$pfd0" "lock:$locks"; do
    bad=$(echo "${f#*:}" | cut -d' ' -f3); [ "${bad:-0}" = 0 ] || notes="$notes (${f%%:*}: $bad non-2xx)"
  done
  printf '%-24s %9.0f %9.0f %8s %9.0f %8.1f %9.0f %9.0f %8.1f %8.1f %s\n' "$name" "$get1k" \
    "$(awk -v r="$get1m" 'BEGIN {print r * 1.048576}')" "$put" \
    "$(echo "$pfd1" | cut -d' ' -f1)" "$(echo "$pfd1" | cut -d' ' -f2)" "$(echo "$pfd0" | cut -d' ' -f1)" \
    "$(awk -v r="$(echo "$locks" | cut -d' ' -f1)" 'BEGIN {print r / 2}')" "$idle" "$peak" "$notes" | tee -a "$WORK/results.txt"
}

# The headline: CPU time per request against nginx, in alternating rounds, then the same
# with one core kept busy, then PUT without fsync (scripts/bench_cpu.py).
echo "CPU per request against nginx, alternating rounds (scripts/bench_cpu.py):"
python3 "$REPO/scripts/bench_cpu.py" --binary "$BIN"
echo
echo "The same while a CPU hog keeps one core busy (a slow machine):"
python3 "$REPO/scripts/bench_cpu.py" --binary "$BIN" --hog
echo
echo "PUT with --durability none (no fdatasync, no directory fsync), as nginx writes:"
python3 "$REPO/scripts/bench_cpu.py" --binary "$BIN" --durability none --only PUT
echo
echo "Throughput, one server after the other:"
echo "machine: $(nproc) cores, $(awk -F': ' '/model name/ {print $2; exit}' /proc/cpuinfo), $(free -g | awk '/Mem:/ {print $2}') GiB, Linux $(uname -r)"
echo "load: wrk -t$THREADS -c$CONNS -d${DURATION}s; PUT: $PUT_COUNT x 10 MiB sequential curl -T"
printf '%-24s %9s %9s %8s %9s %8s %9s %9s %8s %8s\n' "server" "GET1K r/s" "GET1M MB/s" "PUT MB/s" "PFd1 r/s" "PFd1 p99" "PFd0 r/s" "LOCK+UN/s" "idle MiB" "peak MiB"

root="$WORK/all"; mkdir -p "$root"
start_kubedav "$WORK/all.log" --target=all --root "$root" --listen 127.0.0.1:0 --admin-listen 127.0.0.1:0
addr=$(announced "gateway HTTP" "$WORK/all.log")
measure "kubedav all-in-one" "http://$addr" "$root" "" "${PIDS[*]}"
stop_all

root="$WORK/micro"; mkdir -p "$root"
start_kubedav "$WORK/fileio.log" --target=fileio --root "$root" --grpc-listen 127.0.0.1:0 --admin-listen 127.0.0.1:0
grpc=$(announced "fileio gRPC" "$WORK/fileio.log")
start_kubedav "$WORK/locks.log" --target=locks --grpc-listen 127.0.0.1:0 --admin-listen 127.0.0.1:0
locks=$(announced "locks gRPC" "$WORK/locks.log")
start_kubedav "$WORK/gateway.log" --target=gateway --fileio-url "http://$grpc" --locks-url "http://$locks" --listen 127.0.0.1:0 --admin-listen 127.0.0.1:0
addr=$(announced "gateway HTTP" "$WORK/gateway.log")
measure "kubedav microservices" "http://$addr" "$root" "" "${PIDS[*]}"
stop_all

bash "$PEERS_DIR/peerctl.sh" start nginx >/dev/null
NGINX_STARTED=1
measure "nginx $(/usr/sbin/nginx -v 2>&1 | sed 's#.*/##')" "$(bash "$PEERS_DIR/peerctl.sh" url nginx | sed 's#/$##')" /tmp/peers/nginx/data www-data:www-data \
  "$(bash "$PEERS_DIR/peerctl.sh" pid nginx)"
bash "$PEERS_DIR/peerctl.sh" stop nginx >/dev/null; NGINX_STARTED=

bash "$PEERS_DIR/peerctl.sh" start apache >/dev/null
APACHE_STARTED=1
measure "apache $(/usr/sbin/apache2 -v | head -1 | sed 's#.*Apache/##; s# .*##')" "$(bash "$PEERS_DIR/peerctl.sh" url apache | sed 's#/$##')" /tmp/peers/apache/data www-data:www-data \
  "$(bash "$PEERS_DIR/peerctl.sh" pid apache)"
bash "$PEERS_DIR/peerctl.sh" stop apache >/dev/null; APACHE_STARTED=

# Each figure as a ratio against nginx (PROPFIND Depth 1 also against Apache), from this
# run's rows: the goals of docs/benchmarks.md are ratios, never absolute figures.
echo
echo "ratios (higher is better, except idle memory; the p99 column is left out)"
awk '
  { name = substr($0, 1, 24); sub(/ +$/, "", name); split(substr($0, 26), v, " ")
    rows[NR] = name; for (i = 1; i <= 9; i++) f[NR, i] = v[i]
    if (name ~ /^nginx/) n = NR; if (name ~ /^apache/) a = NR }
  END {
    printf "%-24s %9s %9s %8s %9s %9s %9s %12s %9s %10s\n", "vs nginx", "GET1K", "GET1M", "PUT", "PFd1", "PFd0", "LOCK+UN", "PFd1/Apache", "idle mem", "peak MiB"
    for (r = 1; r <= NR; r++) if (rows[r] ~ /^kubedav/) {
      printf "%-24s", rows[r]
      split("1 2 3 4 6 7", cols, " ")
      for (c = 1; c <= 6; c++) { i = cols[c]; printf " %8.2fx", (f[n, i] > 0 ? f[r, i] / f[n, i] : 0) }
      printf " %11.2fx", (f[a, 4] > 0 ? f[r, 4] / f[a, 4] : 0)
      printf " %8.2fx %10s\n", (f[n, 8] > 0 ? f[r, 8] / f[n, 8] : 0), f[r, 9] (f[r, 9] <= 128 ? " (<=128)" : " (>128)")
    }
  }' "$WORK/results.txt"

# The floor of the HTTP stack: hyper as the gateway configures it, answering a fixed
# 1 KiB body with no other work. It shows how much of the GET gap to nginx is kubedav's.
FLOOR="$(dirname "$BIN")/examples/floor"
if [ -x "$FLOOR" ]; then
  "$FLOOR" > "$WORK/floor.log" 2>&1 &
  FLOOR_PID=$!
  for _ in $(seq 100); do grep -q '^http' "$WORK/floor.log" && break; sleep 0.05; done
  floor=$(wrk_rps "$(head -1 "$WORK/floor.log")floor")
  kill "$FLOOR_PID"; wait "$FLOOR_PID" 2>/dev/null || true
  echo
  awk -v floor="$floor" '
    { name = substr($0, 1, 24); sub(/ +$/, "", name); split(substr($0, 26), v, " ")
      if (name ~ /^nginx/) n = v[1]; if (name == "kubedav all-in-one") k = v[1] }
    END {
      printf "HTTP stack floor (examples/floor.rs: hyper, a fixed 1 KiB answer, no other work): %.0f requests/s\n", floor
      printf "  = %.2fx nginx GET1K; kubedav all-in-one GET1K is %.2fx the floor\n", floor / n, k / floor
    }' "$WORK/results.txt"
fi

# How costs grow with the listing's size and the file's size (kubedav all-in-one).
echo
DURATION="$DURATION" bash "$REPO/scripts/bench-growth.sh"

# The report: this output, with the machine and the command, into docs/benchmarks.md.
STEAL="$(steal_counters | awk -v b="$STEAL_BEGIN" '{split(b, s, " "); printf "%.1f", ($2 > s[2]) ? 100 * ($1 - s[1]) / ($2 - s[2]) : 0}')"
exec >&3 2>&3
wait "$TEE_PID" 2>/dev/null || true
DURATION="$DURATION" THREADS="$THREADS" CONNS="$CONNS" PUT_COUNT="$PUT_COUNT" \
  bash "$REPO/scripts/bench-report.sh" "$WORK/output.txt" "$STEAL"
