#!/usr/bin/env python3
"""CPU time per request: kubedav (both run modes) against nginx, in alternating rounds.

    python3 scripts/bench_cpu.py [--binary target/dist/kubedav] [--rounds 5]
                                 [--seconds 5] [--hog] [--only NAME] [--durability fsync|none]

Throughput on a shared 2-core machine, with wrk on the same cores, moves with whatever
else runs; the server's CPU time per request (utime + stime of every one of its
processes over a run, divided by the requests it answered) moves far less, and it is what
decides who wins once the CPU is scarce. So this is make bench's headline figure.

Beside it, `client`: the load generator's own CPU per request (wrk's; PUT: curl's, per
MB). Over loopback TCP much of the kernel's work for a response (sending the segments
and delivering them to the receiving socket) runs in whichever process's system call
pushes them out: the server's send for what the client's window takes at once, the
client's read (whose acknowledgement releases the rest) otherwise. So a server figure
can rise while the client's falls by as much: for large responses compare the sums too
(docs/benchmarks.md, "2026-11-26 (2)").

And `cores`: the server's CPU time over the run's wall time, its share of the machine.
Under a CPU hog, throughput follows that share as much as the cost per request: a
server whose threads the kernel runs less often loses throughput at the same cost
(docs/benchmarks.md, "2026-11-26 (6)").

The three servers run at once, each over its own root with the same fixtures: kubedav
all-in-one, kubedav microservices (gateway, fileio and locks as processes, all of them
counted; the gateway mounts fileio's volume too, as the chart sets it up, unless
`--grpc-only`) and nginx with the dav-ext module (master and workers counted, sendfile on, no
access log, as ../shared/peers configures it). Each workload runs in `--rounds` rounds;
every round measures every server, the order rotating, so a busy moment falls on each
alike. Printed per workload and server: the median requests/s (or MB/s) and µs of CPU per
request (or per MB), each with its spread over the rounds (min-max), and the CPU ratio
against nginx (lower is better). Then the goals of docs/benchmarks.md, met or not.

`--hog` keeps one core busy (stress-ng --cpu 1, or a Python busy loop) for the whole run:
the slow-machine case, where the throughput ratios must still hold.

Workloads: GET 1 KiB and GET 1 MiB (wrk, 64 connections), GET 10 MiB and GET 100 MiB
(8 and 2 connections: files no gateway keeps, so in microservices mode they cross gRPC),
PROPFIND Depth 1 on 1,000 files (16 connections) and Depth 0 on one file (64), allprop;
LOCK + UNLOCK (scripts/lockunlock.lua, one connection per wrk thread, each on a file of
its own; a request is a LOCK or an UNLOCK, so a pair is two), with 2 clients (the goals')
and again with 16, without a goal; PUT 10 MiB (PUT_COUNT
sequential `curl -T` uploads to new names, deleted after each round; CPU per MB).

The goals printed at the end are docs/benchmarks.md's: issue 30's for all-in-one and
issue 56's for both modes, each a bound on the CPU ratio, on the throughput ratio, or
both, and each printed met or NOT met.
"""

import argparse
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

from benchkit import PEERS, REPO, Kubedav, cpu_seconds

PUT_COUNT = int(os.environ.get("PUT_COUNT", "20"))
PUT_MIB = 10
NGINX_MODULE = "/usr/lib/nginx/modules/ngx_http_dav_ext_module.so"


