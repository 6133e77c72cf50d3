#!/usr/bin/env bash
# make image-test: builds the container image from the Dockerfile with podman and runs it
# as a cluster would.
#
# The image takes the binary `make build` made (the Dockerfile's stage `prebuilt`; see
# below), or with KUBEDAV_IMAGE_FROM_SOURCE=1 compiles it in the Dockerfile's build stage.
# No registry is reachable here, so the base images are made locally first (once, then
# kept in podman's store) and passed as the Dockerfile's build arguments:
#   localhost/kubedav-build-base    Debian bookworm (debootstrap minbase) with gcc, make
#                                   and this machine's Rust toolchain (only to compile
#                                   in the image)
#   localhost/kubedav-runtime-base  what distroless cc-debian12:nonroot holds: glibc,
#                                   libgcc, CA certificates, tzdata, the user 65532
#
# Then, with the image:
#   1. all-in-one, as UID 65532 with a read-only root and a tmpfs /data: /readyz, a PUT,
#      a GET and a PROPFIND, and SIGTERM drains (an upload in flight completes, /readyz
#      answers 503 meanwhile, the container exits 0);
#   2. microservices: one container per target, wired as the chart wires them (the
#      service URLs, the shared gRPC token, the users file mounted into auth), and
#      `kubedav smoke` from the image against the gateway.
# It prints the image's size. Env: KUBEDAV_IMAGE (default localhost/kubedav:test),
# KUBEDAV_IMAGE_CACHE (the image build's target directory, default ~/.cache/kubedav-image).
set -euo pipefail
REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
IMAGE="${KUBEDAV_IMAGE:-localhost/kubedav:test}"
CACHE="${KUBEDAV_IMAGE_CACHE:-$HOME/.cache/kubedav-image}"
BUILD_BASE=localhost/kubedav-build-base:bookworm-rust-$(rustc --version | cut -d' ' -f2)
RUNTIME_BASE=localhost/kubedav-runtime-base:bookworm
bash "$REPO/scripts/need.sh" podman:podman runc:runc debootstrap:debootstrap curl:curl objdump:binutils

REGISTRY="${CARGO_HOME:-$HOME/.cargo}/registry"
mkdir -p "$CACHE/target" "$REGISTRY"
# runc, cgroupfs (no systemd here), and no default ulimits: raising them needs
# CAP_SYS_RESOURCE, which root on this machine does not have.
cat > "$CACHE/containers.conf" <<'EOF'
[containers]
default_ulimits = []
[engine]
runtime = "runc"
cgroup_manager = "cgroupfs"
EOF
export CONTAINERS_CONF="$CACHE/containers.conf"

WORK="$(mktemp -d /tmp/kubedav-image-test.XXXXXX)"
CONTAINERS=()
cleanup() {
  for name in "${CONTAINERS[@]}"; do podman rm -f -t 0 "$name" >/dev/null 2>&1 || true; done
  rm -rf "$WORK"
}
trap cleanup EXIT
step() { printf '\n== %s\n' "$*"; }
fail() { echo "image-test: FAILED: $*" >&2; for c in "${CONTAINERS[@]}"; do echo "--- logs of $c" >&2; podman logs --tail 20 "$c" >&2 || true; done; exit 1; }

