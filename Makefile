# kubedav: `make run` serves ./data on http://127.0.0.1:8080/; `make test` runs every test.
CARGO ?= cargo
ROOT ?= ./data
LISTEN ?= 127.0.0.1:8080

.PHONY: run build test test-real-node lint fmt bench clean markdown-corpus image image-test chart-readme loadtest fuzz rolling-restart replica-kill redis-failover

# The `dist` profile (Cargo.toml): release, linked as one unit. The test binaries stay
# on `release`; everything run from target/dist is the build users run.
build:
	$(CARGO) build --profile dist --locked -p kubedav

run: build
	@mkdir -p $(ROOT)
	@echo "kubedav: serving $(ROOT) at http://$(LISTEN)/  (Ctrl-C stops it)"
	./target/dist/kubedav --target=all --root $(ROOT) --listen $(LISTEN)

# Unit tests, the HTTP suites against both run modes and both backends (a volume, and
# fileio on S3 on a real versitygw, built by scripts/need-versitygw.sh when missing; the
# many-replica suite on a real redis-server; a real OpenID provider (panva's
# oidc-provider from npm, scripts/need-oidc-provider.sh) for the identity suite; rclone, cadaver, davfs2, gio (GVfs),
# Python's webdav4 and tuspy (PyPI, in virtual environments), rclone v1.76 (go install,
# scripts/need-rclone.sh: Debian's cannot chunk for Nextcloud) and headless chromium
# (selenium) as real clients; all installed when missing), then the litmus WebDAV suites against both modes, the
# Redis lock store, object storage, and two gateways over two fileio replicas on S3, the k6 smoke and 30-second webdav-mixed load
# tests against both modes with their thresholds, a rolling restart of two gateways
# behind nginx under k6 with no request lost (scripts/rolling-restart.sh), a fileio replica
# on S3 killed with SIGKILL under k6 with no request lost (scripts/replica-kill.sh), the
# Redis master behind three Sentinels killed under k6 with no request failed, no stale
# read and no lock lost (scripts/redis-failover.sh), the
# container image built from the Dockerfile with podman and run as the chart runs it
# (scripts/image-test.sh), then the Helm chart checks (scripts/chart-test.sh:
# lint, schema, offline validation, checkov, wiring, and a live install on a local
# control plane). Release build: the suites move gigabytes. The scripts after them run
# the build users run (target/dist, `make build`), as `make run` and `make bench` do.
test: build
	bash scripts/need.sh curl:curl strace:strace redis-server:redis-server redis-sentinel:redis-sentinel prometheus:prometheus rclone:rclone cadaver:cadaver mount.davfs:davfs2 gio:libglib2.0-bin dbus-run-session:dbus /usr/libexec/gvfsd-dav:gvfs-backends nginx:nginx
	KUBEDAV_VERSITYGW="$$(bash scripts/need-versitygw.sh)" KUBEDAV_OIDC_PROVIDER="$$(bash scripts/need-oidc-provider.sh)" KUBEDAV_WEBDAV4_PYTHON="$$(bash scripts/need-webdav4.sh)" KUBEDAV_BROWSER_PYTHON="$$(bash scripts/need-browser.sh)" KUBEDAV_TUSPY_PYTHON="$$(bash scripts/need-tuspy.sh)" KUBEDAV_RCLONE="$$(bash scripts/need-rclone.sh)" $(CARGO) test --release --locked --workspace
	bash scripts/litmus.sh
	$(MAKE) --no-print-directory loadtest SCENARIO=smoke MODE=all
	$(MAKE) --no-print-directory loadtest SCENARIO=smoke MODE=microservices
	$(MAKE) --no-print-directory loadtest SCENARIO=webdav-mixed MODE=all DURATION=30s LATENCY_SCALE=4
	$(MAKE) --no-print-directory loadtest SCENARIO=webdav-mixed MODE=microservices DURATION=30s LATENCY_SCALE=4
	bash scripts/rolling-restart.sh
	bash scripts/replica-kill.sh
	bash scripts/redis-failover.sh
	bash scripts/image-test.sh
	bash scripts/chart-test.sh

# One k6 scenario of loadtests/ against one mode, thresholds enforced (k6 is built with
# `go install` when missing): make loadtest SCENARIO=auth-flood MODE=microservices.
# SCENARIO: smoke, webdav-mixed, lock-edit-unlock, markdown-agents, auth-flood, soak;
# MODE: all or microservices; DURATION (e.g. 30s, 2h for soak), RATE, VUS and
# LATENCY_SCALE (multiplies the latency bounds; `make test` uses 4 for CI machines) pass to k6.
SCENARIO ?= webdav-mixed
MODE ?= all
loadtest: build
	DURATION=$(DURATION) RATE=$(RATE) VUS=$(VUS) LATENCY_SCALE=$(LATENCY_SCALE) bash scripts/loadtest.sh $(SCENARIO) $(MODE)

