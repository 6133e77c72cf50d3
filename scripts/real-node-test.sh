#!/usr/bin/env bash
# make test-real-node: the chart on a real node (issue 31). The local control plane
# (scripts/k8s/cluster.sh up --real-node) with one node whose containers really run:
# containerd, CNI, kubelet, kube-proxy, CoreDNS (scripts/k8s/README.md).
#
#   1. the image (scripts/image-test.sh builds and checks it) and a Valkey-compatible
#      image (Debian's redis-server under the names the chart calls) go into the node;
#   2. microservices mode, with the bundled Redis, in a namespace that enforces Pod
#      Security "restricted": helm install --wait, every pod Running and Ready;
#   3. helm test (the smoke test through the gateway Service);
#   4. from a pod of its own, `kubedav smoke` against the gateway's full Service DNS name
#      (MKCOL, PUT, PROPFIND, GET, LOCK, UNLOCK, DELETE), with the chart's credentials;
#   5. a rolling helm upgrade (a changed pod annotation rolls every workload) under k6 load through
#      the gateway's ClusterIP: no request lost, apart from 503s that carry Retry-After;
#   6. helm uninstall --wait: no pod left;
#   and, after 4 in the first pass, the NetworkPolicies as kube-router enforces them: a pod
#   that is not the gateway reaches the gateway's HTTP port but not fileio's gRPC port;
#   then 2 to 4 and 6 in monolithic mode (ci/monolithic-values.yaml), and
#   2 to 6 again with fileio on a bucket (ci/s3-values.yaml, two fileio replicas)
#   of a versitygw running on the node, which the pods reach at their gateway address.
#
# Needs root (the node's network and mounts) and podman. Builds and caches what it needs
# (cluster.sh build --real-node: about 30 min on 2 cores from nothing).
set -euo pipefail
REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
CHART="$REPO/charts/kubedav"
CLUSTER="$REPO/scripts/k8s/cluster.sh"
CACHE="${KUBEDAV_K8S_CACHE:-$HOME/.cache/kubedav-k8s}"
IMAGE="${KUBEDAV_IMAGE:-localhost/kubedav:test}"
VALKEY=localhost/kubedav-valkey:test
BUILD_BASE=localhost/kubedav-build-base:bookworm-rust-$(rustc --version | cut -d' ' -f2)
WORK="$(mktemp -d /tmp/kubedav-real-node.XXXXXX)"
cleanup() {
  if [ -d "$WORK/cluster/pids" ]; then bash "$CLUSTER" down "$WORK/cluster" >/dev/null 2>&1 || true; fi
  rm -rf "$WORK"
}
trap cleanup EXIT
step() { echo "== real node: $*"; }
fail() {
  echo "real-node-test: FAILED: $*" >&2
  kubectl get pods -A -o wide >&2 2>/dev/null || true
  exit 1
}
[ "$(id -u)" = 0 ] || fail "needs root: the node sets up a bridge, iptables rules and mounts"

step "images"
bash "$REPO/scripts/need.sh" podman:podman
# The image of this checkout, built and checked by image-test (KUBEDAV_REUSE_IMAGE=1 takes
# the one podman has, to try the chart again quickly).
if [ "${KUBEDAV_REUSE_IMAGE:-}" != 1 ] || ! podman image exists "$IMAGE" || ! podman image exists "$BUILD_BASE"; then
  bash "$REPO/scripts/image-test.sh"
