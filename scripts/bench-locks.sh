#!/usr/bin/env bash
# Lock figures (make bench runs it): kubedav in both modes with the locks in
# memory and in a real redis-server (over loopback TCP), and Apache mod_dav (locks in its
# on-disk DBM) as the peer, measured one after the other in the same run:
#
#   LOCK+UNLOCK        pairs/s, and p50/p99 ms of one request; one connection per thread
#   lock-edit-unlock   cycles/s (LOCK, PUT 4 KiB with the token, UNLOCK), p50/p99 ms
#   PUT 4 KiB          requests/s and p99 ms over CONNS connections: every PUT asks the
#                      lock manager first
#
# locks=redis+WAIT is the Redis store answering each lock change only once a replica has
# it (--redis-replica-acks 1, the default behind Sentinel), against a real replica.
#
# Env (defaults): DURATION=10 THREADS=2 CONNS=64 PEERS_DIR=../shared/peers.
# Needs wrk and Apache (make bench installs them) and redis-server (make test does).
set -euo pipefail
REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
PEERS_DIR="${PEERS_DIR:-$REPO/../shared/peers}"
DURATION="${DURATION:-10}"; THREADS="${THREADS:-2}"; CONNS="${CONNS:-64}"
BIN="${CARGO_TARGET_DIR:-$REPO/target}/dist/kubedav"
WORK="$(mktemp -d /tmp/kubedav-bench-locks.XXXXXX)"
PIDS=()
cleanup() {
  for pid in "${PIDS[@]}"; do kill "$pid" 2>/dev/null || true; done
  [ -n "${REDIS_PID:-}" ] && kill "$REDIS_PID" 2>/dev/null || true
  [ -n "${REPLICA_PID:-}" ] && kill "$REPLICA_PID" 2>/dev/null || true
  [ -n "${APACHE_STARTED:-}" ] && bash "$PEERS_DIR/peerctl.sh" stop apache >/dev/null 2>&1 || true
  wait 2>/dev/null || true
  rm -rf "$WORK"
}
trap cleanup EXIT
source "$REPO/scripts/bench-lib.sh"
bash "$REPO/scripts/need.sh" wrk:wrk redis-server:redis-server
[ -x "$BIN" ] || { echo "build first: make build" >&2; exit 1; }

# A real redis-server on a free loopback port.
port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
mkdir -p "$WORK/redis"
redis-server --port "$port" --bind 127.0.0.1 --dir "$WORK/redis" --save "" --appendonly no --daemonize no \
  > "$WORK/redis.log" 2>&1 < /dev/null &
REDIS_PID=$!
for _ in $(seq 1 100); do redis-cli -p "$port" ping 2>/dev/null | grep -q PONG && break; sleep 0.1; done
# Its replica, for the store that waits for one to acknowledge each change (as behind
# Sentinel: --redis-replica-acks 1).
replica_port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
mkdir -p "$WORK/replica"
redis-server --port "$replica_port" --bind 127.0.0.1 --dir "$WORK/replica" --save "" --appendonly no \
  --replicaof 127.0.0.1 "$port" --daemonize no > "$WORK/replica.log" 2>&1 < /dev/null &
REPLICA_PID=$!
for _ in $(seq 1 100); do redis-cli -p "$replica_port" info replication 2>/dev/null | grep -q "master_link_status:up" && break; sleep 0.1; done
# The stores: a name, --lock-store, and --redis-replica-acks.
STORES=("memory memory 0" "redis redis://127.0.0.1:$port/0 0" "redis+WAIT redis://127.0.0.1:$port/0 1")

