#!/usr/bin/env bash
# Runs the cargo-fuzz targets of services/fuzz, each for FUZZ_SECONDS (default 900) on
# its committed corpus, and fails on the first crash, naming the input that caused it.
#   FUZZ_SECONDS=30 bash scripts/fuzz.sh          # what CI runs
#   FUZZ_TARGETS="range accept" bash scripts/fuzz.sh
#   FUZZ_MINIMIZE=1 bash scripts/fuzz.sh          # then shrink each corpus (cargo fuzz cmin)
# Installs the nightly toolchain and cargo-fuzz when they are missing.
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="$HOME/.cargo/bin:$PATH"

SECONDS_EACH=${FUZZ_SECONDS:-900}
TARGETS=${FUZZ_TARGETS:-"if_header xml_request path_decode range accept convert credentials"}
CARGO_FUZZ_VERSION=0.13.2
FUZZ_DIR=services/fuzz

if ! rustup toolchain list | grep -q '^nightly'; then
  echo "fuzz: installing the nightly toolchain (cargo-fuzz needs it)"
  rustup toolchain install nightly --profile minimal
fi
if ! cargo fuzz --version >/dev/null 2>&1; then
  echo "fuzz: installing cargo-fuzz $CARGO_FUZZ_VERSION"
  cargo install cargo-fuzz --locked --version "$CARGO_FUZZ_VERSION"
fi

cargo +nightly fuzz build -O --fuzz-dir "$FUZZ_DIR"

printf '%-12s %8s %12s %10s %8s %8s\n' target seconds executions "exec/s" cover corpus
for target in $TARGETS; do
  corpus="$FUZZ_DIR/corpus/$target"
  mkdir -p "$corpus"
  log=$(mktemp)
  if ! cargo +nightly fuzz run -O --fuzz-dir "$FUZZ_DIR" "$target" "$corpus" -- \
      -max_total_time="$SECONDS_EACH" -timeout=10 -rss_limit_mb=4096 -print_final_stats=1 >"$log" 2>&1; then
    grep -E 'panicked|ERROR|SUMMARY|Test unit written' -A3 "$log" | head -40 >&2
    echo "fuzz: $target crashed; reproduce with: cargo +nightly fuzz run -O --fuzz-dir $FUZZ_DIR $target <the artifact above>" >&2
    rm -f "$log"
    exit 1
  fi
  runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log")
  speed=$(sed -n 's/^stat::average_exec_per_sec: *//p' "$log")
  cover=$(grep -o 'cov: [0-9]*' "$log" | tail -1 | cut -d' ' -f2)
  printf '%-12s %8s %12s %10s %8s %8s\n' "$target" "$SECONDS_EACH" "$runs" "$speed" "$cover" "$(ls "$corpus" | wc -l)"
  rm -f "$log"
  if [ "${FUZZ_MINIMIZE:-0}" = 1 ]; then
    cargo +nightly fuzz cmin -O --fuzz-dir "$FUZZ_DIR" "$target" "$corpus" >/dev/null 2>&1
    echo "             minimised to $(ls "$corpus" | wc -l) inputs"
  fi
done
