# kubedav: one image for every target (`--target=all|gateway|auth|locks|fileio|markdown`).
# Build: make image (docker build -t kubedav:dev .)

FROM docker.io/library/rust:1.95-slim-bookworm AS build
WORKDIR /src
# jemalloc (the allocator, services/kubedav/src/allocator.rs) is built with make.
RUN apt-get update && apt-get install -y --no-install-recommends make=4.3-4.1 && rm -rf /var/lib/apt/lists/*
COPY . .
RUN cargo build --release --locked -p kubedav \
    && install -D -m 0755 target/release/kubedav /out/kubedav

# glibc, CA certificates and a non-root user, nothing else: no shell, no package manager.
FROM gcr.io/distroless/cc-debian12:nonroot
COPY --from=build /out/kubedav /kubedav
USER 65532:65532
EXPOSE 8080 9090 9180
ENTRYPOINT ["/kubedav"]
# Serves only with a users file: mount one at /etc/kubedav/users (`kubedav passwd FILE
# USER` makes it). Without it the container refuses to start and says so; serving
# everyone read-write takes an explicit --allow-unauthenticated in place of this CMD.
CMD ["--target=all", "--root=/data", "--listen=0.0.0.0:8080", "--admin-listen=0.0.0.0:9180", "--users-file=/etc/kubedav/users"]
