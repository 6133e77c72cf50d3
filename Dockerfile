# kubedav: one image for every target (`--target=all|gateway|auth|locks|fileio|markdown`).
# Build: make image (podman or docker build -t kubedav:dev .)
#
# The base images are build arguments. The defaults are the public ones; where no
# registry is reachable, `make image-test` (scripts/image-test.sh) builds equivalents
# locally and passes them:
#   BUILD_IMAGE    a Debian bookworm with the Rust toolchain (cargo on PATH) and apt
#   RUNTIME_IMAGE  glibc, libgcc, CA certificates and the user 65532, nothing else
#
# The last stage (the default target) compiles kubedav here. The stage `prebuilt` takes a
# binary already built on a bookworm host from the build context (target/dist/kubedav);
# `make image-test` uses it, with a context of its own, so that `make test` does not
# compile the same binary twice (KUBEDAV_IMAGE_FROM_SOURCE=1 compiles it here instead).
ARG BUILD_IMAGE=docker.io/library/rust:1.95-slim-bookworm
ARG RUNTIME_IMAGE=gcr.io/distroless/cc-debian12:nonroot

FROM ${BUILD_IMAGE} AS build
WORKDIR /src
# jemalloc (the allocator, services/kubedav/src/allocator.rs) is built with make.
RUN apt-get update && apt-get install -y --no-install-recommends make=4.3-4.1 && rm -rf /var/lib/apt/lists/*
COPY . .
# The commit kubedav_build_info reports (the build context has no .git).
ARG KUBEDAV_COMMIT=""
# Function names stay in the binary for backtraces and profiles; the line tables
# (profile.release.debug, which `dist` inherits) do not: they would triple the image.
# `dist` is release linked as one unit (Cargo.toml).
ENV CARGO_PROFILE_DIST_STRIP=debuginfo
RUN cargo build --profile dist --locked -p kubedav \
    && install -D -m 0755 target/dist/kubedav /out/kubedav

# glibc, CA certificates and a non-root user, nothing else: no shell, no package manager.
FROM ${RUNTIME_IMAGE} AS runtime
USER 65532:65532
EXPOSE 8080 9090 9180
ENTRYPOINT ["/kubedav"]
# Serves only with a users file: mount one at /etc/kubedav/users (`kubedav passwd FILE
# USER` makes it). Without it the container refuses to start and says so; serving
# everyone read-write takes an explicit --allow-unauthenticated in place of this CMD.
CMD ["--target=all", "--root=/data", "--listen=0.0.0.0:8080", "--admin-listen=0.0.0.0:9180", "--users-file=/etc/kubedav/users"]

# A binary built outside, on a bookworm host (podman build --target prebuilt).
FROM runtime AS prebuilt
COPY target/dist/kubedav /kubedav

# The default: the binary compiled in the build stage.
FROM runtime AS image
COPY --from=build /out/kubedav /kubedav