# The Debian mirror apt uses on this machine.
mirror() {
  local uri
  uri=$(grep -hoP '^(URIs:\s*|deb\s+(\[[^]]*\]\s+)?)\Khttps?://\S+' /etc/apt/sources.list.d/*.sources /etc/apt/sources.list 2>/dev/null \
    | grep -v security | head -1 || true)
  echo "${uri:-http://deb.debian.org/debian}"
}

make_build_base() {
  podman image exists "$BUILD_BASE" && return 0
  step "making $BUILD_BASE (debootstrap, once)"
  local rootfs="$WORK/build-rootfs" sysroot
  debootstrap --variant=minbase --include=ca-certificates,gcc,libc6-dev,make bookworm "$rootfs" "$(mirror)" >"$WORK/debootstrap.log" 2>&1 \
    || { tail -20 "$WORK/debootstrap.log" >&2; fail "debootstrap of the build base"; }
  # What this machine trusts (its bundle may hold a proxy's CA that crates.io is reached
  # through), and the toolchain it builds with, without its documentation.
  cp /etc/ssl/certs/ca-certificates.crt "$rootfs/etc/ssl/certs/ca-certificates.crt"
  sysroot="$(rustc --print sysroot)"
  mkdir -p "$rootfs/usr/local/rust"
  tar -C "$sysroot" --exclude=./share/doc -c . | tar -C "$rootfs/usr/local/rust" -x
  tar -C "$rootfs" -c . | podman import \
    --change 'ENV PATH=/usr/local/rust/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
    --change 'ENV CARGO_HOME=/usr/local/cargo' - "$BUILD_BASE" >/dev/null
  rm -rf "$rootfs"
}

make_runtime_base() {
  podman image exists "$RUNTIME_BASE" && return 0
  step "making $RUNTIME_BASE (Debian packages, once)"
  local rootfs="$WORK/runtime-rootfs" deb
  mkdir -p "$rootfs" "$WORK/debs"
  local packages=(libc6 libgcc-s1 tzdata netbase)
  (cd "$WORK/debs" && apt-get download -qq "${packages[@]}" >/dev/null 2>&1) \
    || { apt-get update -qq && (cd "$WORK/debs" && apt-get download -qq "${packages[@]}" >/dev/null); } \
    || fail "apt-get download ${packages[*]}"
  for deb in "$WORK"/debs/*.deb; do dpkg-deb -x "$deb" "$rootfs"; done
  rm -rf "$rootfs/usr/share/doc" "$rootfs/usr/share/man" "$rootfs/usr/share/lintian" "$rootfs/usr/share/locale"
  mkdir -p "$rootfs/etc/ssl/certs" "$rootfs/home/nonroot" "$rootfs/tmp" "$rootfs/root"
  cp /etc/ssl/certs/ca-certificates.crt "$rootfs/etc/ssl/certs/"
  printf 'root:x:0:0:root:/root:/sbin/nologin\nnobody:x:65534:65534:nobody:/nonexistent:/sbin/nologin\nnonroot:x:65532:65532:nonroot:/home/nonroot:/sbin/nologin\n' > "$rootfs/etc/passwd"
  printf 'root:x:0:\nnobody:x:65534:\nnonroot:x:65532:\n' > "$rootfs/etc/group"
  chmod 1777 "$rootfs/tmp"
  chown 65532:65532 "$rootfs/home/nonroot"
  tar -C "$rootfs" -c . | podman import --change 'USER 65532:65532' --change 'WORKDIR /home/nonroot' - "$RUNTIME_BASE" >/dev/null
  rm -rf "$rootfs"
}

make_runtime_base

# The binary `make build` made on this host goes into the image as it is (the Dockerfile's
# stage `prebuilt`) when it runs on the runtime base's glibc (bookworm's 2.36), with its
# line tables stripped as the Dockerfile's build strips them: compiling it again in the
# build stage would take `make test` another 13 minutes on 2 cores. KUBEDAV_IMAGE_FROM_SOURCE=1,
# or a binary needing a newer glibc, builds the Dockerfile's default target instead.
HOST_BINARY="$REPO/target/dist/kubedav"
prebuilt_fits() {
  [ "${KUBEDAV_IMAGE_FROM_SOURCE:-0}" != 1 ] && [ -x "$HOST_BINARY" ] || return 1
  local needed
  needed=$(objdump -T "$HOST_BINARY" | grep -o 'GLIBC_[0-9.]*' | sed 's/GLIBC_//' | sort -V | tail -1)
  [ "$(printf '%s\n2.36\n' "$needed" | sort -V | tail -1)" = 2.36 ]
}
start=$SECONDS
if prebuilt_fits; then
  step "podman build $IMAGE (stage prebuilt: $HOST_BINARY, $("$HOST_BINARY" --version))"
  mkdir -p "$WORK/context/target/dist"
  objcopy --strip-debug "$HOST_BINARY" "$WORK/context/target/dist/kubedav"
  podman build --network host -t "$IMAGE" --target prebuilt \
    --build-arg RUNTIME_IMAGE="$RUNTIME_BASE" -f "$REPO/Dockerfile" \
    "$WORK/context" >"$WORK/build.log" 2>&1 || { tail -30 "$WORK/build.log" >&2; fail "podman build"; }
else
  make_build_base
  step "podman build $IMAGE (compiling kubedav in the build stage)"
  # This machine's cargo registry (the crates are downloaded once) and a target directory
  # of the image's own, kept between runs, are volumes, so a rebuild compiles only what
  # changed.
  podman build --network host -t "$IMAGE" \
    --build-arg BUILD_IMAGE="$BUILD_BASE" --build-arg RUNTIME_IMAGE="$RUNTIME_BASE" \
    --build-arg KUBEDAV_COMMIT="$(git -C "$REPO" rev-parse --short=12 HEAD 2>/dev/null || echo unknown)" \
    -v "$CACHE/target:/src/target" -v "$REGISTRY:/usr/local/cargo/registry" \
    "$REPO" >"$WORK/build.log" 2>&1 || { tail -30 "$WORK/build.log" >&2; fail "podman build"; }
fi
size=$(podman image inspect --format '{{.Size}}' "$IMAGE")
echo "ok  built in $((SECONDS - start)) s; image size $((size / 1024 / 1024)) MiB ($size bytes)"

# A port free now on the host network.
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
wait_ready() {  # admin address; 30 s at most
  for _ in $(seq 1 300); do
    [ "$(curl -s -o /dev/null -w '%{http_code}' "http://$1/readyz")" = 200 ] && return 0
    sleep 0.1
  done
  return 1
}
expect_status() {  # expected, then curl arguments
  local want="$1" got; shift
  got=$(curl -s -o "$WORK/body" -w '%{http_code}' "$@")
  [ "$got" = "$want" ] || fail "curl $* answered $got, not $want: $(head -c 300 "$WORK/body")"
}

# The users file, made by the image's own `kubedav passwd`.
printf 'image-pw\n' | podman run --rm -i --network none --user 0 -v "$WORK:/out" "$IMAGE" passwd /out/users imagetest >/dev/null \
  || fail "kubedav passwd in the image"
chmod 0644 "$WORK/users"
# As the chart runs it: not root, a read-only root filesystem, no capabilities, and only
# /data (and /tmp) writable.
RUN_AS=(--network host --user 65532:65532 --read-only --cap-drop all --security-opt no-new-privileges
  --tmpfs /tmp:size=64m,mode=1777)

step "1. all-in-one as UID 65532 with a read-only root"
http=$(free_port); admin=$(free_port)
CONTAINERS+=(kubedav-image-all)
podman run -d --name kubedav-image-all "${RUN_AS[@]}" \
  --tmpfs /data:size=256m,mode=0700,U -v "$WORK/users:/etc/kubedav/users:ro" \
  "$IMAGE" --target=all --root=/data --listen=127.0.0.1:$http --admin-listen=127.0.0.1:$admin \
  --users-file=/etc/kubedav/users --shutdown-delay-seconds=2 >/dev/null
wait_ready "127.0.0.1:$admin" || fail "/readyz never answered 200"
echo "ok  /readyz 200"
pid=$(podman inspect --format '{{.State.Pid}}' kubedav-image-all)
uid=$(awk '/^Uid:/ {print $2}' "/proc/$pid/status")
[ "$uid" = 65532 ] || fail "the server runs as UID $uid, not 65532"
echo "ok  runs as UID $uid"
base="http://127.0.0.1:$http"
auth=(-u imagetest:image-pw)
expect_status 401 "$base/"
expect_status 201 "${auth[@]}" -T "$REPO/README.md" "$base/readme.md"
expect_status 200 "${auth[@]}" "$base/readme.md"
cmp -s "$WORK/body" "$REPO/README.md" || fail "GET did not return what was PUT"
expect_status 207 "${auth[@]}" -X PROPFIND -H 'Depth: 1' "$base/"
grep -q 'readme.md' "$WORK/body" || fail "PROPFIND Depth 1 does not list readme.md"
echo "ok  PUT 201, GET 200 with the same bytes, PROPFIND 207 listing it"
commit="$(git -C "$REPO" rev-parse --short=12 HEAD 2>/dev/null || echo unknown)"
# grep, not grep -q, reads all of it: -q stops at the match, and curl, cut off with
# SIGPIPE, would fail the pipeline under pipefail.
curl -s "http://127.0.0.1:$admin/metrics" | grep "kubedav_build_info{.*commit=\"$commit\"" >/dev/null \
  || fail "/metrics does not report the commit $commit in kubedav_build_info"
echo "ok  kubedav_build_info names the commit $commit"

# SIGTERM while an upload streams: /readyz turns 503 at once, the upload completes.
head -c $((8 << 20)) /dev/urandom > "$WORK/upload"
curl -s -o /dev/null -w '%{http_code}' --limit-rate 2M "${auth[@]}" -T "$WORK/upload" "$base/upload.bin" > "$WORK/upload.status" &
upload=$!
# Under way once its temporary file exists in /data (the file is newer than the source).
for _ in $(seq 1 100); do
  [ -n "$(find "/proc/$pid/root/data" -type f -newer "$WORK/upload" 2>/dev/null | head -1)" ] && break
  sleep 0.05
done
[ -n "$(find "/proc/$pid/root/data" -type f -newer "$WORK/upload" 2>/dev/null | head -1)" ] || fail "the upload never started"
podman kill --signal TERM kubedav-image-all >/dev/null
ready=""
for _ in $(seq 1 50); do
  ready=$(curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:$admin/readyz" || true)
  [ "$ready" = 503 ] && break
  sleep 0.02
done
[ "$ready" = 503 ] || fail "/readyz answered $ready after SIGTERM, not 503 (draining)"
wait "$upload" || true
[ "$(cat "$WORK/upload.status")" = 201 ] || fail "the upload in flight at SIGTERM answered $(cat "$WORK/upload.status"), not 201"
code=$(podman wait kubedav-image-all)
[ "$code" = 0 ] || fail "the container exited $code after SIGTERM, not 0"
echo "ok  SIGTERM: /readyz 503 while draining, the upload in flight completed (201), exit 0"

step "2. microservices: one container per target, wired as the chart wires them"
token=$(head -c 24 /dev/urandom | base64)
COMMON=(-e KUBEDAV_GRPC_TOKEN="$token" -e RUST_LOG=info)
declare -A GRPC ADMIN
for target in fileio locks auth markdown; do
  GRPC[$target]=$(free_port); ADMIN[$target]=$(free_port)
  extra=()
  [ "$target" = fileio ] && extra=(--tmpfs /data:size=256m,mode=0700,U)
  [ "$target" = auth ] && extra=(-v "$WORK/users:/etc/kubedav/users/users:ro" -e KUBEDAV_USERS_FILE=/etc/kubedav/users/users)
  args=(--target=$target --grpc-listen=127.0.0.1:${GRPC[$target]} --admin-listen=127.0.0.1:${ADMIN[$target]})
  [ "$target" = fileio ] && args+=(--root=/data)
  CONTAINERS+=(kubedav-image-$target)
  podman run -d --name kubedav-image-$target "${RUN_AS[@]}" "${COMMON[@]}" "${extra[@]}" "$IMAGE" "${args[@]}" >/dev/null
done
http=$(free_port); admin=$(free_port)
CONTAINERS+=(kubedav-image-gateway)
podman run -d --name kubedav-image-gateway "${RUN_AS[@]}" "${COMMON[@]}" \
  -e KUBEDAV_FILEIO_URL=http://127.0.0.1:${GRPC[fileio]} -e KUBEDAV_LOCKS_URL=http://127.0.0.1:${GRPC[locks]} \
  -e KUBEDAV_AUTH_URL=http://127.0.0.1:${GRPC[auth]} -e KUBEDAV_MARKDOWN_URL=http://127.0.0.1:${GRPC[markdown]} \
  "$IMAGE" --target=gateway --listen=127.0.0.1:$http --admin-listen=127.0.0.1:$admin >/dev/null
for target in fileio locks auth markdown; do
  wait_ready "127.0.0.1:${ADMIN[$target]}" || fail "$target's /readyz never answered 200"
done
wait_ready "127.0.0.1:$admin" || fail "the gateway's /readyz never answered 200"
echo "ok  five containers ready"
podman run --rm --network host --user 65532:65532 --read-only "$IMAGE" smoke \
  --user imagetest --password image-pw "http://127.0.0.1:$http/" > "$WORK/smoke.log" 2>&1 \
  || { cat "$WORK/smoke.log" >&2; fail "kubedav smoke against the gateway"; }
tail -3 "$WORK/smoke.log"
expect_status 200 -H 'Accept: text/markdown' -u imagetest:image-pw "http://127.0.0.1:$http/"
echo "ok  kubedav smoke passed through the gateway container"
echo
echo "image-test: passed ($IMAGE, $((size / 1024 / 1024)) MiB)"
