#!/usr/bin/env bash
# How kubedav's costs grow (make bench runs it after the comparison), all-in-one:
#
#   PROPFIND cost per entry  Depth 1 allprop on collections of 10, 100, 1,000, 10,000
#                            and 100,000 files, all-in-one and microservices (gateway,
#                            fileio and locks, every process counted): wrk -t1 -c4 for
#                            DURATION/2 s each; the figures are 1 / (requests/s x
#                            entries), in microseconds, and the servers' CPU time (user +
#                            system) per entry, which wrk's share of the two cores does
#                            not blur; then issue 56's goal: CPU per entry at 100,000
#                            within 1.5x of that at 100, met or NOT met
#                            (--propfind-max-entries raised past 100,000 for the run)
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
root="$WORK/listings"; mkdir -p "$root"
SIZES=(10 100 1000 10000 100000)
python3 - "$root" "${SIZES[@]}" <<'PY'
import os, sys
root, sizes = sys.argv[1], [int(n) for n in sys.argv[2:]]
small = b"x" * 100
for n in sizes:
    d = os.path.join(root, f"d{n}")
    os.makedirs(d)
    for i in range(1, n + 1):
        with open(os.path.join(d, f"f{i}.txt"), "wb") as f:
            f.write(small)
PY
declare -A PER_ENTRY
for mode in all microservices; do
  common=(--propfind-max-entries 1000000)
  if [ "$mode" = all ]; then
    start_kubedav "$WORK/listings.log" --target=all --root "$root" --listen 127.0.0.1:0 --admin-listen 127.0.0.1:0 "${common[@]}"
  else
    start_kubedav "$WORK/fileio.log" --target=fileio --root "$root" --grpc-listen 127.0.0.1:0 --admin-listen 127.0.0.1:0
    start_kubedav "$WORK/locks.log" --target=locks --grpc-listen 127.0.0.1:0 --admin-listen 127.0.0.1:0
    fileio=$(announced "fileio gRPC" "$WORK/fileio.log"); locks=$(announced "locks gRPC" "$WORK/locks.log")
    start_kubedav "$WORK/listings.log" --target=gateway --fileio-url "http://$fileio" --locks-url "http://$locks" \
      --markdown-url "" --listen 127.0.0.1:0 --admin-listen 127.0.0.1:0 "${common[@]}"
  fi
  addr=$(announced "gateway HTTP" "$WORK/listings.log")
  echo "$mode"
  printf '%8s %10s %12s %14s %18s\n' entries "requests/s" "p99 ms" "us per entry" "CPU us per entry"
  for n in "${SIZES[@]}"; do
    DEPTH=1 DURATION=1 wrk_run "http://$addr/d$n/" -s "$REPO/../shared/peers/propfind.lua" >/dev/null   # warm-up
    ticks=$(cpu_ticks "${PIDS[@]}")
    read -r rps p99 bad < <(DEPTH=1 DURATION=$((DURATION / 2)) wrk_run "http://$addr/d$n/" -s "$REPO/../shared/peers/propfind.lua")
    ticks=$(( $(cpu_ticks "${PIDS[@]}") - ticks ))
    cpu=$(awk -v t="$ticks" -v r="$rps" -v d=$((DURATION / 2)) -v n="$n" 'BEGIN {print t * 1e4 / (r * d * (n + 1))}')
    PER_ENTRY[$mode,$n]=$cpu
    printf '%8d %10.1f %12.2f %14.3f %18.3f%s\n' "$n" "$rps" "$p99" "$(awk -v r="$rps" -v n="$n" 'BEGIN {print 1e6 / (r * (n + 1))}')" \
      "$cpu" "$([ "${bad:-0}" = 0 ] || echo " ($bad non-2xx)")"
  done
  stop_all
done
echo "goal (issue 56): CPU per entry at 100,000 files within 1.5x of that at 100"
for mode in all microservices; do
  awk -v m="$mode" -v a="${PER_ENTRY[$mode,100]}" -v b="${PER_ENTRY[$mode,100000]}" \
    'BEGIN {r = b / a; printf "  %-13s x%.2f <= 1.5   %s\n", m, r, (r <= 1.5 ? "met" : "NOT met")}'
done
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
