#!/usr/bin/env bash
# Markdown figures beyond the converter bench (make bench runs both):
#   peak RSS of `kubedav convert` on a ~1 MB page, and end to end (all-in-one, wrk -t1
#   -c8): requests/s of a Markdown GET served from the cache and of one converted every
#   time (--markdown-cache-bytes 0).
# Env (defaults): DURATION=10.
set -euo pipefail
REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BIN="${CARGO_TARGET_DIR:-$REPO/target}/dist/kubedav"
DURATION="${DURATION:-10}"
WORK="$(mktemp -d /tmp/kubedav-bench-md.XXXXXX)"
PIDS=()
cleanup() { for pid in "${PIDS[@]}"; do kill "$pid" 2>/dev/null || true; done; wait 2>/dev/null || true; rm -rf "$WORK"; }
trap cleanup EXIT
mkdir -p "$WORK/root"
python3 - "$WORK/root" <<'PY'
import sys
def page(n):
    s = ['<!DOCTYPE html><html><body><main>']
    for i in range(n):
        s.append(f'<h2>Section {i}</h2><p>Some <em>emphasis</em>, <strong>strong</strong> and <code>code</code> with a <a href="/docs/{i}">link</a>.</p><ul><li>first</li><li>second <b>item</b></li></ul><pre><code class="language-rust">fn f{i}() -> u32 {{ {i} }}</code></pre><table><tr><th>k</th><th>v</th></tr><tr><td>a</td><td>{i}</td></tr></table>')
    s.append('</main></body></html>')
    return ''.join(s)
open(sys.argv[1] + '/large.html', 'w').write(page(3050))
open(sys.argv[1] + '/medium.html', 'w').write(page(31))
PY
/usr/bin/time -f '%M' -o "$WORK/rss" "$BIN" convert "$WORK/root/large.html" > /dev/null 2> /dev/null
peak=$(tail -1 "$WORK/rss")
echo "peak RSS of kubedav convert on a $(stat -c %s "$WORK/root/large.html")-byte page: $((peak / 1024)) MiB"

run() {  # cache bytes -> requests/s of Accept: text/markdown GETs of medium.html
  "$BIN" --target=all --root "$WORK/root" --listen 127.0.0.1:0 --admin-listen 127.0.0.1:0 --markdown-cache-bytes "$1" \
    > /dev/null 2> "$WORK/log.$1" < /dev/null &
  PIDS+=($!)
  local addr=""
  for _ in $(seq 1 100); do addr=$(grep -oP "gateway HTTP listening on \K\S+" "$WORK/log.$1" || true); [ -n "$addr" ] && break; sleep 0.1; done
  curl -s -o /dev/null -H 'Accept: text/markdown' "http://$addr/medium.html"
  timeout -k 5 $((DURATION + 30)) wrk -t1 -c8 -d"${DURATION}s" --latency -H 'Accept: text/markdown' "http://$addr/medium.html" \
    | awk '/Requests\/sec/ {rps=$2} /^ +99%/ {p99=$2} END {printf "%s req/s, p99 %s\n", rps, p99}'
  kill "${PIDS[-1]}"; wait "${PIDS[-1]}" 2>/dev/null || true
}
echo "Markdown GET of a ~10 KB page, cached:   $(run 67108864)"
echo "Markdown GET of a ~10 KB page, uncached: $(run 0)"
