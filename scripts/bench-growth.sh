#!/usr/bin/env bash
# How kubedav's costs grow (make bench runs it after the comparison), all-in-one:
#
#   PROPFIND cost per entry  Depth 1 allprop on collections of 10, 100, 1,000, 10,000
#                            and 100,000 files, all-in-one and microservices (gateway,
#                            fileio and locks, every process counted): wrk -t1 -c4 for
#                            DURATION/2 s each; the figures are 1 / (requests/s x
#                            entries), in microseconds, and the servers' CPU time (user +
#                            system) per entry, which wrk's share of the two cores does
#                            not blur; then issue 56's goal, met or NOT met: CPU per
#                            entry flat within 1.5x from 100 to 100,000 entries (the
#                            largest figure over the smallest), with 100,000 over 100
#                            beside it (--propfind-max-entries raised past 100,000).
#                            Each mode runs twice: as configured by default, where the
#                            gateway keeps listings of up to 4,096 entries and answers
#                            them again within its freshness bound, and keeping nothing
#                            (--gateway-cache-mib 0), where every listing is scanned: the
#                            growth of the scan itself. nginx with dav-ext lists the same
#                            collections last (from ../shared/peers, when installed), as
#                            the reference for how a listing grows on this machine: the
#                            kernel's lookups of 100,000 names miss the processor's
#                            caches for every server
#   GET memory               a fresh server per size (1 KiB, 1 MiB, 100 MiB, 1 GiB; the
#                            1 GiB file is sparse), 4 concurrent downloads of the file:
#                            peak resident set (VmHWM) after minus resident set before
#
# The lock check's growth (10 vs 10,000 active locks) is the criterion bench
# `cargo bench -p kubedav-locks --bench check`, also run by make bench.
# Env (defaults): DURATION=10 PEERS_DIR=../shared/peers.
set -euo pipefail
REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
PEERS_DIR="${PEERS_DIR:-$REPO/../shared/peers}"
DURATION="${DURATION:-10}"; THREADS=1; CONNS=4
BIN="${CARGO_TARGET_DIR:-$REPO/target}/dist/kubedav"
WORK="$(mktemp -d /tmp/kubedav-bench-growth.XXXXXX)"
PIDS=()
cleanup() {
  for pid in "${PIDS[@]}"; do kill "$pid" 2>/dev/null || true; done
  wait 2>/dev/null || true
  [ -n "${NGINX_STARTED:-}" ] && bash "$PEERS_DIR/peerctl.sh" stop nginx >/dev/null 2>&1 || true
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
# Lists collections of every size at address $2 and prints a row each; $1 names the run,
# and the rest are the processes whose CPU time counts (with their descendants).
measure_listings() {
  local run="$1" addr="$2"; shift 2
  local n ticks rps p99 bad cpu
  echo "$run"
  printf '%8s %10s %12s %14s %18s\n' entries "requests/s" "p99 ms" "us per entry" "CPU us per entry"
  for n in "${SIZES[@]}"; do
    DEPTH=1 DURATION=1 wrk_run "http://$addr/d$n/" -s "$PEERS_DIR/propfind.lua" >/dev/null   # warm-up
    ticks=$(cpu_ticks "$@")
    read -r rps p99 bad < <(DEPTH=1 DURATION=$((DURATION / 2)) wrk_run "http://$addr/d$n/" -s "$PEERS_DIR/propfind.lua")
    ticks=$(( $(cpu_ticks "$@") - ticks ))
    cpu=$(awk -v t="$ticks" -v r="$rps" -v d=$((DURATION / 2)) -v n="$n" 'BEGIN {print t * 1e4 / (r * d * (n + 1))}')
    PER_ENTRY[$run,$n]=$cpu
    printf '%8d %10.1f %12.2f %14.3f %18.3f%s\n' "$n" "$rps" "$p99" "$(awk -v r="$rps" -v n="$n" 'BEGIN {print 1e6 / (r * (n + 1))}')" \
      "$cpu" "$([ "${bad:-0}" = 0 ] || echo " ($bad non-2xx)")"
  done
}
RUNS=(all all-keeping-nothing microservices microservices-keeping-nothing)
for run in "${RUNS[@]}"; do
  mode=${run%%-*}
  common=(--propfind-max-entries 1000000)
  [ "$run" = "$mode" ] || common+=(--gateway-cache-mib 0)
  if [ "$mode" = all ]; then
    start_kubedav "$WORK/listings.log" --target=all --root "$root" --listen 127.0.0.1:0 --admin-listen 127.0.0.1:0 "${common[@]}"
  else
    start_kubedav "$WORK/fileio.log" --target=fileio --root "$root" --grpc-listen 127.0.0.1:0 --admin-listen 127.0.0.1:0
    start_kubedav "$WORK/locks.log" --target=locks --grpc-listen 127.0.0.1:0 --admin-listen 127.0.0.1:0
    fileio=$(announced "fileio gRPC" "$WORK/fileio.log"); locks=$(announced "locks gRPC" "$WORK/locks.log")
    start_kubedav "$WORK/listings.log" --target=gateway --fileio-url "http://$fileio" --locks-url "http://$locks" \
      --markdown-url "" --listen 127.0.0.1:0 --admin-listen 127.0.0.1:0 "${common[@]}"
  fi
  measure_listings "$run" "$(announced "gateway HTTP" "$WORK/listings.log")" "${PIDS[@]}"
  stop_all
done
# The reference: nginx (dav-ext) listing the same collections, copied into its data
# directory. Its allprop answer carries fewer properties than kubedav's (no dead
# properties, no lock discovery), so compare how its figures grow, not their size.
# A peer that cannot be started or given the collections is left out, not the run.
if [ -x /usr/sbin/nginx ] && [ -x "$PEERS_DIR/peerctl.sh" ] && bash "$PEERS_DIR/peerctl.sh" start nginx >/dev/null 2>&1; then
  NGINX_STARTED=1
  if cp -a "$root"/. /tmp/peers/nginx/data/ && chown -R www-data:www-data /tmp/peers/nginx/data; then
    measure_listings nginx "$(bash "$PEERS_DIR/peerctl.sh" url nginx | sed -E 's#^https?://##; s#/$##')" \
      "$(bash "$PEERS_DIR/peerctl.sh" pid nginx)"
    RUNS+=(nginx)
  else
    echo "nginx left out: the collections could not be copied into its data directory"
  fi
  bash "$PEERS_DIR/peerctl.sh" stop nginx >/dev/null || true; NGINX_STARTED=
  for n in "${SIZES[@]}"; do rm -rf "/tmp/peers/nginx/data/d$n"; done
else
  echo "nginx left out: not installed, or $PEERS_DIR/peerctl.sh could not start it"
fi
echo "goal (issue 56): CPU per entry flat within 1.5x from 100 to 100,000 files (the largest"
echo "figure from 100 entries up over the smallest; and 100,000 over 100 alone; nginx for"
echo "reference)"
for run in "${RUNS[@]}"; do
  figures=""
  for n in "${SIZES[@]}"; do [ "$n" -ge 100 ] && figures+="${PER_ENTRY[$run,$n]} "; done
  awk -v m="$run" -v f="$figures" -v a="${PER_ENTRY[$run,100]}" -v b="${PER_ENTRY[$run,100000]}" \
    'BEGIN {k = split(f, v, " "); lo = v[1]; hi = v[1]
            for (i = 2; i <= k; i++) { if (v[i] < lo) lo = v[i]; if (v[i] > hi) hi = v[i] }
            r = hi / lo
            verdict = (m == "nginx") ? "reference" : (r <= 1.5 ? "met" : "NOT met")
            printf "  %-30s x%.2f <= 1.5   %-9s (100,000 / 100: x%.2f)\n", m, r, verdict, b / a}'
