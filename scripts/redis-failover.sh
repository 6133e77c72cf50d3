#!/usr/bin/env bash
# A Redis failover under load: kubedav in microservices mode on a bucket of a real
# versitygw, two gateways over two fileio replicas, locks and auth, with the locks and
# the replicas' registry in Redis behind Sentinel (three real redis-servers, a master
# and two replicas, and three real redis-sentinels). loadtests/redis-failover.js sends
# reads, writes and locks straight to the gateways; a third in, the master is killed
# with SIGKILL and the Sentinels make a replica master. Prints the requests made,
# refused with 503 + Retry-After, failed, the stale reads and lost locks (must be 0),
# when the Sentinels named a new master and when requests stopped being refused. Fails
# on any failed request, stale read or lost lock. Installs redis and k6 when missing,
# builds versitygw.
# Env: RATE, DURATION (default 40s) pass to k6; KEEP=1 keeps the logs of every process
# (the script says where).
set -euo pipefail
REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
bash "$REPO/scripts/need.sh" redis-server:redis-server redis-sentinel:redis-sentinel curl:curl
K6="$(bash "$REPO/scripts/need-k6.sh")"
VERSITYGW="${KUBEDAV_VERSITYGW:-$(bash "$REPO/scripts/need-versitygw.sh")}"
BIN="${CARGO_TARGET_DIR:-$REPO/target}/dist/kubedav"
[ -x "$BIN" ] || cargo build --profile dist --locked -p kubedav --manifest-path "$REPO/Cargo.toml"
WORK="$(mktemp -d /tmp/kubedav-redis-failover.XXXXXX)"
PIDS=()
cleanup() {
  for pid in "${PIDS[@]}"; do kill "$pid" 2>/dev/null || true; done
  wait 2>/dev/null || true
  if [ "${KEEP:-0}" = 1 ]; then echo "redis-failover: logs kept in $WORK" >&2; else rm -rf "$WORK"; fi
}
trap cleanup EXIT
source "$REPO/scripts/bench-lib.sh"
MASTER_NAME=kubedav

# The master and its two replicas.
REDIS_PORTS=()
REDIS_PIDS=()
for n in 0 1 2; do
  free_port port; REDIS_PORTS+=("$port")
  replica=()
  [ "$n" -gt 0 ] && replica=(--replicaof 127.0.0.1 "${REDIS_PORTS[0]}")
  mkdir -p "$WORK/redis-$n"  # a replica keeps the copy it synced from in its directory
  redis-server --port "$port" --bind 127.0.0.1 --dir "$WORK/redis-$n" --save '' --appendonly no "${replica[@]}" \
    > "$WORK/redis-$n.log" 2>&1 &
  PIDS+=($!); REDIS_PIDS+=($!)
done
# Three Sentinels: a master silent for two seconds is down once two agree. Not one second:
# Sentinel pings each server and retries a lost connection once a second, and with
# down-after-milliseconds 1000 a Sentinel now and then judged the master it had just
# switched to down before its first answer came (1 failover in 14 without kubedav, 2 in
# 13 under this load): a second failover, whose new master then had no replica for 16 s,
# so writes that must reach one were refused (docs/benchmarks.md, "2026-12-06 (3)").
SENTINEL_PORTS=()
for n in 0 1 2; do
  free_port port; SENTINEL_PORTS+=("$port")
  cat > "$WORK/sentinel-$n.conf" <<CONF
port $port
bind 127.0.0.1
dir $WORK
sentinel monitor $MASTER_NAME 127.0.0.1 ${REDIS_PORTS[0]} 2
sentinel down-after-milliseconds $MASTER_NAME 2000
sentinel failover-timeout $MASTER_NAME 10000
CONF
  redis-sentinel "$WORK/sentinel-$n.conf" > "$WORK/sentinel-$n.log" 2>&1 &
  PIDS+=($!)
done
# Ready once every Sentinel knows both replicas and the two other Sentinels.
sentinel_field() {
  redis-cli -p "$1" SENTINEL master "$MASTER_NAME" 2>/dev/null | awk -v f="$2" 'prev == f {print; exit} {prev = $0}'
}
for _ in $(seq 1 600); do
  ready=0
  for port in "${SENTINEL_PORTS[@]}"; do
    [ "$(sentinel_field "$port" num-slaves)" = 2 ] && [ "$(sentinel_field "$port" num-other-sentinels)" = 2 ] && ready=$((ready + 1))
  done
  [ "$ready" = 3 ] && break
  sleep 0.05
done
[ "$ready" = 3 ] || { echo "redis-failover: the Sentinels never found each other" >&2; tail "$WORK"/sentinel-*.log >&2; exit 1; }
master_port() {
  redis-cli -p "${SENTINEL_PORTS[0]}" SENTINEL get-master-addr-by-name "$MASTER_NAME" 2>/dev/null | sed -n 2p
}
SENTINELS="127.0.0.1:${SENTINEL_PORTS[0]},127.0.0.1:${SENTINEL_PORTS[1]},127.0.0.1:${SENTINEL_PORTS[2]}"
REDIS_URL="redis+sentinel://$SENTINELS/$MASTER_NAME/0"

