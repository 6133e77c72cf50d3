#!/usr/bin/env bash
# make loadtest: one k6 scenario of loadtests/ against kubedav in one mode, with its
# thresholds enforced (k6 exits non-zero when one fails).
#
#   scripts/loadtest.sh SCENARIO [MODE]
#     SCENARIO  smoke | webdav-mixed | lock-edit-unlock | markdown-agents | auth-flood | soak
#     MODE      all (default) | microservices (every service its own process, on loopback)
#
# kubedav runs from target/dist (or KUBEDAV_BIN) with Basic auth (a users file with
# the load user), on free ports, in a fresh root; it is stopped at the end. Env for the
# scenario (DURATION, VUS, ...) passes through to k6, and KUBEDAV_* settings to kubedav;
# K6_ARGS adds k6 options. After the run it prints the requests k6 sent per second and
# kubedav's CPU time per request (user + system, every process summed), the figure
# that survives a busy machine, a table of the thresholds with what was measured, and
# whether the scenario's teardown left the served root empty (a failure if not). k6's
# summary is kept as JSON in $K6_SUMMARY when that is set. Installs k6 when missing
# (scripts/need-k6.sh).
set -euo pipefail
REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
SCENARIO="${1:?usage: loadtest.sh SCENARIO [all|microservices]}"
MODE="${2:-all}"
SCRIPT="$REPO/loadtests/$SCENARIO.js"
[ -f "$SCRIPT" ] || { echo "loadtest: no scenario $SCENARIO (see loadtests/)" >&2; exit 2; }
case "$MODE" in all|microservices) ;; *) echo "loadtest: mode is all or microservices, not $MODE" >&2; exit 2;; esac
K6="$(bash "$REPO/scripts/need-k6.sh")"
BIN="${KUBEDAV_BIN:-${CARGO_TARGET_DIR:-$REPO/target}/dist/kubedav}"
[ -x "$BIN" ] || cargo build --profile dist --locked -p kubedav --manifest-path "$REPO/Cargo.toml"
WORK="$(mktemp -d /tmp/kubedav-loadtest.XXXXXX)"
PIDS=()
NAMES=()
cleanup() {
  for pid in "${PIDS[@]}"; do kill "$pid" 2>/dev/null || true; done
  wait 2>/dev/null || true
  rm -rf "$WORK"
}
trap cleanup EXIT
# start_kubedav, announced.
source "$REPO/scripts/bench-lib.sh"

mkdir -p "$WORK/root"
printf 'load-pw\n' | "$BIN" passwd "$WORK/users" load >/dev/null
auth_args=(--users-file "$WORK/users")
# A flood from one machine stands for many addresses: lock out users, not the address.
[ "$SCENARIO" = auth-flood ] && auth_args+=(--auth-max-failures-per-address 0)
# k6's virtual users stand for many clients, all from one address here.
any=(--admin-listen 127.0.0.1:0 --max-connections-per-address 4096)
if [ "$MODE" = all ]; then
  start_kubedav "$WORK/all.log" --target=all --root "$WORK/root" --listen 127.0.0.1:0 "${any[@]}" "${auth_args[@]}"
  NAMES=(all)
  addr=$(announced "gateway HTTP" "$WORK/all.log")
else
  for target in fileio locks markdown auth; do
    args=(--target="$target" --grpc-listen 127.0.0.1:0 "${any[@]}")
    [ "$target" = fileio ] && args+=(--root "$WORK/root")
    [ "$target" = auth ] && args+=("${auth_args[@]}")
    start_kubedav "$WORK/$target.log" "${args[@]}"
    NAMES+=("$target")
  done
  urls=()
  for target in fileio locks markdown auth; do
    urls+=("--$target-url" "http://$(announced "$target gRPC" "$WORK/$target.log")")
  done
  start_kubedav "$WORK/gateway.log" --target=gateway --listen 127.0.0.1:0 "${any[@]}" "${urls[@]}"
  NAMES+=(gateway)
  addr=$(announced "gateway HTTP" "$WORK/gateway.log")