done
# Each run's CPU per entry against nginx's at the same size (lower is better).
if [ -n "${PER_ENTRY[nginx,100]:-}" ]; then
  printf 'CPU per entry against nginx, at%s entries\n' "$(printf ' %s' "${SIZES[@]:1}")"
  for run in "${RUNS[@]}"; do
    [ "$run" = nginx ] && continue
    line=$(printf '  %-30s' "$run")
    for n in "${SIZES[@]:1}"; do
      line+=$(awk -v k="${PER_ENTRY[$run,$n]}" -v g="${PER_ENTRY[nginx,$n]}" 'BEGIN {printf " x%.2f", k / g}')
    done
    echo "$line"
  done
fi
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
  downloads=()
  for _ in 1 2 3 4; do curl -sf --max-time 120 -o /dev/null "http://$addr/$size" & downloads+=($!); done
  wait "${downloads[@]}" 2>/dev/null || true
  peak=$(awk '/^VmHWM:/ {print $2}' "/proc/$pid/status")
  printf '%10s %12.1f %12.1f %12.1f\n' "$size" "$(awk -v k="$before" 'BEGIN {print k / 1024}')" \
    "$(awk -v k="$peak" 'BEGIN {print k / 1024}')" "$(awk -v a="$before" -v b="$peak" 'BEGIN {print (b - a) / 1024}')"
  stop_all
done
