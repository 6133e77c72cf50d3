#!/usr/bin/env bash
# Runs the litmus WebDAV suites against kubedav in both run modes (all-in-one, and
# gateway + fileio + locks over gRPC), all-in-one also under an access policy as a user
# in their home (with a quota on it), then once more in microservices mode with the
# locks in a real redis-server, then both modes again with fileio on S3-compatible
# object storage (a real versitygw, built by scripts/need-versitygw.sh), and last
# through nginx alternating between two gateways over two fileio replicas on S3,
# registered in Redis, with the locks there too. Prints litmus's summary lines and fails
# on any failed test. Installs litmus, redis-server and nginx (Debian packages) when they
# are missing.
#
# Env: LITMUS_SUITES (default: basic copymove props locks http), KUBEDAV_BIN,
# KUBEDAV_VERSITYGW (the versitygw binary; built when unset).
set -euo pipefail
REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BIN="${KUBEDAV_BIN:-${CARGO_TARGET_DIR:-$REPO/target}/dist/kubedav}"
SUITES="${LITMUS_SUITES:-basic copymove props locks http}"
[ -x "$BIN" ] || { echo "litmus.sh: $BIN is missing; build with: make build" >&2; exit 1; }
bash "$REPO/scripts/need.sh" litmus:litmus redis-server:redis-server nginx:nginx
NGINX="$(command -v nginx || echo /usr/sbin/nginx)"

WORK="$(mktemp -d /tmp/kubedav-litmus.XXXXXX)"
PIDS=()
cleanup() {
  [ -f "$WORK/nginx.pid" ] && kill "$(cat "$WORK/nginx.pid")" 2>/dev/null || true
  for pid in "${PIDS[@]}"; do kill "$pid" 2>/dev/null || true; done
  wait 2>/dev/null || true
  rm -rf "$WORK"
}
trap cleanup EXIT

start() {  # log, args...
  local log="$1"; shift
  "$BIN" "$@" > /dev/null 2> "$log" < /dev/null &
  PIDS+=($!)
}
announced() {  # what, log
  for _ in $(seq 1 300); do
    if grep -q "$1 listening on" "$2"; then grep -oP "$1 listening on \K\S+" "$2"; return 0; fi
    sleep 0.1
  done
  echo "litmus.sh: kubedav did not start; log:" >&2; cat "$2" >&2; exit 1
}

failed=0
run_litmus() {  # mode, url, [user password]
  local mode="$1" url="$2" out="$WORK/litmus-$1.txt"
  shift 2
  echo "== litmus ($mode) against $url: $SUITES"
  # litmus writes debug.log and child.log into its working directory: keep them in $WORK.
  (cd "$WORK" && TESTS="$SUITES" timeout 600 litmus "$url" "$@") > "$out" 2>&1 || true
  grep -E "^<- summary|warning" "$out" | sed "s/^/[$mode] /"
  local suites_run
  suites_run=$(grep -c "^<- summary" "$out" || true)
  if [ "$suites_run" -ne "$(wc -w <<< "$SUITES")" ] || grep -E "^<- summary" "$out" | grep -vq " 0 failed"; then
    echo "[$mode] litmus FAILED; full output:"; sed "s/^/[$mode] /" "$out"
    failed=1
  fi
}

mkdir -p "$WORK/all" "$WORK/micro" "$WORK/redis" "$WORK/micro-redis"
start "$WORK/all.log" --target=all --root "$WORK/all" --listen 127.0.0.1:0 --admin-listen 127.0.0.1:0
run_litmus all-in-one "http://$(announced "gateway HTTP" "$WORK/all.log")/"

# Under an access policy, as a user in their home (made by their first request), with a
# quota on it: the whole protocol holds inside a home as on an open server.
mkdir -p "$WORK/policy"
echo litmus-password | "$BIN" passwd "$WORK/users" litmus > /dev/null
printf '%s\n' 'homes: /home/{user}' 'quota:' '  homes: 1GiB' 'rules:' '  - path: /public' '    grant: {"*": read}' \
  > "$WORK/policy.yaml"
start "$WORK/policy.log" --target=all --root "$WORK/policy" --users-file "$WORK/users" --policy "$WORK/policy.yaml" \
  --listen 127.0.0.1:0 --admin-listen 127.0.0.1:0
run_litmus all-in-one-policy "http://$(announced "gateway HTTP" "$WORK/policy.log")/home/litmus/" litmus litmus-password

microservices() {  # name, storage ("--root DIR" or "--storage s3://..."), locks args...
  local name="$1" storage="$2"; shift 2
  # shellcheck disable=SC2086 # the storage flag and its value
  start "$WORK/$name-fileio.log" --target=fileio $storage --grpc-listen 127.0.0.1:0 --admin-listen 127.0.0.1:0
  local grpc locks
  grpc=$(announced "fileio gRPC" "$WORK/$name-fileio.log")
  start "$WORK/$name-locks.log" --target=locks --grpc-listen 127.0.0.1:0 --admin-listen 127.0.0.1:0 "$@"
  locks=$(announced "locks gRPC" "$WORK/$name-locks.log")
  start "$WORK/$name-gateway.log" --target=gateway --fileio-url "http://$grpc" --locks-url "http://$locks" \
    --listen 127.0.0.1:0 --admin-listen 127.0.0.1:0
  run_litmus "$name" "http://$(announced "gateway HTTP" "$WORK/$name-gateway.log")/"
}
microservices microservices "--root $WORK/micro"