fi

echo "loadtest: $SCENARIO against kubedav $MODE at http://$addr/"
# utime + stime, in clock ticks, of every kubedav process.
cpu_ticks() {
  local total=0 pid
  for pid in "${PIDS[@]}"; do
    [ -r "/proc/$pid/stat" ] || continue
    total=$((total + $(awk '{sub(/^.*\) /, ""); print $12 + $13}' "/proc/$pid/stat")))
  done
  echo "$total"
}
status=0
ticks_before=$(cpu_ticks)
KUBEDAV_URL="http://$addr" KUBEDAV_USER=load KUBEDAV_PASSWORD=load-pw \
  "$K6" run --no-usage-report --summary-trend-stats "avg,med,p(95),p(99),max" \
  --summary-export "$WORK/summary.json" ${K6_ARGS:-} "$SCRIPT" || status=$?
ticks=$(( $(cpu_ticks) - ticks_before ))
[ -z "${K6_SUMMARY:-}" ] || cp "$WORK/summary.json" "$K6_SUMMARY" 2>/dev/null || true
if [ -s "$WORK/summary.json" ]; then
  python3 - "$WORK/summary.json" "$ticks" "$(getconf CLK_TCK)" "$MODE" <<'PY'
import json, sys
summary, ticks, hz, mode = json.load(open(sys.argv[1])), int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
reqs = summary["metrics"]["http_reqs"]
per = 1e6 * ticks / hz / reqs["count"] if reqs["count"] else 0
print(f"loadtest: {mode}: {reqs['count']} requests, {reqs['rate']:.1f}/s; "
      f"kubedav CPU {ticks / hz:.2f} s, {per:.0f} us per request (setup and teardown included)")
# The thresholds, one row each (in this export format `true` means the threshold failed).
rows = []
for name, metric in sorted(summary["metrics"].items()):
    for threshold, failed in metric.get("thresholds", {}).items():
        stat = threshold.split("<")[0].split(">")[0].split("=")[0].split("!")[0].strip()
        value = metric.get(stat, metric.get("value"))
        shown = f"{value:.4g}" if isinstance(value, (int, float)) else "?"
        rows.append((name, threshold, shown, "FAILED" if failed else "ok"))
if rows:
    widths = [max(len(r[i]) for r in rows + [("metric", "threshold", "measured", "result")]) for i in range(4)]
    for row in [("metric", "threshold", "measured", "result")] + rows:
        print("loadtest:   " + "  ".join(cell.ljust(w) for cell, w in zip(row, widths)))
PY
fi
# Every scenario deletes what it made in its teardown: nothing may be left in the root.
left=$(find "$WORK/root" -mindepth 1 -maxdepth 1 ! -name '.*' | head -5)
if [ -n "$left" ]; then
  echo "loadtest: $SCENARIO left data on the server (its teardown must delete it): $left" >&2
  [ "$status" -ne 0 ] || status=1
else
  echo "loadtest: $SCENARIO left nothing behind in the served root"
fi
# Memory and descriptors of every kubedav process after the run (peak = VmHWM).
for i in "${!PIDS[@]}"; do
  pid="${PIDS[$i]}"
  [ -r "/proc/$pid/status" ] || continue
  awk -v name="${NAMES[$i]}" -v fds="$(ls "/proc/$pid/fd" | wc -l)" \
    '/^VmHWM/ {peak=$2} /^VmRSS/ {rss=$2}
     END {printf "loadtest: %-9s peak RSS %6.1f MiB, RSS now %6.1f MiB, %d open fds\n", name, peak/1024, rss/1024, fds}' \
    "/proc/$pid/status"
done
if [ "$status" -ne 0 ]; then
  echo "loadtest: $SCENARIO against $MODE FAILED (k6 exit $status); kubedav's logs:" >&2
  tail -n 20 "$WORK"/*.log >&2
fi
exit "$status"