def free_port():
    import socket
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Nginx:
    """nginx with the dav-ext module over `root`, configured as ../shared/peers does."""

    def __init__(self, work, root):
        self.root = root
        port = free_port()
        os.makedirs(os.path.join(work, "tmp"), exist_ok=True)
        conf = os.path.join(work, "nginx.conf")
        with open(conf, "w") as f:
            f.write(f"""load_module {NGINX_MODULE};
user root root;
worker_processes auto;
daemon off;
pid {work}/nginx.pid;
error_log {work}/error.log warn;
events {{ worker_connections 1024; }}
http {{
  types {{ text/plain txt; }}
  default_type application/octet-stream;
  access_log off;
  sendfile on;
  keepalive_requests 1000000;
  client_body_temp_path {work}/tmp/body;
  proxy_temp_path {work}/tmp/proxy;
  fastcgi_temp_path {work}/tmp/fastcgi;
  uwsgi_temp_path {work}/tmp/uwsgi;
  scgi_temp_path {work}/tmp/scgi;
  dav_ext_lock_zone zone=davlock:10m;
  server {{
    listen 127.0.0.1:{port};
    root {root};
    client_max_body_size 0;
    location / {{
      dav_methods PUT DELETE MKCOL COPY MOVE;
      dav_ext_methods PROPFIND OPTIONS LOCK UNLOCK;
      dav_ext_lock zone=davlock;
      create_full_put_path on;
      dav_access user:rw group:rw all:r;
      autoindex on;
    }}
  }}
}}
""")
        self.proc = subprocess.Popen(["/usr/sbin/nginx", "-e", f"{work}/error.log", "-p", f"{work}/", "-c", conf],
                                     stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        self.url = f"http://127.0.0.1:{port}"
        deadline = time.time() + 20
        while subprocess.run(["curl", "-s", "-o", "/dev/null", self.url + "/"]).returncode != 0:
            if time.time() > deadline:
                sys.exit(f"nginx did not start; see {work}/error.log")
            time.sleep(0.05)

    def pids(self):
        children = subprocess.run(["ps", "-o", "pid=", "--ppid", str(self.proc.pid)],
                                  capture_output=True, text=True).stdout.split()
        return [self.proc.pid, *map(int, children)]

    def stop(self):
        self.proc.terminate()
        self.proc.wait(timeout=30)


def fixtures(root, upload):
    """The files every server serves: bench/1k.bin, 1m.bin, 10m.bin, dir1000/ (1,000
    files of 100 bytes) and the empty bench/put/."""
    bench = os.path.join(root, "bench")
    os.makedirs(os.path.join(bench, "dir1000"))
    os.makedirs(os.path.join(bench, "put"))
    os.makedirs(os.path.join(bench, "lock"))
    for thread in range(LOCK_CLIENTS):
        open(os.path.join(bench, "lock", f"t{thread}.txt"), "wb").close()
    for name, size in (("1k.bin", 1024), ("1m.bin", 1 << 20), ("10m.bin", 10 << 20), ("100m.bin", 100 << 20)):
        with open(os.path.join(bench, name), "wb") as f:
            f.write(os.urandom(size))
    small = b"small file for the PROPFIND Depth 1 test, 100 bytes ".ljust(99, b".") + b"\n"
    for i in range(1, 1001):
        with open(os.path.join(bench, "dir1000", f"f{i:04}.txt"), "wb") as f:
            f.write(small)
    if not os.path.exists(upload):
        with open(upload, "wb") as f:
            f.write(os.urandom(PUT_MIB << 20))


PROPFIND = ["-s", os.path.join(PEERS, "propfind.lua")]
# LOCK+UNLOCK's clients at most: one wrk thread and connection each, on a file of its own.
LOCK_CLIENTS = 16
WORKLOADS = [
    # name, path, wrk arguments, connections, environment, unit of work
    ("GET 1 KiB", "/bench/1k.bin", [], 64, {}, "req"),
    ("GET 1 MiB", "/bench/1m.bin", [], 64, {}, "req"),
    ("GET 10 MiB", "/bench/10m.bin", [], 8, {}, "req"),
    ("GET 100 MiB", "/bench/100m.bin", [], 2, {}, "req"),
    ("PROPFIND d1 (1,000)", "/bench/dir1000/", PROPFIND, 16, {"DEPTH": "1"}, "req"),
    ("PROPFIND d0", "/bench/1k.bin", PROPFIND, 64, {"DEPTH": "0"}, "req"),
    ("LOCK+UNLOCK", "/bench/lock/", ["-s", os.path.join(REPO, "scripts", "lockunlock.lua")], 2,
     {"LOCKDIR": "/bench/lock/"}, "req"),
    # The same with 16 clients at once, as a server with many users sees LOCKs: calls to
    # the locks service then share its connection's writes and wake-ups. Not a goal of
    # its own; docs/benchmarks.md, "2026-12-06 (7)".
    (f"LOCK+UNLOCK x{LOCK_CLIENTS}", "/bench/lock/", ["-s", os.path.join(REPO, "scripts", "lockunlock.lua")],
     LOCK_CLIENTS, {"LOCKDIR": "/bench/lock/"}, "req"),
    ("PUT 10 MiB", None, [], 1, {}, "MB"),
]


def client_seconds():
    """utime + stime of this script's finished children: the load generators (wrk, curl)."""
    times = os.times()
    return times.children_user + times.children_system


def wrk(server, workload, seconds):
    """One wrk run: (requests/s, µs of the server's CPU per request, µs of wrk's, the
    cores the server used)."""
    name, path, args, conns, env, _ = workload
    # lockunlock.lua keeps one token per wrk thread, so its connections are its threads.
    threads = conns if name.startswith("LOCK+UNLOCK") else 2
    before = cpu_seconds(server.pids())
    client_before = client_seconds()
    started = time.monotonic()
    out = subprocess.run(
        ["wrk", f"-t{threads}", f"-c{conns}", f"-d{seconds}s", "--timeout", "10s", *args, server.url + path],
        capture_output=True, text=True, timeout=seconds + 60, env={**os.environ, **env},
    ).stdout
    elapsed = time.monotonic() - started
    client = client_seconds() - client_before  # before `ps` (server.pids) adds to it
    used = cpu_seconds(server.pids()) - before
    requests = int(re.search(r"(\d+) requests in", out).group(1))
    if "Non-2xx" in out or requests == 0:
        sys.exit(f"failed answers from {server.url}{path} ({type(server).__name__}):\n{out}")
    rate = float(re.search(r"Requests/sec:\s+([\d.]+)", out).group(1))
    return rate, used / requests * 1e6, client / requests * 1e6, used / elapsed


def release_locks(server):
    """Unlocks what a LOCK+UNLOCK run left locked (wrk may stop between the two), so the
    next run's LOCKs are not refused. nginx's tokens are `urn:<hex>`, kubedav's
    `urn:uuid:…`."""
    discover = ('<?xml version="1.0"?><D:propfind xmlns:D="DAV:"><D:prop><D:lockdiscovery/>'
                '</D:prop></D:propfind>')
    for thread in range(LOCK_CLIENTS):
        url = f"{server.url}/bench/lock/t{thread}.txt"
        answer = subprocess.run(["curl", "-s", "-X", "PROPFIND", "-H", "Depth: 0", "--data", discover, url],
                                capture_output=True, text=True).stdout
        for token in set(re.findall(r"(?:opaquelocktoken:|urn:)[^<\s]+", answer)):
            subprocess.run(["curl", "-s", "-o", "/dev/null", "-X", "UNLOCK", "-H", f"Lock-Token: <{token}>", url])


def put(server, upload, round_):
    """PUT_COUNT sequential uploads: (MB/s, µs of the server's CPU per MB, µs of curl's);
    the files are deleted after."""
    names = [f"{server.url}/bench/put/r{round_}-{i}.bin" for i in range(PUT_COUNT)]
    before = cpu_seconds(server.pids())
    client_before = client_seconds()
    started = time.monotonic()
    for name in names:
        code = subprocess.run(["curl", "-s", "-o", "/dev/null", "--max-time", "120", "-w", "%{http_code}",
                               "-T", upload, name], capture_output=True, text=True).stdout
        if not code.startswith("2"):
            sys.exit(f"PUT {name} answered {code}")
    elapsed = time.monotonic() - started
    client = client_seconds() - client_before  # before `ps` (server.pids) adds to it
    used = cpu_seconds(server.pids()) - before
    for name in names:
        subprocess.run(["curl", "-s", "-o", "/dev/null", "-X", "DELETE", name])
    megabytes = PUT_COUNT * (PUT_MIB << 20) / 1e6
    return megabytes / elapsed, used / megabytes * 1e6, client / megabytes * 1e6, used / elapsed


def spread(values, fmt):
    return f"{fmt.format(statistics.median(values))} [{fmt.format(min(values))}-{fmt.format(max(values))}]"


# Goals of docs/benchmarks.md: (the most CPU per request, kubedav ÷ nginx; the least
# throughput, kubedav ÷ nginx), None where a goal bounds only one. Issue 30's, then
# issue 56's (the mode a `helm install` runs, and large files, locks in both).
GOALS = {
    ("all", "GET 1 KiB"): (0.9, None),
    ("all", "PROPFIND d0"): (1.0, None),
    ("all", "PROPFIND d1 (1,000)"): (0.5, None),
    ("all", "GET 1 MiB"): (1.1, None),
    ("microservices", "GET 1 MiB"): (1.5, None),
    ("all", "GET 10 MiB"): (1.1, None),
    ("microservices", "GET 10 MiB"): (1.5, 0.9),
    ("all", "GET 100 MiB"): (1.1, None),
    ("microservices", "GET 100 MiB"): (1.5, 0.9),
    ("all", "PUT 10 MiB"): (0.8, None),
    ("microservices", "PUT 10 MiB"): (1.0, 1.0),
    ("all", "LOCK+UNLOCK"): (None, 1.5),
    ("microservices", "LOCK+UNLOCK"): (1.0, 1.0),
}


def hog():
    """Keeps one core busy until stopped."""
    if shutil.which("stress-ng"):
        return subprocess.Popen(["stress-ng", "--cpu", "1", "--quiet"], stdout=subprocess.DEVNULL)
    return subprocess.Popen([sys.executable, "-c", "while True: pass"])


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--binary", default=os.path.join(REPO, "target", "dist", "kubedav"))
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--seconds", type=int, default=5)
    parser.add_argument("--hog", action="store_true", help="keep one core busy during the run")
    parser.add_argument("--only", help="the workloads whose name contains this, e.g. PROPFIND")
    parser.add_argument("--durability", help="kubedav's --durability (fsync, the default, or none)")
    parser.add_argument("--grpc-only", action="store_true",
                        help="microservices without --fileio-volume and --fileio-incoming: every body crosses gRPC")
    options = parser.parse_args()
    for tool in ("wrk", "curl", "/usr/sbin/nginx", NGINX_MODULE):
        if not (shutil.which(tool) or os.path.exists(tool)):
            sys.exit(f"bench_cpu: {tool} is missing (make bench installs wrk, curl, nginx and "
                     "libnginx-mod-http-dav-ext)")
    extra = ["--durability", options.durability] if options.durability else []
    workloads = [w for w in WORKLOADS if not options.only or options.only in w[0]]
    busy = hog() if options.hog else None
    print(f"machine: {os.cpu_count()} cores; wrk -t2, {options.seconds} s per run, {options.rounds} rounds, "
          f"order rotating; PUT: {PUT_COUNT} x {PUT_MIB} MiB sequential curl -T"
          + ("; one core kept busy by a CPU hog" if busy else "")
          + (f"; kubedav --durability {options.durability}" if extra else ""))
    print("CPU = utime+stime of every process of the server, per request (PUT: per MB); "
          "median [min-max] over the rounds; ratio = kubedav CPU / nginx CPU (lower is better); "
          "client = the load generator's (wrk, curl) median CPU per request (per MB); "
          "cores = the server's median CPU time over the run's wall time (its share of the machine)")
    results = {}
    with tempfile.TemporaryDirectory(prefix="kubedav-bench-cpu.") as work:
        upload = os.path.join(work, "upload.bin")
        servers = {}
        try:
            for name in ("all", "microservices", "nginx"):
                directory = os.path.join(work, name)
                root = os.path.join(directory, "root")
                os.makedirs(root)
                fixtures(root, upload)
                if name == "nginx":
                    servers[name] = Nginx(directory, root)
                else:
                    # Microservices as the chart runs them on a volume: the gateway mounts
                    # it too and sends large files from there (--fileio-volume), and
                    # writes large bodies into its incoming area (--fileio-incoming).
                    mount = []
                    if name == "microservices" and not options.grpc_only:
                        incoming = os.path.join(root, ".kubedav", "incoming")
                        os.makedirs(incoming, mode=0o700, exist_ok=True)
                        mount = ["--fileio-volume", root, "--fileio-incoming", incoming]
                    servers[name] = Kubedav(options.binary, name, directory, root, extra, gateway_extra=mount)
            for server in servers.values():
                subprocess.run(["wrk", "-t2", "-c16", "-d1s", server.url + "/bench/1k.bin"], capture_output=True)
            names = list(servers)
            for workload in workloads:
                figures = {name: [] for name in names}
                for round_ in range(options.rounds):
                    order = names[round_ % len(names):] + names[:round_ % len(names)]
                    for name in order:
                        if workload[1] is None:
                            figures[name].append(put(servers[name], upload, round_))
                        else:
                            figures[name].append(wrk(servers[name], workload, options.seconds))
                            if workload[0].startswith("LOCK+UNLOCK"):
                                release_locks(servers[name])
                unit = workload[5]
                rate_unit = "MB/s" if unit == "MB" else "r/s"
                nginx_cpu = statistics.median(f[1] for f in figures["nginx"])
                nginx_rate = statistics.median(f[0] for f in figures["nginx"])
                for name in names:
                    rates = [f[0] for f in figures[name]]
                    cpus = [f[1] for f in figures[name]]
                    clients = [f[2] for f in figures[name]]
                    cores = [f[3] for f in figures[name]]
                    ratio = statistics.median(cpus) / nginx_cpu
                    results[(name, workload[0])] = (ratio, statistics.median(rates) / nginx_rate)
                    print(f"{workload[0]:20} {name:13} {rate_unit:4} {spread(rates, '{:.0f}'):>24}   "
                          f"µs CPU/{unit} {spread(cpus, '{:.1f}'):>22}   client {statistics.median(clients):6.1f}   "
                          f"cores {statistics.median(cores):4.2f}"
                          + ("" if name == "nginx" else f"   CPU x{ratio:.2f}, throughput x{results[(name, workload[0])][1]:.2f}"))
        finally:
            for server in servers.values():
                server.stop()
            if busy:
                busy.kill()
    print()
    print("goals (kubedav / nginx: CPU per request at most, throughput at least):")
    for (mode, workload), (most_cpu, least_rate) in GOALS.items():
        if (mode, workload) not in results:
            continue
        ratio, throughput = results[(mode, workload)]
        bounds, met = [], True
        if most_cpu is not None:
            bounds.append(f"CPU x{ratio:.2f} <= {most_cpu:.1f}")
            met = met and ratio <= most_cpu
        if least_rate is not None:
            bounds.append(f"throughput x{throughput:.2f} >= {least_rate:.1f}")
            met = met and throughput >= least_rate
        print(f"  {mode:13} {workload:20} {', '.join(bounds):52} {'met' if met else 'NOT met'}")


if __name__ == "__main__":
    main()