# The same with the locks in Redis: a real redis-server on a unix socket in $WORK.
redis-server --port 0 --unixsocket "$WORK/redis.sock" --dir "$WORK/redis" --save "" --daemonize no \
  > "$WORK/redis.log" 2>&1 < /dev/null &
PIDS+=($!)
for _ in $(seq 1 100); do
  [ -S "$WORK/redis.sock" ] && redis-cli -s "$WORK/redis.sock" ping 2>/dev/null | grep -q PONG && break
  sleep 0.1
done
microservices microservices-redis "--root $WORK/micro-redis" --lock-store "redis+unix://$WORK/redis.sock"

# fileio on object storage: versitygw's posix backend on a free loopback port, where a
# bucket is a directory of its data directory.
VERSITYGW="${KUBEDAV_VERSITYGW:-$(bash "$REPO/scripts/need-versitygw.sh")}"
S3_PORT=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
mkdir -p "$WORK/s3/litmus"
"$VERSITYGW" --access litmus-key --secret litmus-secret-key --port "127.0.0.1:$S3_PORT" posix "$WORK/s3" \
  > "$WORK/versitygw.log" 2>&1 < /dev/null &
PIDS+=($!)
for _ in $(seq 1 200); do
  (exec 3<>"/dev/tcp/127.0.0.1/$S3_PORT") 2>/dev/null && break
  sleep 0.1
done
export AWS_ENDPOINT_URL="http://127.0.0.1:$S3_PORT" AWS_REGION=us-east-1 \
  AWS_ACCESS_KEY_ID=litmus-key AWS_SECRET_ACCESS_KEY=litmus-secret-key
start "$WORK/s3-all.log" --target=all --storage s3://litmus/all --listen 127.0.0.1:0 --admin-listen 127.0.0.1:0
run_litmus s3-all-in-one "http://$(announced "gateway HTTP" "$WORK/s3-all.log")/"
microservices s3-microservices "--storage s3://litmus/micro"

# Two fileio replicas on one prefix, registered in Redis, two gateways following the
# registry, locks in Redis, and nginx sending each request to the next gateway (no
# kept connections): every step of a suite may cross gateways and replicas.
registry=(--registry "redis+unix://$WORK/redis.sock")
for r in a b; do
  start "$WORK/replica-$r.log" --target=fileio --storage s3://litmus/replicas --grpc-listen 127.0.0.1:0 \
    --admin-listen 127.0.0.1:0 "${registry[@]}"
done
replica=$(announced "fileio gRPC" "$WORK/replica-a.log")
announced "fileio gRPC" "$WORK/replica-b.log" > /dev/null
start "$WORK/replicas-locks.log" --target=locks --grpc-listen 127.0.0.1:0 --admin-listen 127.0.0.1:0 \
  --lock-store "redis+unix://$WORK/redis.sock" "${registry[@]}"
locks=$(announced "locks gRPC" "$WORK/replicas-locks.log")
upstreams=""
for g in 1 2; do
  start "$WORK/replicas-gateway-$g.log" --target=gateway --fileio-url "http://$replica" --locks-url "http://$locks" \
    "${registry[@]}" --listen 127.0.0.1:0 --admin-listen 127.0.0.1:0
  upstreams+="server $(announced "gateway HTTP" "$WORK/replicas-gateway-$g.log"); "
done
for pair in fileio:replica-a fileio:replica-b locks:replicas-locks; do  # registered, answering changes
  admin=$(announced "${pair%%:*} admin" "$WORK/${pair#*:}.log")
  for _ in $(seq 1 200); do
    [ "$(curl -s -o /dev/null -w '%{http_code}' "http://$admin/readyz")" = 200 ] && break
    sleep 0.05
  done
done
FRONT_PORT=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
cat > "$WORK/nginx.conf" <<CONF
worker_processes 1;
pid $WORK/nginx.pid;
error_log $WORK/nginx-error.log warn;
events { worker_connections 256; }
http {
  access_log off;
  client_body_temp_path $WORK/body;
  proxy_temp_path $WORK/proxy;
  client_max_body_size 0;
  upstream gateways { $upstreams }
  server {
    listen 127.0.0.1:$FRONT_PORT;
    location / {
      proxy_pass http://gateways;
      proxy_request_buffering off;
      proxy_set_header Host \$host:$FRONT_PORT;
    }
  }
}
CONF
"$NGINX" -c "$WORK/nginx.conf" -p "$WORK" -g 'daemon on;'
run_litmus s3-2-gateways-2-replicas "http://127.0.0.1:$FRONT_PORT/"

[ "$failed" = 0 ] && echo "litmus: every suite passed in every mode ($SUITES)"
exit "$failed"