free_port port; S3="127.0.0.1:$port"
mkdir -p "$WORK/s3/files"  # the bucket: a directory of versitygw's posix backend
# --disableotmp: listings under concurrent overwrites must not show versitygw's temporary
# names (docs/architecture.md, "The S3 server the tests run on").
"$VERSITYGW" --access failover-key --secret failover-secret --port "$S3" posix --disableotmp "$WORK/s3" > "$WORK/s3.log" 2>&1 &
PIDS+=($!)
for _ in $(seq 1 200); do curl -s -o /dev/null "http://$S3/" && break; sleep 0.05; done
export AWS_ENDPOINT_URL="http://$S3" AWS_REGION=us-east-1 AWS_ACCESS_KEY_ID=failover-key AWS_SECRET_ACCESS_KEY=failover-secret

printf 'load-pw\n' | "$BIN" passwd "$WORK/users" load >/dev/null
registry=(--registry "$REDIS_URL")
FILEIO_ADMIN=()
for r in a b; do
  free_port port; grpc="127.0.0.1:$port"
  free_port port; admin="127.0.0.1:$port"
  start_kubedav "$WORK/fileio-$r.log" --target=fileio --grpc-listen "$grpc" --admin-listen "$admin" \
    --storage s3://files/served "${registry[@]}"
  FILEIO_ADMIN+=("$admin")
  [ "$r" = a ] && urls=(--fileio-url "http://$grpc" "${registry[@]}")
done
for target in locks auth; do
  args=(--target="$target" --grpc-listen 127.0.0.1:0 --admin-listen 127.0.0.1:0)
  [ "$target" = locks ] && args+=(--lock-store "$REDIS_URL" "${registry[@]}")
  [ "$target" = auth ] && args+=(--users-file "$WORK/users")
  start_kubedav "$WORK/$target.log" "${args[@]}"
  urls+=("--$target-url" "http://$(announced "$target gRPC" "$WORK/$target.log")")
done
urls+=(--markdown-url "")
for admin in "${FILEIO_ADMIN[@]}"; do wait_ready "$admin"; done
GATEWAYS=()
for g in 1 2; do
  start_kubedav "$WORK/gateway$g.log" --target=gateway --listen 127.0.0.1:0 --admin-listen 127.0.0.1:0 "${urls[@]}"
  GATEWAYS+=("http://$(announced "gateway HTTP" "$WORK/gateway$g.log")")
done

DURATION="${DURATION:-40s}"
seconds="${DURATION%s}"
echo "redis-failover: k6 to two gateways over two fileio replicas on versitygw, locks and the registry in Redis behind three Sentinels (master on port ${REDIS_PORTS[0]}), for $DURATION"
KUBEDAV_URLS="${GATEWAYS[0]},${GATEWAYS[1]}" KUBEDAV_URL="${GATEWAYS[0]}" KUBEDAV_USER=load KUBEDAV_PASSWORD=load-pw \
  DURATION="$DURATION" "$K6" run --no-usage-report --quiet --summary-export "$WORK/summary.json" \
  "$REPO/loadtests/redis-failover.js" > "$WORK/k6.log" 2>&1 &
K6PID=$!

sleep $((seconds / 3))
killed_at=$(date +%s%3N)
# Reaped at once with the shell's report silenced: bash would print "Killed".
{ kill -KILL "${REDIS_PIDS[0]}"; wait "${REDIS_PIDS[0]}"; } 2>/dev/null || true
echo "redis-failover: master on port ${REDIS_PORTS[0]} killed (SIGKILL)"
for _ in $(seq 1 600); do
  new="$(master_port)"
  [ -n "$new" ] && [ "$new" != "${REDIS_PORTS[0]}" ] && break
  sleep 0.05
done
named_at=$(date +%s%3N)
echo "redis-failover: the Sentinels named port $new master $((named_at - killed_at)) ms after the kill"
status=0
wait "$K6PID" || status=$?
python3 - "$WORK/summary.json" "$WORK/k6.log" "$killed_at" <<'PY'
import json, re, sys
m = json.load(open(sys.argv[1]))["metrics"]
count = lambda name: int(m.get(name, {}).get("count", 0))
killed = int(sys.argv[3])
times = [int(t) for t in re.findall(r"(?:refused|failed) at (\d+)", open(sys.argv[2]).read())]
after = [t - killed for t in times if t >= killed]
recovered = f"{max(after) / 1000:.1f} s after the kill" if after else "never refused after the kill"
print(f"redis-failover: {count('http_reqs')} requests, "
      f"{count('requests_refused_with_retry_after')} refused with 503 + Retry-After, "
      f"{count('requests_failed')} failed, {count('stale_reads')} stale reads, "
      f"{count('locks_lost')} locks lost; the last refusal {recovered}")
PY
# Each Sentinel logs +switch-master for every new master it learns of: more than one
# means they failed over again from the master they had just chosen.
failovers="$(for log in "$WORK"/sentinel-*.log; do grep -c '+switch-master' "$log" || true; done |
  awk '$1 > n {n = $1} END {print n + 0}')"
echo "redis-failover: the Sentinels failed over $failovers time(s)"
if [ "$status" -ne 0 ]; then
  echo "redis-failover: FAILED (exit $status)" >&2
  grep -E "failed at|stale at|lock lost at|level=error" "$WORK/k6.log" | head -20 >&2 || true
  tail -n 5 "$WORK"/gateway*.log "$WORK"/fileio-*.log "$WORK"/locks.log >&2 || true
fi
exit "$status"
