#!/usr/bin/env bash
# Requests lost when a fileio replica dies under load: kubedav in microservices mode on a
# bucket of a real versitygw, two fileio replicas registered in a real redis-server
# (--registry), locks and auth on that Redis, two gateways behind nginx, and
# loadtests/rolling-restart.js (the webdav-mixed workload) running through nginx. A
# quarter in, one replica is killed with SIGKILL; half-way, it is started again and
# rejoins. Prints the requests made, refused with 503 + Retry-After, and lost, and the
# calls each replica served; fails if any request was lost, or if the survivor served
# nothing while the other was dead. Installs nginx and k6 when missing, builds versitygw.
# Env: RATE, DURATION (default 40s) pass to k6.
set -euo pipefail
REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
bash "$REPO/scripts/need.sh" nginx:nginx redis-server:redis-server curl:curl
NGINX="$(command -v nginx || echo /usr/sbin/nginx)"
K6="$(bash "$REPO/scripts/need-k6.sh")"
VERSITYGW="${KUBEDAV_VERSITYGW:-$(bash "$REPO/scripts/need-versitygw.sh")}"
BIN="${CARGO_TARGET_DIR:-$REPO/target}/dist/kubedav"
[ -x "$BIN" ] || cargo build --profile dist --locked -p kubedav --manifest-path "$REPO/Cargo.toml"
WORK="$(mktemp -d /tmp/kubedav-replica-kill.XXXXXX)"
PIDS=()
cleanup() {
  for pid in "${PIDS[@]}"; do kill "$pid" 2>/dev/null || true; done
  [ -f "$WORK/nginx.pid" ] && kill "$(cat "$WORK/nginx.pid")" 2>/dev/null || true
  wait 2>/dev/null || true
  rm -rf "$WORK"
}
trap cleanup EXIT
source "$REPO/scripts/bench-lib.sh"

free_port port; REDIS="127.0.0.1:$port"
redis-server --port "$port" --bind 127.0.0.1 --save '' --appendonly no > "$WORK/redis.log" 2>&1 &
PIDS+=($!)
free_port port; S3="127.0.0.1:$port"
mkdir -p "$WORK/s3/files"  # the bucket: a directory of versitygw's posix backend
# --disableotmp: listings under concurrent overwrites must not show versitygw's temporary
# names (docs/architecture.md, "The S3 server the tests run on").
"$VERSITYGW" --access kill-key --secret kill-secret --port "$S3" posix --disableotmp "$WORK/s3" > "$WORK/s3.log" 2>&1 &
PIDS+=($!)
for _ in $(seq 1 200); do curl -s -o /dev/null "http://$S3/" && redis-cli -p "${REDIS#*:}" ping > /dev/null 2>&1 && break; sleep 0.05; done
export AWS_ENDPOINT_URL="http://$S3" AWS_REGION=us-east-1 AWS_ACCESS_KEY_ID=kill-key AWS_SECRET_ACCESS_KEY=kill-secret

printf 'load-pw\n' | "$BIN" passwd "$WORK/users" load >/dev/null
registry=(--registry "redis://$REDIS/0")
declare -A FILEIO_GRPC FILEIO_ADMIN FPID
start_fileio() {
  local r="$1"
  start_kubedav "$WORK/fileio-$r.log" --target=fileio --grpc-listen "${FILEIO_GRPC[$r]}" \
    --admin-listen "${FILEIO_ADMIN[$r]}" --storage s3://files/served "${registry[@]}"
  FPID[$r]=${PIDS[-1]}
}
for r in a b; do
  free_port port; FILEIO_GRPC[$r]="127.0.0.1:$port"
  free_port port; FILEIO_ADMIN[$r]="127.0.0.1:$port"
  start_fileio "$r"
done
urls=(--fileio-url "http://${FILEIO_GRPC[a]}" "${registry[@]}")
for target in locks auth; do
  args=(--target="$target" --grpc-listen 127.0.0.1:0 --admin-listen 127.0.0.1:0)
  [ "$target" = locks ] && args+=(--lock-store "redis://$REDIS/0" "${registry[@]}")
  [ "$target" = auth ] && args+=(--users-file "$WORK/users")
  start_kubedav "$WORK/$target.log" "${args[@]}"
  urls+=("--$target-url" "http://$(announced "$target gRPC" "$WORK/$target.log")")
