#!/usr/bin/env bash
# Authentication figures (make bench runs it after bench.sh), kubedav all-in-one:
#
#   1. GET 1 KiB with auth off                         requests/s and p99 (wrk, VALID_CONNS)
#   2. the same GET with Basic auth (cached)            requests/s and p99: the cost of auth
#   3. (2) again while FLOOD_CONNS other connections send wrong passwords for random users
#      (every one a cold SHA-512 crypt): p99 as a ratio against (2)
#
# Env (defaults): DURATION=10 VALID_CONNS=8 FLOOD_CONNS=64. wrk, curl as for bench.sh.
# Address and user lockouts are off here, so the flood really reaches the crypt pool.
set -euo pipefail
REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BIN="${CARGO_TARGET_DIR:-$REPO/target}/dist/kubedav"
DURATION="${DURATION:-10}"; VALID_CONNS="${VALID_CONNS:-8}"; FLOOD_CONNS="${FLOOD_CONNS:-64}"
WORK="$(mktemp -d /tmp/kubedav-bench-auth.XXXXXX)"
PIDS=()
cleanup() { for pid in "${PIDS[@]}"; do kill "$pid" 2>/dev/null || true; done; wait 2>/dev/null || true; rm -rf "$WORK"; }
trap cleanup EXIT
command -v wrk >/dev/null || { echo "wrk is missing: run make bench (it installs it)" >&2; exit 1; }

start() {  # log, args...
  local log="$1"; shift
  "$BIN" "$@" > /dev/null 2> "$log" < /dev/null &
  PIDS+=($!)
  for _ in $(seq 1 300); do
    if grep -q "gateway HTTP listening on" "$log"; then grep -oP "gateway HTTP listening on \K\S+" "$log"; return 0; fi
    sleep 0.1
  done
  echo "kubedav did not start" >&2; cat "$log" >&2; exit 1
}
stop_all() { for pid in "${PIDS[@]}"; do kill "$pid" 2>/dev/null || true; done; wait 2>/dev/null || true; PIDS=(); }

# "requests/s p99_ms non2xx" of one wrk run; extra args are passed to wrk.
measure() {
  local url="$1"; shift
  timeout -k 5 $((DURATION + 30)) wrk -t1 -c"$VALID_CONNS" -d"${DURATION}s" --latency "$@" "$url" \
    | awk '/Requests\/sec/ {rps=$2}
           /^ +99%/ {v=$2; u=v; sub(/[0-9.]+/, "", u); sub(/[a-z]+$/, "", v); p99 = (u=="us") ? v/1000 : (u=="s") ? v*1000 : v}
           /Non-2xx/ {bad=$5}
           END {printf "%s %.2f %d\n", rps, p99, bad}'
}

mkdir -p "$WORK/root"
head -c 1024 /dev/urandom > "$WORK/root/1k.bin"
echo "bench-password" | "$BIN" passwd "$WORK/users" bench > /dev/null
AUTH_HEADER="Authorization: Basic $(printf 'bench:bench-password' | base64)"
# The flood: 1,000 random users with wrong passwords, each request a cold crypt.
python3 - "$WORK/flood.lua" <<'PY'
import base64, random, sys
headers = [base64.b64encode(f"user{random.randrange(10**9)}:wrong{i}".encode()).decode() for i in range(1000)]
with open(sys.argv[1], "w") as f:
    f.write("local creds = {" + ",".join(f'"Basic {h}"' for h in headers) + "}\n")
    f.write("local n = 0\nrequest = function()\n  n = n % #creds + 1\n  return wrk.format('GET', '/1k.bin', {['Authorization'] = creds[n]})\nend\n")
PY

addr=$(start "$WORK/open.log" --target=all --root "$WORK/root" --listen 127.0.0.1:0 --admin-listen 127.0.0.1:0)
open=$(measure "http://$addr/1k.bin")
stop_all

addr=$(start "$WORK/auth.log" --target=all --root "$WORK/root" --users-file "$WORK/users" --listen 127.0.0.1:0 \
  --admin-listen 127.0.0.1:0 --auth-max-failures 0 --auth-max-failures-per-address 0)
curl -s -o /dev/null -H "$AUTH_HEADER" "http://$addr/1k.bin"
cached=$(measure "http://$addr/1k.bin" -H "$AUTH_HEADER")
timeout -k 5 $((DURATION + 40)) wrk -t1 -c"$FLOOD_CONNS" -d"$((DURATION + 4))s" -s "$WORK/flood.lua" "http://$addr/" > "$WORK/flood.txt" 2>&1 &
flood_pid=$!
sleep 2   # let the flood fill the crypt queue before measuring
flooded=$(measure "http://$addr/1k.bin" -H "$AUTH_HEADER")
wait "$flood_pid" || true
stop_all

f() { echo "$1" | cut -d' ' -f"$2"; }
echo "auth figures: wrk -t1 -c$VALID_CONNS -d${DURATION}s on GET 1 KiB (all-in-one)"
printf '%-44s %10s %10s %8s\n' "case" "req/s" "p99 ms" "non-2xx"
printf '%-44s %10.0f %10.2f %8s\n' "auth off" "$(f "$open" 1)" "$(f "$open" 2)" "$(f "$open" 3)"
printf '%-44s %10.0f %10.2f %8s\n' "Basic auth, cached" "$(f "$cached" 1)" "$(f "$cached" 2)" "$(f "$cached" 3)"
printf '%-44s %10.0f %10.2f %8s\n' "Basic auth, cached, during a $FLOOD_CONNS-conn flood" "$(f "$flooded" 1)" "$(f "$flooded" 2)" "$(f "$flooded" 3)"
awk -v a="$(f "$cached" 2)" -v b="$(f "$flooded" 2)" 'BEGIN {printf "flood p99 ratio (flooded / quiet): %.2f\n", b / a}'
echo "flood: $(grep -E 'Requests/sec|Non-2xx' "$WORK/flood.txt" | tr -s ' ' | tr '\n' ' ')"