# The cargo-fuzz targets of services/fuzz (If header, XML request bodies, path decoding,
# Range, Accept, credentials, HTML to Markdown), FUZZ_SECONDS each (900) on their committed corpora;
# installs nightly and cargo-fuzz when missing. FUZZ_TARGETS picks some, FUZZ_MINIMIZE=1
# shrinks the corpora afterwards. `make test` checks the corpora (services/fuzz-checks).
fuzz:
	FUZZ_SECONDS=$(FUZZ_SECONDS) FUZZ_TARGETS="$(FUZZ_TARGETS)" FUZZ_MINIMIZE=$(FUZZ_MINIMIZE) bash scripts/fuzz.sh

# Two gateways behind nginx restarted one after the other under k6: prints the requests
# made, refused with 503 + Retry-After, and lost (must be 0).
rolling-restart: build
	bash scripts/rolling-restart.sh

# Two fileio replicas on versitygw behind two gateways, one killed with SIGKILL under k6
# and started again: prints the requests made, refused with 503 + Retry-After, and lost
# (must be 0), and the calls each replica served.
replica-kill: build
	bash scripts/replica-kill.sh

# The Redis master behind three real Sentinels killed with SIGKILL under k6, in
# microservices mode with two gateways over two fileio replicas on S3: prints the
# requests made, refused with 503 + Retry-After, failed, the stale reads and lost locks
# (must be 0), and how long the failover took.
redis-failover: build
	bash scripts/redis-failover.sh

lint:
	$(CARGO) fmt --all -- --check
	bash scripts/check-file-sizes.sh
	$(CARGO) clippy --release --locked --workspace --all-targets -- -D warnings

fmt:
	$(CARGO) fmt --all

# kubedav (both modes) beside nginx and Apache in the same run, with the ratios, written
# into docs/benchmarks.md with the machine and the command, and the growth figures
# (scripts/bench-growth.sh); then the lock figures (memory and Redis stores beside Apache,
# and criterion for the lock check with 10 and 10,000 locks), criterion for the gateway's
# hot functions, then the auth figures
# (criterion for the crypt cost, wrk for auth on the request path and under a flood), the
# markdown figures, what a client can cost the HTTP edge at most (scripts/bench_edge.py),
# and object storage: kubedav on versitygw beside rclone serve webdav on the same bucket
# (scripts/bench_s3.py); then what the trash and versions cost, on a volume
# (scripts/bench_keep.py: CPU per request, kept against nothing kept) and on S3
# (scripts/bench_s3_keep.py: requests and wall time of a 10,000-object collection's
# DELETE and restore, against the bucket's own versioning).
bench: build
	$(CARGO) build --release --locked -p kubedav-gateway --example floor
	bash scripts/bench.sh
	bash scripts/bench-locks.sh
	$(CARGO) bench --locked -p kubedav-locks --bench check
	$(CARGO) bench --locked -p kubedav-gateway --bench hot
	$(CARGO) bench --locked -p kubedav-gateway --bench policy
	python3 scripts/bench_policy.py target/dist/kubedav --pin
	$(CARGO) bench --locked -p kubedav-auth --bench verify
	$(CARGO) bench --locked -p kubedav-policy --bench decide
	bash scripts/bench-auth.sh
	$(CARGO) bench --locked -p kubedav-markdown --bench convert
	bash scripts/bench-markdown.sh
	python3 scripts/bench_edge.py target/dist/kubedav
	KUBEDAV_VERSITYGW="$$(bash scripts/need-versitygw.sh)" python3 scripts/bench_s3.py
	python3 scripts/bench_keep.py target/dist/kubedav --pin
	python3 -c 'import boto3' 2>/dev/null || python3 -m pip install --quiet boto3
	KUBEDAV_VERSITYGW="$$(bash scripts/need-versitygw.sh)" python3 scripts/bench_s3_keep.py target/dist/kubedav

# The one container image every target runs, from the public base images (podman, or
# docker with CONTAINER=docker). Where no registry is reachable, make image-test builds
# local base images and runs the result (scripts/image-test.sh).
IMAGE ?= kubedav:dev
CONTAINER ?= podman
image:
	$(CONTAINER) build -t $(IMAGE) .

image-test: build
	bash scripts/image-test.sh

# The chart on a real node: containerd, kubelet, kube-proxy and CoreDNS on this machine
# (root; scripts/k8s/README.md): both run modes, both storage backends, rolling upgrades
# under load. Its own target: on a fresh machine it would take a CI run past 60 minutes.
# KUBEDAV_REAL_NODE_PASSES="volume monolithic s3" and KUBEDAV_ROLLOUTS=1 by default.
test-real-node:
	bash scripts/real-node-test.sh

# charts/kubedav/README.md from values.yaml's `# --` comments (helm-docs); make test fails
# when it is stale.
chart-readme:
	bash scripts/chart-readme.sh

# Converts every HTML page of the Rust documentation installed with the toolchain.
markdown-corpus:
	KUBEDAV_DOCS_SAMPLE_EVERY=1 $(CARGO) test --release --locked -p kubedav-markdown --test rust_docs -- --nocapture

clean:
	$(CARGO) clean