done
urls+=(--markdown-url "")
for r in a b; do wait_ready "${FILEIO_ADMIN[$r]}"; done
GATEWAYS=()
for g in 1 2; do
  start_kubedav "$WORK/gateway$g.log" --target=gateway --listen 127.0.0.1:0 --admin-listen 127.0.0.1:0 \
    --trusted-proxies 127.0.0.1/32 "${urls[@]}"
  GATEWAYS+=("$(announced "gateway HTTP" "$WORK/gateway$g.log")")
done

free_port port; FRONT="127.0.0.1:$port"
cat > "$WORK/nginx.conf" <<CONF
worker_processes 1;
pid $WORK/nginx.pid;
error_log $WORK/nginx-error.log warn;
events { worker_connections 1024; }
http {
  access_log off;
  client_body_temp_path $WORK/body;
  proxy_temp_path $WORK/proxy;
  client_max_body_size 0;
  upstream gateways { server ${GATEWAYS[0]} max_fails=0; server ${GATEWAYS[1]} max_fails=0; }
  server {
    listen $FRONT;
    location / {
      proxy_pass http://gateways;
      proxy_request_buffering off;
      proxy_set_header Host \$host;
    }
  }
}
CONF
"$NGINX" -c "$WORK/nginx.conf" -p "$WORK" -g 'daemon on;'

# Calls a replica has served (fileio's gRPC server metrics).
served() {
  curl -s "http://${FILEIO_ADMIN[$1]}/metrics" \
    | awk '/^kubedav_grpc_server_handled_total\{/ && !/Watch/ {n += $NF} END {print n + 0}'
}

DURATION="${DURATION:-40s}"
seconds="${DURATION%s}"
echo "replica-kill: k6 through nginx at http://$FRONT/ to two gateways over fileio replicas ${FILEIO_GRPC[a]} and ${FILEIO_GRPC[b]} on versitygw, for $DURATION"
KUBEDAV_URL="http://$FRONT" KUBEDAV_USER=load KUBEDAV_PASSWORD=load-pw DURATION="$DURATION" \
  "$K6" run --no-usage-report --quiet --summary-export "$WORK/summary.json" \
  "$REPO/loadtests/rolling-restart.js" > "$WORK/k6.log" 2>&1 &
K6PID=$!

sleep $((seconds / 4))
# Reaped at once with the shell's report silenced: bash would print "Killed".
{ kill -KILL "${FPID[b]}"; wait "${FPID[b]}"; } 2>/dev/null || true
killed_at=$(served a)
echo "replica-kill: fileio b killed (SIGKILL)"
sleep $((seconds / 4))
survivor=$(( $(served a) - killed_at ))
echo "replica-kill: while b was dead, a served $survivor calls"
start_fileio b
wait_ready "${FILEIO_ADMIN[b]}"
echo "replica-kill: fileio b started again and registered"
status=0
wait "$K6PID" || status=$?
echo "replica-kill: after it rejoined, b served $(served b) calls"
python3 - "$WORK/summary.json" <<'PY'
import json, sys
m = json.load(open(sys.argv[1]))["metrics"]
count = lambda name: int(m.get(name, {}).get("count", 0))
print(f"replica-kill: {count('http_reqs')} requests, "
      f"{count('requests_refused_with_retry_after')} refused with 503 + Retry-After, "
      f"{count('requests_lost')} lost")
PY
if [ "$survivor" -le 0 ]; then
  echo "replica-kill: FAILED: the surviving replica served nothing while the other was dead" >&2
  status=1
fi
if [ "$(served b)" -le 0 ]; then
  echo "replica-kill: FAILED: the restarted replica served nothing" >&2
  status=1
fi
if [ "$status" -ne 0 ]; then
  echo "replica-kill: FAILED (exit $status)" >&2
  grep -E "lost:|level=error" "$WORK/k6.log" | head -20 >&2 || true
  tail -n 5 "$WORK"/gateway*.log "$WORK"/fileio-*.log >&2 || true
fi
exit "$status"