fi
if ! podman image exists "$VALKEY"; then
  # The chart runs valkey-server with arguments and probes with valkey-cli; Debian's
  # redis-server 7.0 takes the same ones. No registry is reachable for valkey's own image.
  printf '%s\n' "FROM $BUILD_BASE" \
    'RUN apt-get update -qq && apt-get install -y -qq --no-install-recommends redis-server redis-tools >/dev/null \' \
    ' && ln -s /usr/bin/redis-server /usr/local/bin/valkey-server && ln -s /usr/bin/redis-cli /usr/local/bin/valkey-cli \' \
    ' && rm -rf /var/lib/apt/lists/*' \
    'ENTRYPOINT ["valkey-server"]' > "$WORK/Containerfile"
  podman build --network host -q -t "$VALKEY" -f "$WORK/Containerfile" "$WORK" > /dev/null
fi

step "cluster with a real node"
bash "$CLUSTER" build --real-node 2>&1 | grep -v "cached$" || true
eval "$(KUBEDAV_NODE_IMAGES="$IMAGE $VALKEY" bash "$CLUSTER" up --real-node "$WORK/cluster" 2> "$WORK/cluster-up.log")" \
  || { cat "$WORK/cluster-up.log"; fail "cluster up"; }
grep "Ready at" "$WORK/cluster-up.log"
# No storage provisioner: hostPath volumes, writable by the pods' users (hostPath takes no
# fsGroup).
for i in 1 2 3 4 5 6; do
  mkdir -p "$WORK/pv-$i" && chmod 1777 "$WORK/pv-$i"
  kubectl apply -f - > /dev/null <<EOF
apiVersion: v1
kind: PersistentVolume
metadata: {name: real-node-$i}
spec:
  capacity: {storage: 100Gi}
  accessModes: [ReadWriteOnce]
  persistentVolumeReclaimPolicy: Delete
  hostPath: {path: $WORK/pv-$i}
EOF
done

images=(--set "image.repository=${IMAGE%:*}" --set "image.tag=${IMAGE##*:}"
  --set "redis.bundled.image.repository=${VALKEY%:*}" --set "redis.bundled.image.tag=${VALKEY##*:}")

namespace() {  # name: one that enforces Pod Security restricted
  kubectl create namespace "$1" > /dev/null
  kubectl label namespace "$1" pod-security.kubernetes.io/enforce=restricted pod-security.kubernetes.io/enforce-version=latest > /dev/null
}

# The last log lines of every pod in NAMESPACE that failed or is not ready, on stderr.
failed_logs() {  # namespace
  local pod
  for pod in $(kubectl -n "$1" get pods --no-headers 2>/dev/null | awk '{split($2, ready, "/")} $3 != "Running" || ready[1] != ready[2] {print $1}'); do
    echo "-- $pod:" >&2
    kubectl -n "$1" logs "$pod" --all-containers --tail 15 >&2 2>/dev/null || true
  done
}

# Runs a pod named NAME in NAMESPACE, as restricted Pod Security allows, with the
# containers its stdin lists, until it succeeds; prints its log, then deletes it.
pod_succeeds() {  # namespace name failure
  local ns=$1 name=$2 failure=$3
  { printf '%s\n' 'apiVersion: v1' 'kind: Pod' "metadata: {name: $name}" 'spec:' '  restartPolicy: Never' \
      '  securityContext: {runAsNonRoot: true, runAsUser: 65532, seccompProfile: {type: RuntimeDefault}}' '  containers:'
    cat; } | kubectl -n "$ns" apply -f - > /dev/null
  kubectl -n "$ns" wait --for=jsonpath='{.status.phase}'=Succeeded "pod/$name" --timeout 90s > /dev/null \
    || { kubectl -n "$ns" logs "$name" >&2 || true; fail "$failure"; }
  kubectl -n "$ns" logs "$name"
  kubectl -n "$ns" delete pod "$name" > /dev/null
}

install() {  # namespace what helm-args...
  local ns=$1 what=$2
  shift 2
  step "install ($what, Pod Security restricted)"
  helm install kd "$CHART" -n "$ns" "${images[@]}" "$@" --wait --timeout 4m > "$WORK/install.txt" 2>&1 \
    || { cat "$WORK/install.txt"; kubectl -n "$ns" get events >&2; failed_logs "$ns"; fail "helm install ($what)"; }
  kubectl -n "$ns" wait --for=condition=Ready pod --all --timeout 60s > /dev/null || fail "pods not Ready ($what)"
  echo "ok  $(kubectl -n "$ns" get pods --no-headers | wc -l) pods Running and Ready on $(kubectl get nodes --no-headers | awk '{print $1}')"
  kubectl -n "$ns" get pods --no-headers | awk '{print "    " $1}'

  step "helm test ($what)"
  helm test kd -n "$ns" > "$WORK/test.txt" 2>&1 || { cat "$WORK/test.txt"; fail "helm test ($what)"; }
  grep -q "Phase:.*Succeeded" "$WORK/test.txt" || { cat "$WORK/test.txt"; fail "helm test did not succeed ($what)"; }
  echo "ok  helm test"

  step "WebDAV from a pod through the Service's DNS name ($what)"
  users=$(kubectl -n "$ns" get secret -l app.kubernetes.io/managed-by=kubedav -o name | grep users | head -1)
  [ -n "$users" ] || fail "no users Secret"
  # The HTTP Service: the gateway's, or in monolithic mode the release's own.
  http_service=kd-kubedav-gateway
  kubectl -n "$ns" get service "$http_service" > /dev/null 2>&1 || http_service=kd-kubedav
  pod_succeeds "$ns" webdav-client "the WebDAV client pod did not succeed ($what)" <<EOF | grep -E "PROPFIND|every step passed"
  - name: client
    image: $IMAGE
    imagePullPolicy: Never
    args: [smoke, "http://$http_service.$ns.svc.cluster.local/"]
    securityContext: {allowPrivilegeEscalation: false, readOnlyRootFilesystem: true, capabilities: {drop: [ALL]}}
    env:
    - name: KUBEDAV_SMOKE_USER
      valueFrom: {secretKeyRef: {name: ${users#secret/}, key: username}}
    - name: KUBEDAV_SMOKE_PASSWORD
      valueFrom: {secretKeyRef: {name: ${users#secret/}, key: password}}
EOF
}

# The chart's NetworkPolicies, enforced by the node's kube-router: a pod that is not the
# gateway reaches the gateway's HTTP port and fileio's admin port (probes, metrics), but
# not fileio's gRPC port, which only the gateway may call. (helm test has shown the
# gateway's own calls get through.)
network_policies() {  # namespace
  local ns=$1 fileio gateway
  step "NetworkPolicies enforced"
  fileio=$(kubectl -n "$ns" get pod -l app.kubernetes.io/component=fileio -o jsonpath='{.items[0].status.podIP}')
  gateway=$(kubectl -n "$ns" get pod -l app.kubernetes.io/component=gateway -o jsonpath='{.items[0].status.podIP}')
  pod_succeeds "$ns" policy-probe "the NetworkPolicies are not enforced as the chart means them" <<EOF
  - name: probe
    image: $VALKEY
    imagePullPolicy: Never
    command: [bash, -c]
    args:
    - |
      reach() { timeout 3 bash -c "exec 3<>/dev/tcp/\$1/\$2" 2>/dev/null; }
      status=0
      if reach $gateway 8080; then echo "ok  the gateway's HTTP port is open to any pod"; else echo "FAIL the gateway's HTTP port is closed"; status=1; fi
      if reach $fileio 9180; then echo "ok  fileio's admin port is open to any pod"; else echo "FAIL fileio's admin port is closed"; status=1; fi
      if reach $fileio 9090; then echo "FAIL fileio's gRPC port is open to a pod that is not the gateway"; status=1; else echo "ok  fileio's gRPC port is closed to a pod that is not the gateway"; fi
      exit \$status
    securityContext: {allowPrivilegeEscalation: false, readOnlyRootFilesystem: true, capabilities: {drop: [ALL]}}
EOF
}

# k6 from the host through the gateway Service's ClusterIP (kube-proxy's rules apply to the
# node's own traffic too) while an upgrade with a changed pod annotation rolls every workload. A
# request is lost unless it got its normal answer or 503 with Retry-After.
rolling_upgrade() {  # namespace what helm-args...
  local ns=$1 what=$2
  shift 2
  step "a rolling helm upgrade under load ($what)"
  local k6 gateway_ip gateway_port user password status=0
  k6="$(bash "$REPO/scripts/need-k6.sh")"
  gateway_ip=$(kubectl -n "$ns" get service kd-kubedav-gateway -o jsonpath='{.spec.clusterIP}')
  gateway_port=$(kubectl -n "$ns" get service kd-kubedav-gateway -o jsonpath='{.spec.ports[0].port}')
  user=$(kubectl -n "$ns" get "$users" -o jsonpath='{.data.username}' | base64 -d)
  password=$(kubectl -n "$ns" get "$users" -o jsonpath='{.data.password}' | base64 -d)
  KUBEDAV_URL="http://$gateway_ip:$gateway_port" KUBEDAV_USER="$user" KUBEDAV_PASSWORD="$password" \
    RATE=100 DURATION=60s "$k6" run --no-usage-report --quiet --summary-export "$WORK/summary.json" \
    "$REPO/loadtests/rolling-restart.js" > "$WORK/k6.log" 2>&1 &
  local k6_pid=$!
  # The pods' logs, copied while the rollout replaces them (kubelet removes a deleted
  # pod's), to explain a lost request by its id.
  mkdir -p "$WORK/logs"
  (while :; do cp -r /var/log/pods/"${ns}"_* "$WORK/logs/" 2>/dev/null || true; sleep 1; done) &
  local copier=$!
  sleep 10
  helm upgrade kd "$CHART" -n "$ns" "${images[@]}" "$@" --set log.level=debug --set-string "podAnnotations.kubedav\\.test/rollout=$(date +%s%N)" --wait --timeout 4m > "$WORK/upgrade.txt" 2>&1 \
    || { cat "$WORK/upgrade.txt"; fail "helm upgrade ($what)"; }
  local object
  for object in $(kubectl -n "$ns" get deploy,sts -o name); do
    kubectl -n "$ns" rollout status "$object" --timeout 120s > /dev/null || fail "$object did not finish rolling ($what)"
  done
  wait "$k6_pid" || status=$?
  kill "$copier" 2>/dev/null || true
  python3 - "$WORK/summary.json" <<'PY'
import json, sys
m = json.load(open(sys.argv[1]))["metrics"]
count = lambda name: int(m.get(name, {}).get("count", 0))
print(f"ok  rolling upgrade: {count('http_reqs')} requests, {count('requests_refused_with_retry_after')} "
      f"refused with Retry-After, {count('requests_lost')} lost")
PY
  grep "lost:" "$WORK/k6.log" | head -20 || true
  if [ -n "${KUBEDAV_KEEP_LOGS:-}" ]; then
    cp -r "$WORK/logs" "$KUBEDAV_KEEP_LOGS.$ns.$(date +%s)" && rm -rf "$WORK/logs"
  fi
  if [ "$status" != 0 ]; then
    local id
    for id in $(grep -o "lost: .* request [^ ]*" "$WORK/k6.log" | awk '{print $NF}' | grep -v '^-$' | head -5); do
      echo "-- the pods' log lines for request $id:"
      grep -rh "$id" "$WORK/logs" | head -20 || true
    done
    local kept="/tmp/kubedav-real-node-logs.$(date +%s)"
    cp -r "$WORK/logs" "$kept" && echo "-- the pods' logs are kept in $kept"
    fail "requests were lost during the rolling upgrade ($what)"
  fi
}

uninstall() {  # namespace what
  step "uninstall ($2)"
  helm uninstall kd -n "$1" --wait --timeout 2m > /dev/null
  kubectl -n "$1" wait --for=delete pod --all --timeout 90s > /dev/null || fail "pods left after helm uninstall ($2)"
  echo "ok  uninstall: no pod left"
}

# KUBEDAV_REAL_NODE_PASSES picks passes (default: "volume monolithic s3");
# KUBEDAV_ROLLOUTS repeats each rolling upgrade (default 1); KUBEDAV_KEEP_LOGS=PREFIX keeps
# the pods' logs of each rollout in PREFIX.<namespace>.<time>.
PASSES=" ${KUBEDAV_REAL_NODE_PASSES:-volume monolithic s3} "
ROLLOUTS=${KUBEDAV_ROLLOUTS:-1}
rolling_upgrades() {  # namespace what helm-args...
  local round
  for round in $(seq 1 "$ROLLOUTS"); do rolling_upgrade "$@"; done
}

if [[ $PASSES == *" volume "* ]]; then
  namespace kubedav-real
  install kubedav-real "microservices, volume, bundled Redis"
  network_policies kubedav-real
  rolling_upgrades kubedav-real "microservices, volume"
  uninstall kubedav-real "microservices, volume"
fi

if [[ $PASSES == *" monolithic "* ]]; then
  # The other run mode: everything in one pod.
  namespace kubedav-real-mono
  install kubedav-real-mono "monolithic" -f "$CHART/ci/monolithic-values.yaml"
  uninstall kubedav-real-mono "monolithic"
fi

if [[ $PASSES != *" s3 "* ]]; then
  echo "real node: every check passed"
  exit 0
fi

# fileio on a bucket: versitygw on the node, reached by the pods at their gateway address,
# and two fileio replicas registered in Redis.
VERSITYGW="$(bash "$REPO/scripts/need-versitygw.sh")"
S3_PORT=$(python3 -c 'import socket; s = socket.socket(); s.bind(("10.244.0.1", 0)); print(s.getsockname()[1])')
mkdir -p "$WORK/s3/files"  # the bucket: a directory of versitygw's posix backend
"$VERSITYGW" --access real-node-key --secret real-node-secret --port "10.244.0.1:$S3_PORT" posix "$WORK/s3" > "$WORK/s3.log" 2>&1 &
S3_PID=$!
trap 'kill "$S3_PID" 2>/dev/null || true; cleanup' EXIT
for _ in $(seq 1 100); do (exec 3<>"/dev/tcp/10.244.0.1/$S3_PORT") 2>/dev/null && break; sleep 0.1; done
namespace kubedav-real-s3
kubectl -n kubedav-real-s3 create secret generic kubedav-s3 --from-literal=AWS_ACCESS_KEY_ID=real-node-key \
  --from-literal=AWS_SECRET_ACCESS_KEY=real-node-secret > /dev/null
s3=(-f "$CHART/ci/s3-values.yaml" --set "storage.s3.endpoint=http://10.244.0.1:$S3_PORT"
  --set fileio.autoscaling.enabled=false --set fileio.replicas=2)
install kubedav-real-s3 "microservices, s3, 2 fileio replicas" "${s3[@]}"
[ "$(kubectl -n kubedav-real-s3 get pods --no-headers | grep -c fileio)" = 2 ] || fail "not 2 fileio pods"
# A file PUT through the gateway lands in the bucket.
gateway=$(kubectl -n kubedav-real-s3 get service kd-kubedav-gateway -o jsonpath='{.spec.clusterIP}:{.spec.ports[0].port}')
credentials="$(kubectl -n kubedav-real-s3 get "$users" -o jsonpath='{.data.username}' | base64 -d):$(kubectl -n kubedav-real-s3 get "$users" -o jsonpath='{.data.password}' | base64 -d)"
echo "stored on the node's versitygw" | curl -fsS -u "$credentials" -T - "http://$gateway/real-node.txt" > /dev/null \
  || fail "PUT through the gateway"
grep -rl "stored on the node's versitygw" "$WORK/s3/files" > /dev/null || fail "the PUT file is not in the bucket"
echo "ok  a PUT through the gateway's ClusterIP is stored in the bucket"
rolling_upgrades kubedav-real-s3 "microservices, s3" "${s3[@]}"
uninstall kubedav-real-s3 "microservices, s3"
echo "real node: every check passed"
