#!/usr/bin/env bash
# How kubedav's costs grow (make bench runs it after the comparison), all-in-one:
#
#   PROPFIND cost per entry  Depth 1 allprop on collections of 10, 100, 1,000 and 10,000
#                            files: wrk -t1 -c4 for DURATION/2 s each; the figures are
#                            1 / (requests/s x entries), in microseconds, and the
#                            server's CPU time (user + system) per entry, which wrk's
#                            share of the two cores does not blur
#   GET memory               a fresh server per size (1 KiB, 1 MiB, 100 MiB, 1 GiB; the
#                            1 GiB file is sparse), 4 concurrent downloads of the file:
#                            peak resident set (VmHWM) after minus resident set before
#
# The lock check's growth (10 vs 10,000 active locks) is the criterion bench
# `cargo bench -p kubedav-locks --bench check`, also run by make bench.
# Env (defaults): DURATION=10.
set -euo pipefail
REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
DURATION="${DURATION:-10}"; THREADS=1; CONNS=4
BIN="${CARGO_TARGET_DIR:-$REPO/target}/dist/kubedav"
WORK="$(mktemp -d /tmp/kubedav-bench-growth.XXXXXX)"
PIDS=()
cleanup() {
  for pid in "${PIDS[@]}"; do kill "$pid" 2>/dev/null || true; done
  wait 2>/dev/null || true
  rm -rf "$WORK"
}
trap cleanup EXIT
source "$REPO/scripts/bench-lib.sh"
[ -x "$BIN" ] || { echo "build first: make build" >&2; exit 1; }

echo "PROPFIND Depth 1 (allprop), cost per entry, wrk -t$THREADS -c$CONNS -d$((DURATION / 2))s"
printf '%8s %10s %12s %14s %18s\n' entries "requests/s" "p99 ms" "us per entry" "CPU us per entry"
root="$WORK/listings"; mkdir -p "$root"
printf 'x%.0s' $(seq 1 100) > "$WORK/small.txt"
for n in 10 100 1000 10000; do
  mkdir -p "$root/d$n"
  for i in $(seq 1 "$n"); do cp "$WORK/small.txt" "$root/d$n/f$i.txt"; done
done
start_kubedav "$WORK/listings.log" --target=all --root "$root" --listen 127.0.0.1:0 --admin-listen 127.0.0.1:0
addr=$(announced "gateway HTTP" "$WORK/listings.log")
for n in 10 100 1000 10000; do
  DEPTH=1 DURATION=1 wrk_run "http://$addr/d$n/" -s "$REPO/../shared/peers/propfind.lua" >/dev/null   # warm-up
  ticks=$(cpu_ticks "${PIDS[@]}")
  read -r rps p99 bad < <(DEPTH=1 DURATION=$((DURATION / 2)) wrk_run "http://$addr/d$n/" -s "$REPO/../shared/peers/propfind.lua")
  ticks=$(( $(cpu_ticks "${PIDS[@]}") - ticks ))
  printf '%8d %10.1f %12.2f %14.3f %18.3f%s\n' "$n" "$rps" "$p99" "$(awk -v r="$rps" -v n="$n" 'BEGIN {print 1e6 / (r * (n + 1))}')" \
    "$(awk -v t="$ticks" -v r="$rps" -v d=$((DURATION / 2)) -v n="$n" 'BEGIN {print t * 1e4 / (r * d * (n + 1))}')" \
    "$([ "${bad:-0}" = 0 ] || echo " ($bad non-2xx)")"
done
stop_all

echo
echo "GET memory: 4 concurrent downloads of one file, fresh server per size"
printf '%10s %12s %12s %12s\n' size "before MiB" "peak MiB" "growth MiB"
root="$WORK/files"; mkdir -p "$root"
head -c 1024 /dev/urandom > "$root/1KiB"
head -c 1048576 /dev/urandom > "$root/1MiB"
head -c $((100 * 1048576)) /dev/urandom > "$root/100MiB"
truncate -s 1G "$root/1GiB"
for size in 1KiB 1MiB 100MiB 1GiB; do
  start_kubedav "$WORK/get.log" --target=all --root "$root" --listen 127.0.0.1:0 --admin-listen 127.0.0.1:0
  addr=$(announced "gateway HTTP" "$WORK/get.log")
  pid="${PIDS[-1]}"
  before=$(awk '/^VmRSS:/ {print $2}' "/proc/$pid/status")
  for _ in 1 2 3 4; do curl -sf --max-time 120 -o /dev/null "http://$addr/$size" & done
  wait $(jobs -p | grep -v "$pid") 2>/dev/null || true
  peak=$(awk '/^VmHWM:/ {print $2}' "/proc/$pid/status")
  printf '%10s %12.1f %12.1f %12.1f\n' "$size" "$(awk -v k="$before" 'BEGIN {print k / 1024}')" \
    "$(awk -v k="$peak" 'BEGIN {print k / 1024}')" "$(awk -v a="$before" -v b="$peak" 'BEGIN {print (b - a) / 1024}')"
  stop_all
done
