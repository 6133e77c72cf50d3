# Shared by the bench scripts (source it): starting kubedav and finding its addresses,
# free ports and readiness, and running wrk with its figures parsed. Expects BIN, WORK, DURATION, THREADS, CONNS
# and an array PIDS that the caller's cleanup kills.

# Starts kubedav in the background with "$@", logging to $1.
start_kubedav() {
  local log="$1"; shift
  "$BIN" "$@" > /dev/null 2> "$log" < /dev/null &
  PIDS+=($!)
}

# Prints the address kubedav announced in log $2 for $1 ("gateway HTTP", "fileio gRPC").
announced() {
  local what="$1" log="$2"
  for _ in $(seq 1 300); do
    if grep -q "$what listening on" "$log"; then grep -oP "$what listening on \K\S+" "$log"; return 0; fi
    sleep 0.1
  done
  echo "kubedav did not start; log:" >&2; cat "$log" >&2; exit 1
}

# A port free now and not handed out before in this shell (the kernel may offer a
# closed probe's port again, and two listeners on one port would fail the run). Sets the
# variable named by $1: a command substitution would lose what was handed out.
HANDED_OUT=" "
free_port() {
  local candidate
  while :; do
    candidate=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
    case "$HANDED_OUT" in *" $candidate "*) continue ;; esac
    HANDED_OUT+="$candidate "
    printf -v "$1" '%s' "$candidate"; return
  done
}

# Waits until the admin address $1 answers /readyz with 200 (20 s at most).
wait_ready() {
  for _ in $(seq 1 400); do
    [ "$(curl -s -o /dev/null -w '%{http_code}' "http://$1/readyz")" = 200 ] && return 0
    sleep 0.05
  done
  echo "$1 never became ready" >&2; return 1
}

# Stops every process started so far.
stop_all() {
  for pid in "${PIDS[@]}"; do kill "$pid" 2>/dev/null || true; done
  wait "${PIDS[@]}" 2>/dev/null || true
  PIDS=()
}

# One bounded wrk run on url with extra wrk args: prints "requests/s p50_ms p99_ms non2xx".
wrk_stats() {
  local url="$1"; shift
  timeout -k 5 $((DURATION + 30)) wrk -t"$THREADS" -c"$CONNS" -d"${DURATION}s" --timeout 10s --latency "$@" "$url" \
    | awk 'function ms(v,  u) {u=v; sub(/[0-9.]+/, "", u); sub(/[a-z]+$/, "", v);
                             return (u=="us") ? v/1000 : (u=="s") ? v*1000 : v}
           /Requests\/sec/ {rps=$2}
           /^ +50%/ {p50=ms($2)}
           /^ +99%/ {p99=ms($2)}
           /Non-2xx/ {bad=$5}
           END {printf "%s %.2f %.2f %d\n", rps, p50, p99, bad}'
}

# wrk_stats without the median: "requests/s p99_ms non2xx".
wrk_run() {
  wrk_stats "$@" | awk '{print $1, $3, $4}'
}

# Just the requests/s of wrk_stats.
wrk_rps() {
  wrk_stats "$@" | cut -d' ' -f1
}

# The PIDs given and all their descendants (a peer's workers, for example).
tree_pids() {
  local pid
  for pid in "$@"; do
    echo "$pid"
    tree_pids $(pgrep -P "$pid" || true)
  done
}

# CPU time (user + system) the given processes and their descendants have used, in
# clock ticks (USER_HZ, 100 per second).
cpu_ticks() {
  local pid f t=0
  for pid in $(tree_pids "$@"); do
    for f in /proc/"$pid"/task/*/stat; do
      t=$((t + $(awk '{print $14 + $15}' "$f" 2>/dev/null || echo 0)))
    done
  done
  echo "$t"
}

# Memory of a set of processes and their descendants, in MiB: "idle_pss peak_rss".
# Pss (proportional set size) counts a page shared by N processes as 1/N in each, so the
# sum is the memory the whole set really holds; the peak is the largest VmHWM (peak
# resident set) of any one process.
memory_mib() {
  local pid pss=0 peak=0 kb
  for pid in $(tree_pids "$@"); do
    kb=$(awk '/^Pss:/ {print $2}' "/proc/$pid/smaps_rollup" 2>/dev/null || echo 0); pss=$((pss + ${kb:-0}))
    kb=$(awk '/^VmHWM:/ {print $2}' "/proc/$pid/status" 2>/dev/null || echo 0); [ "${kb:-0}" -gt "$peak" ] && peak=$kb
  done
  awk -v p="$pss" -v h="$peak" 'BEGIN {printf "%.1f %.1f\n", p / 1024, h / 1024}'
}
