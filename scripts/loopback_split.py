#!/usr/bin/env python3
"""Whose work a large GET's CPU time is, once loopback's sharing of it is undone.

Over loopback, a TCP segment is delivered to the receiving socket by the sender's own
system call: the receiver's whole TCP receive path (and the wake-up of the receiver) runs
in the sender's context and counts to the sender's CPU time, and the same happens the
other way for the receiver's ACKs, whose processing can in turn send the sender's next
segments. On a network each side pays for its own part. This script measures a GET of
a large file in each server (kubedav all-in-one; microservices with the gateway on
connection threads, its default, and on its shared runtime; nginx) under `wrk`,
records every CPU's kernel and user stacks with `perf record -a -g`, and counts in each
stack how many loopback deliveries (`tcp_v4_rcv` frames) it is nested in: each one
hands the work to the other end. A sample in the server's context nested in an odd number of deliveries is the
client's work, one in the client's context nested in an odd number is the server's.

It prints, per server and request, the CPU time measured (server and wrk, from /proc)
and the same split by owner: "server's own" is the server's even-nested share of its
time plus wrk's odd-nested share of wrk's time. Deliveries between kubedav's own
processes (gRPC) are counted as if they went to the client; for a 100 MiB GET they are
a few calls among thousands of segments. Used by docs/benchmarks.md, "2026-12-07".

Needs perf, wrk and nginx with the dav-ext module (scripts/bench.sh installs them).
"""

import argparse
import collections
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from bench_cpu import Nginx, fixtures  # noqa: E402
from benchkit import Kubedav, cpu_seconds  # noqa: E402

# A frame of the TCP receive path: one segment delivered to its socket.
DELIVERY = re.compile(r"\btcp_v[46]_rcv\b")
# A frame naming the system call a kernel stack runs under.
SYSCALL = re.compile(r"\b__(?:x64|se|do)_sys_(\w+)")


def owners(perf_data, server_pids, client_comm, profile=None):
    """Samples of the perf recording by (context, owner): context is "server", "client"
    or "other" (whose context the sample ran in), owner is "server" or "client" (whose
    work it is on a network). With `profile` (a Counter), also counts the server's
    samples by (owner, system call or "user", leaf function)."""
    script = subprocess.run(["perf", "script", "-i", perf_data, "-F", "comm,pid,ip,sym"],
                            capture_output=True, text=True, check=True).stdout
    counts = collections.Counter()
    for sample in script.split("\n\n"):
        lines = sample.strip("\n").split("\n")
        if not lines or not lines[0].strip():
            continue
        head = lines[0].rsplit(None, 1)
        if len(head) != 2 or not head[1].isdigit():
            continue
        comm, pid = head[0].strip(), int(head[1])
        if pid in server_pids:
            context = "server"
        elif comm == client_comm:
            context = "client"
        else:
            context = "other"
        deliveries = sum(1 for line in lines[1:] if DELIVERY.search(line))
        if context == "other":
            counts[(context, "delivery" if deliveries else "none")] += 1
            continue
        other = "client" if context == "server" else "server"
        owner = other if deliveries % 2 else context
        counts[(context, owner)] += 1
        if profile is not None and owner == "server":
            leaf = lines[1].split(None, 1)[1] if len(lines) > 1 and len(lines[1].split(None, 1)) > 1 else "?"
            calls = [m.group(1) for line in lines[1:] for m in [SYSCALL.search(line)] if m]
            profile[(context, calls[-1] if calls else "user or no call", leaf[:40])] += 1
    return counts


