#!/usr/bin/env python3
"""Two kubedav builds side by side: which costs more CPU per request.

    python3 scripts/bench_ab.py BEFORE_BINARY AFTER_BINARY [--rounds 3] [--seconds 5] [--pin]

Both builds run at once, each over its own root, in both run modes (all-in-one, and
gateway + fileio + locks as processes). Each workload (GET 1 KiB, PROPFIND Depth 0,
PUT 4 KiB, LOCK+UNLOCK, GET 1 MiB, GET 10 MiB) is measured with wrk in alternating
rounds, the order flipping every round, so a busy machine slows both alike, and the
pair is set up twice, once in each order (see `main`). Printed per round: requests/s,
and the CPU time (utime + stime of every process of that deployment) per request,
which is the figure that survives a noisy machine; then, per workload, the paired
differences (after − before, same round and placement): their median, and in how many
rounds the after build cost less. `--pin` runs the servers on the last CPU and wrk on the
others (benchkit.pin_servers): a one-core server, unlike production, but two builds'
figures then differ by what the builds do rather than by who preempted whom. Needs wrk.
"""

import argparse
import os
import statistics
import sys
import tempfile

import benchkit
from benchkit import PEERS, REPO, Kubedav, cpu_seconds


class Deployment:
    """One build in one run mode, over its own root, with the bench fixtures."""

    def __init__(self, binary, mode, work):
        self.runs = 0
        root = os.path.join(work, "root")
        self.root = root
        os.makedirs(os.path.join(root, "bench", "put"))
        with open(os.path.join(root, "bench", "1k.bin"), "wb") as f:
            f.write(os.urandom(1024))
        with open(os.path.join(root, "bench", "1m.bin"), "wb") as f:
            f.write(os.urandom(1 << 20))
        with open(os.path.join(root, "bench", "10m.bin"), "wb") as f:
            f.write(os.urandom(10 << 20))
        self.kubedav = Kubedav(binary, mode, work, root)
        self.url = self.kubedav.url

    def lock_dir(self):
        """A fresh directory of files to lock, `/bench/lockN/t0.txt` and `t1.txt`: a run
        stopped between a LOCK and its UNLOCK leaves that lock behind."""
        self.runs += 1
        directory = os.path.join(self.root, "bench", f"lock{self.runs}")
        os.makedirs(directory)
        for t in range(2):
            open(os.path.join(directory, f"t{t}.txt"), "w").close()
        return f"/bench/lock{self.runs}/"

    def pids(self):
        return self.kubedav.pids()

    def stop(self):
        self.kubedav.stop()


WORKLOADS = [
    # name, path, wrk arguments, connections, extra environment
    ("GET 1 KiB", "/bench/1k.bin", [], 16, {}),
    ("PROPFIND Depth 0", "/bench/1k.bin", ["-s", os.path.join(PEERS, "propfind.lua")], 16, {"DEPTH": "0"}),
    ("PUT 4 KiB", "/bench/put/", ["-s", os.path.join(REPO, "scripts", "put4k.lua")], 16, {}),
    ("LOCK+UNLOCK", "/bench/lock/", ["-s", os.path.join(REPO, "scripts", "lockunlock.lua")], 2, {}),
    ("GET 1 MiB", "/bench/1m.bin", [], 64, {}),
    # Larger than any file a gateway keeps: its bytes cross gRPC in microservices mode.
    ("GET 10 MiB", "/bench/10m.bin", [], 8, {}),
]


def measure(deployment, workload, seconds):
    """One wrk run: (requests/s, µs of CPU per request)."""
    _, path, args, conns, env = workload
    if path == "/bench/lock/":
        path = deployment.lock_dir()
        env = {**env, "LOCKDIR": path}
    before = cpu_seconds(deployment.pids())
    requests, rate = benchkit.wrk(deployment.url + path, conns, seconds, args, env)
    used = cpu_seconds(deployment.pids()) - before
    return rate, used / max(requests, 1) * 1e6


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("before")
    parser.add_argument("after")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--seconds", type=int, default=5)
    parser.add_argument("--only", help="the workloads whose name contains this, e.g. PUT")
    parser.add_argument("--modes", default="all,microservices", help="comma-separated run modes")
    parser.add_argument("--pin", action="store_true", help="servers on the last CPU, wrk on the others")
    options = parser.parse_args()
    builds = {"before": options.before, "after": options.after}
    pinned = ""
    if options.pin:
        servers, load = benchkit.pin_servers()
        pinned = f"; servers on CPU {sorted(servers)}, wrk on CPU {sorted(load)}"
    print(f"wrk -t2, {options.seconds} s per run, {options.rounds} alternating rounds; "
          f"CPU = utime+stime of all the deployment's processes per request{pinned}")
    workloads = [w for w in WORKLOADS if not options.only or options.only in w[0]]
    differences = {}
    for mode in options.modes.split(","):
        # Each pair of deployments is set up twice, once in each order: on this machine
        # the deployment set up second paid up to 15 % more CPU per PUT whichever build it
        # was, so only a figure taken in both placements compares builds.
        for placement in (list(builds), list(reversed(list(builds)))):
            with tempfile.TemporaryDirectory() as work:
                deployments = {}
                for name in placement:
                    os.makedirs(os.path.join(work, name))
                    deployments[name] = Deployment(builds[name], mode, os.path.join(work, name))
                try:
                    for workload in workloads:
                        figures = {name: [] for name in builds}
                        for round_ in range(options.rounds):
                            order = placement if round_ % 2 == 0 else list(reversed(placement))
                            for name in order:
                                figures[name].append(measure(deployments[name], workload, options.seconds))
                        paired = [a[1] - b[1] for a, b in zip(figures["after"], figures["before"])]
                        differences.setdefault((mode, workload[0]), []).extend(paired)
                        for name in builds:
                            rates = " / ".join(f"{r:7.0f}" for r, _ in figures[name])
                            cpus = " / ".join(f"{c:5.1f}" for _, c in figures[name])
                            where = "set up first" if name == placement[0] else "set up second"
                            print(f"{mode:13} {workload[0]:17} {name:6} ({where:13})  "
                                  f"r/s {rates}   µs CPU/req {cpus}")
                finally:
                    for d in deployments.values():
                        d.stop()
    for (mode, name), paired in differences.items():
        lower = sum(1 for d in paired if d < 0)
        print(f"{mode:13} {name:17} after − before: median {statistics.median(paired):+.1f} µs CPU/req, "
              f"lower in {lower} of {len(paired)} paired rounds")

if __name__ == "__main__":
    main()
