#!/usr/bin/env bash
# Writes the latest `make bench` comparison into docs/benchmarks.md, between the markers
# below (added after the introduction the first time), following the publication policy:
# no figure without its environment and command.
#
#   scripts/bench-report.sh OUTPUT STEAL_PERCENT [DOC]
#
# OUTPUT is scripts/bench.sh's printed output; STEAL_PERCENT the CPU time the hypervisor
# took during the run (from /proc/stat), since on a shared VM it moves every figure.
set -euo pipefail
REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
OUTPUT="$1"; STEAL="$2"; DOC="${3:-$REPO/docs/benchmarks.md}"
BEGIN='<!-- make bench: latest run, written by scripts/bench-report.sh -->'
END='<!-- make bench: end of latest run -->'

section="$(mktemp)"
trap 'rm -f "$section"' EXIT
{
  echo "$BEGIN"
  echo "## Latest \`make bench\` comparison"
  echo
  echo "Written by \`make bench\` on $(date -u '+%Y-%m-%d %H:%M UTC') from commit"
  echo "\`$(git -C "$REPO" rev-parse --short HEAD 2>/dev/null || echo unknown)\`$(git -C "$REPO" diff --quiet HEAD -- services proto Cargo.toml Cargo.lock 2>/dev/null || echo ' (with uncommitted changes to the code)')."
  echo
  echo "- CPU: $(nproc) cores, $(awk -F': ' '/model name/ {print $2; exit}' /proc/cpuinfo); hypervisor steal during the run: ${STEAL} %"
  echo "- Memory: $(free -m | awk '/Mem:/ {printf "%.1f GiB", $2 / 1024}'); kernel $(uname -r); $(. /etc/os-release && echo "$PRETTY_NAME")"
  echo "- Filesystem of the served directories: $(df -T /tmp | awk 'NR == 2 {print $2}')"
  echo "- Peers: nginx $(/usr/sbin/nginx -v 2>&1 | sed 's#.*/##') with dav-ext, Apache $(/usr/sbin/apache2 -v | head -1 | sed 's#.*Apache/##; s# .*##') with mod_dav_fs, configured by \`../shared/peers/peerctl.sh\`"
  echo "- Load: $(wrk --version 2>&1 | head -1 | cut -d' ' -f1-2), same client, one server at a time on the same machine"
  echo "- Command: \`DURATION=${DURATION:-10} THREADS=${THREADS:-2} CONNS=${CONNS:-64} PUT_COUNT=${PUT_COUNT:-20} bash scripts/bench.sh\` (the first step of \`make bench\`)"
  echo
  echo "Raw output:"
  echo
  echo '```text'
  cat "$OUTPUT"
  echo '```'
  echo "$END"
} > "$section"

if grep -qF "$BEGIN" "$DOC"; then
  awk -v begin="$BEGIN" -v end="$END" -v file="$section" '
    $0 == begin { while ((getline line < file) > 0) print line; skip = 1; next }
    $0 == end { skip = 0; next }
    !skip' "$DOC" > "$DOC.new"
else
  # First time: after the introduction, before the first dated section.
  awk -v file="$section" '
    /^## / && !done { while ((getline line < file) > 0) print line; print ""; done = 1 }
    { print }' "$DOC" > "$DOC.new"
fi
mv "$DOC.new" "$DOC"
echo "wrote the run into ${DOC#"$REPO"/}"