def measure(server, path, connections, seconds, work, label, profile=None):
    """One wrk run under perf: (requests, server CPU s, client CPU s, sample counts)."""
    data = os.path.join(work, f"perf-{label}.data")
    perf = subprocess.Popen(["perf", "record", "-a", "-g", "-F", "499", "-o", data, "--", "sleep", str(seconds + 1)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    time.sleep(0.5)
    before = cpu_seconds(server.pids())
    client_before = os.times().children_user + os.times().children_system
    out = subprocess.run(["wrk", "-t2", f"-c{connections}", f"-d{seconds}s", "--timeout", "30s", server.url + path],
                         capture_output=True, text=True).stdout
    client = os.times().children_user + os.times().children_system - client_before
    used = cpu_seconds(server.pids()) - before
    perf.wait()
    requests = int(re.search(r"(\d+) requests in", out).group(1))
    if "Non-2xx" in out or requests == 0:
        sys.exit(f"failed answers from {server.url}{path}:\n{out}")
    counts = owners(data, set(server.pids()), "wrk", profile)
    os.unlink(data)
    return requests, used, client, counts


def split(requests, used, client, counts):
    """µs per request: each side's CPU time as measured, and the same time split by
    owner in the proportions of its samples."""
    server_samples = counts[("server", "server")] + counts[("server", "client")]
    client_samples = counts[("client", "client")] + counts[("client", "server")]
    server_own = used * counts[("server", "server")] / max(server_samples, 1)
    client_for_server = client * counts[("client", "server")] / max(client_samples, 1)
    per_request = 1e6 / requests
    return {
        "server": used * per_request,
        "client": client * per_request,
        "server's in server": server_own * per_request,
        "server's in client": client_for_server * per_request,
        "owned by server": (server_own + client_for_server) * per_request,
        "owned by client": (used + client - server_own - client_for_server) * per_request,
    }


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--binary", default="target/release/kubedav")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--seconds", type=int, default=5)
    parser.add_argument("--connections", type=int, default=2)
    parser.add_argument("--file", default="/bench/100m.bin", help="what each GET asks for (bench_cpu.py's fixtures)")
    parser.add_argument("--profile", action="store_true",
                        help="also print where each server's own work went, by system call and function")
    options = parser.parse_args()
    print(f"GET {options.file}, wrk -t2 -c{options.connections} -d{options.seconds}s, {options.rounds} rounds, "
          "order rotating; µs of CPU per request, median [min-max]")
    print("measured: each side's own CPU time (/proc); owned: the same time split by whose work it is "
          "on a network (perf stacks, loopback deliveries undone)")
    rows = collections.defaultdict(list)
    others = collections.Counter()
    samples = collections.Counter()
    profiles = collections.defaultdict(collections.Counter)
    with tempfile.TemporaryDirectory(prefix="kubedav-loopback-split.") as work:
        upload = os.path.join(work, "upload.bin")
        servers = {}
        try:
            setups = {
                "all-in-one": ("all", []),
                "microservices": ("microservices", []),
                "microservices, shared runtime": ("microservices", ["--http-threads", "0"]),
                "nginx": (None, []),
            }
            for name, (mode, gateway) in setups.items():
                directory = os.path.join(work, name.replace(", ", "-"))
                root = os.path.join(directory, "root")
                os.makedirs(root)
                fixtures(root, upload)
                if mode is None:
                    servers[name] = Nginx(directory, root)
                    continue
                mount = []
                if mode == "microservices":
                    incoming = os.path.join(root, ".kubedav", "incoming")
                    os.makedirs(incoming, mode=0o700, exist_ok=True)
                    mount = ["--fileio-volume", root, "--fileio-incoming", incoming, *gateway]
                servers[name] = Kubedav(options.binary, mode, directory, root, gateway_extra=mount)
            names = list(servers)
            for round_ in range(options.rounds):
                for name in names[round_ % len(names):] + names[:round_ % len(names)]:
                    label = f"{round_}-{name.replace(', ', '-')}"
                    requests, used, client, counts = measure(
                        servers[name], options.file, options.connections, options.seconds, work, label,
                        profiles[name] if options.profile else None)
                    rows[name].append(split(requests, used, client, counts))
                    others[name] += counts[("other", "delivery")]
                    samples[name] += sum(counts.values())
        finally:
            for server in servers.values():
                server.stop()
    columns = ["server", "client", "server's in server", "server's in client", "owned by server", "owned by client"]
    print(f"{'':24}" + "".join(f"{c:>28}" for c in ["measured: server", "measured: client",
                                                       "server's, run by server", "server's, run by wrk",
                                                       "owned: server", "owned: client"]))
    for name, figures in rows.items():
        cells = []
        for column in columns:
            values = [f[column] for f in figures]
            cells.append(f"{statistics.median(values):9.0f} [{min(values):.0f}-{max(values):.0f}]")
        print(f"{name:24}" + "".join(f"{c:>28}" for c in cells))
    nginx = statistics.median(f["owned by server"] for f in rows["nginx"])
    nginx_measured = statistics.median(f["server"] for f in rows["nginx"])
    print("samples with a delivery in other contexts (ksoftirqd, idle), uncounted above: "
          + ", ".join(f"{name} {others[name] / max(samples[name], 1):.1%}" for name in rows))
    print("ratio to nginx (server's CPU per request): measured / owned")
    for name, figures in rows.items():
        measured = statistics.median(f["server"] for f in figures)
        owned = statistics.median(f["owned by server"] for f in figures)
        print(f"  {name:24} x{measured / nginx_measured:.2f} / x{owned / nginx:.2f}")
    for name, profile in profiles.items():
        total = sum(profile.values())
        print(f"{name}: the server's own samples ({total}), by the context that ran them and system call")
        calls = collections.Counter()
        for (context, call, _), n in profile.items():
            calls[(context, call)] += n
        for (context, call), n in calls.most_common(8):
            print(f"  {n / total:6.1%}  run by {context:7} {call}")
        print("  the leaf functions:")
        leaves = collections.Counter()
        for (_, _, leaf), n in profile.items():
            leaves[leaf] += n
        for leaf, n in leaves.most_common(10):
            print(f"  {n / total:6.1%}  {leaf}")


if __name__ == "__main__":
    main()
