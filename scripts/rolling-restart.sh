#!/usr/bin/env bash
# Requests lost during a rolling restart of the gateway: kubedav in microservices mode
# with two gateways behind nginx (as behind an Ingress), loadtests/rolling-restart.js
# running through nginx, and each gateway in turn sent SIGTERM, waited for (it drains
# its in-flight requests) and started again on its port, waiting for /readyz. Prints
# the requests made, refused with 503 + Retry-After, and lost; fails if any was lost.
# Installs nginx and k6 when missing. Env: RATE, DURATION (default 40s) pass to k6.
set -euo pipefail
REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
bash "$REPO/scripts/need.sh" nginx:nginx
NGINX="$(command -v nginx || echo /usr/sbin/nginx)"
K6="$(bash "$REPO/scripts/need-k6.sh")"
BIN="${CARGO_TARGET_DIR:-$REPO/target}/dist/kubedav"
[ -x "$BIN" ] || cargo build --profile dist --locked -p kubedav --manifest-path "$REPO/Cargo.toml"
WORK="$(mktemp -d /tmp/kubedav-rollout.XXXXXX)"
PIDS=()
cleanup() {
  for pid in "${PIDS[@]}"; do kill "$pid" 2>/dev/null || true; done
  [ -f "$WORK/nginx.pid" ] && kill "$(cat "$WORK/nginx.pid")" 2>/dev/null || true
  wait 2>/dev/null || true
  rm -rf "$WORK"
}
trap cleanup EXIT
source "$REPO/scripts/bench-lib.sh"

mkdir -p "$WORK/root"
printf 'load-pw\n' | "$BIN" passwd "$WORK/users" load >/dev/null
any=(--admin-listen 127.0.0.1:0)
urls=()
for target in fileio locks markdown auth; do
  args=(--target="$target" --grpc-listen 127.0.0.1:0 "${any[@]}")
  [ "$target" = fileio ] && args+=(--root "$WORK/root")
  [ "$target" = auth ] && args+=(--users-file "$WORK/users")
  start_kubedav "$WORK/$target.log" "${args[@]}"
  urls+=("--$target-url" "http://$(announced "$target gRPC" "$WORK/$target.log")")
done

# The two gateways, each on fixed ports chosen now so a restart finds them again.
declare -A LISTEN ADMIN GPID
start_gateway() {
  local g="$1"
  # nginx in front is the proxy the gateways trust, as an Ingress controller would be.
  start_kubedav "$WORK/gateway$g.log" --target=gateway --listen "${LISTEN[$g]}" \
    --admin-listen "${ADMIN[$g]}" --trusted-proxies 127.0.0.1/32 "${urls[@]}"
  GPID[$g]=${PIDS[-1]}
}
for g in 1 2; do
  free_port port; LISTEN[$g]="127.0.0.1:$port"
  free_port port; ADMIN[$g]="127.0.0.1:$port"
  start_gateway "$g"
  wait_ready "${ADMIN[$g]}"
done

# nginx as the Ingress: a new connection per request to the gateways; a refused
# connection (a draining gateway has closed its port) goes to the other one. No passive
# marking of a gateway as down (max_fails=0): an Ingress follows the Endpoints, which
# list a restarted gateway again as soon as it is ready.
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
  upstream gateways { server ${LISTEN[1]} max_fails=0; server ${LISTEN[2]} max_fails=0; }
  server {
    listen $FRONT;
    location / {
      proxy_pass http://gateways;
      proxy_next_upstream error timeout;
      proxy_request_buffering off;
      proxy_set_header Host \$host;
    }
  }
}
CONF
"$NGINX" -c "$WORK/nginx.conf" -p "$WORK" -g 'daemon on;'

DURATION="${DURATION:-40s}"
echo "rolling-restart: k6 through nginx at http://$FRONT/ to gateways ${LISTEN[1]} and ${LISTEN[2]} for $DURATION"
KUBEDAV_URL="http://$FRONT" KUBEDAV_USER=load KUBEDAV_PASSWORD=load-pw DURATION="$DURATION" \
  "$K6" run --no-usage-report --quiet --summary-export "$WORK/summary.json" \
  "$REPO/loadtests/rolling-restart.js" > "$WORK/k6.log" 2>&1 &
K6PID=$!

seconds="${DURATION%s}"
sleep $((seconds / 4))
for g in 1 2; do
  started=$(date +%s.%N)
  kill -TERM "${GPID[$g]}"
  while kill -0 "${GPID[$g]}" 2>/dev/null; do sleep 0.05; done
  drained=$(date +%s.%N)
  start_gateway "$g"
  wait_ready "${ADMIN[$g]}"
  back=$(date +%s.%N)
  awk -v g="$g" -v s="$started" -v d="$drained" -v b="$back" \
    'BEGIN {printf "rolling-restart: gateway %d drained in %.2f s, ready again %.2f s later\n", g, d-s, b-d}'
  sleep $((seconds / 4))
done
status=0
wait "$K6PID" || status=$?
python3 - "$WORK/summary.json" <<'PY'
import json, sys
m = json.load(open(sys.argv[1]))["metrics"]
count = lambda name: int(m.get(name, {}).get("count", 0))
print(f"rolling-restart: {count('http_reqs')} requests, "
      f"{count('requests_refused_with_retry_after')} refused with 503 + Retry-After, "
      f"{count('requests_lost')} lost")
PY
if [ "$status" -ne 0 ]; then
  echo "rolling-restart: FAILED (k6 exit $status)" >&2
  grep -E "lost:|level=error" "$WORK/k6.log" | head -20 >&2 || true
  tail -n 5 "$WORK"/gateway*.log "$WORK/nginx-error.log" >&2 || true
fi
exit "$status"