# measure NAME BASE_URL DOCROOT [OWNER]
measure() {
  local name="$1" base="$2" docroot="$3" owner="${4:-}"
  redis-cli -p "$port" flushall > /dev/null   # no lock left over from the run before
  # Each lock scenario has its own files: wrk may stop between a LOCK and its UNLOCK.
  mkdir -p "$docroot/bench/lock" "$docroot/bench/edit" "$docroot/bench/put"
  for t in $(seq 0 $((THREADS - 1))); do : > "$docroot/bench/lock/t$t.txt"; : > "$docroot/bench/edit/t$t.txt"; done
  [ -n "$owner" ] && chown -R "$owner" "$docroot/bench"
  local pairs cycles puts
  pairs=$(LOCKDIR=/bench/lock/ CONNS="$THREADS" wrk_stats "$base/bench/lock/" -s "$REPO/scripts/lockunlock.lua")
  cycles=$(LOCKDIR=/bench/edit/ CONNS="$THREADS" wrk_stats "$base/bench/edit/" -s "$REPO/scripts/lockeditunlock.lua")
  puts=$(PUTDIR=/bench/put/ wrk_stats "$base/bench/put/" -s "$REPO/scripts/put4k.lua")
  local notes=""
  for f in "lock:$pairs" "edit:$cycles" "put:$puts"; do
    bad=$(echo "${f#*:}" | cut -d' ' -f4); [ "${bad:-0}" = 0 ] || notes="$notes (${f%%:*}: $bad non-2xx)"
  done
  read -r prps pp50 pp99 _ <<< "$pairs"
  read -r crps cp50 cp99 _ <<< "$cycles"
  read -r urps _ up99 _ <<< "$puts"
  printf '%-30s %9.0f %7.2f %7.2f %9.0f %7.2f %7.2f %9.0f %7.2f %s\n' "$name" \
    "$(awk -v r="$prps" 'BEGIN {print r / 2}')" "$pp50" "$pp99" \
    "$(awk -v r="$crps" 'BEGIN {print r / 3}')" "$cp50" "$cp99" "$urps" "$up99" "$notes"
}

echo "machine: $(nproc) cores, $(awk -F': ' '/model name/ {print $2; exit}' /proc/cpuinfo); $(redis-server --version | awk '{print $1, $2, $3}')"
echo "load: wrk -t$THREADS, ${DURATION}s; lock scenarios 1 connection per thread, PUT $CONNS connections"
printf '%-30s %9s %7s %7s %9s %7s %7s %9s %7s\n' "server" "LOCK+UN/s" "p50 ms" "p99 ms" "edit/s" "p50 ms" "p99 ms" "PUT4K r/s" "p99 ms"

for entry in "${STORES[@]}"; do
  read -r name store acks <<< "$entry"
  root="$WORK/all-$name"; mkdir -p "$root"
  start_kubedav "$WORK/all.log" --target=all --lock-store "$store" --redis-replica-acks "$acks" --root "$root" \
    --listen 127.0.0.1:0 --admin-listen 127.0.0.1:0
  measure "kubedav all locks=$name" "http://$(announced "gateway HTTP" "$WORK/all.log")" "$root"
  stop_all
done
for entry in "${STORES[@]}"; do
  read -r name store acks <<< "$entry"
  root="$WORK/micro-$name"; mkdir -p "$root"
  start_kubedav "$WORK/fileio.log" --target=fileio --root "$root" --grpc-listen 127.0.0.1:0 --admin-listen 127.0.0.1:0
  grpc=$(announced "fileio gRPC" "$WORK/fileio.log")
  start_kubedav "$WORK/locks.log" --target=locks --lock-store "$store" --redis-replica-acks "$acks" \
    --grpc-listen 127.0.0.1:0 --admin-listen 127.0.0.1:0
  locks=$(announced "locks gRPC" "$WORK/locks.log")
  start_kubedav "$WORK/gateway.log" --target=gateway --fileio-url "http://$grpc" --locks-url "http://$locks" \
    --listen 127.0.0.1:0 --admin-listen 127.0.0.1:0
  measure "kubedav micro locks=$name" "http://$(announced "gateway HTTP" "$WORK/gateway.log")" "$root"
  stop_all
done

bash "$PEERS_DIR/peerctl.sh" start apache >/dev/null
APACHE_STARTED=1
measure "apache $(/usr/sbin/apache2 -v | head -1 | sed 's#.*Apache/##; s# .*##')" \
  "$(bash "$PEERS_DIR/peerctl.sh" url apache | sed 's#/$##')" /tmp/peers/apache/data www-data:www-data
