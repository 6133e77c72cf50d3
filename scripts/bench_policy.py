#!/usr/bin/env python3
"""What `--policy` costs per request: one build, three deployments side by side.

    python3 scripts/bench_policy.py [BINARY] [--rounds 3] [--seconds 5] [--pin] [--modes all]

Each deployment authenticates (the same users file) and serves the same files; they
differ only in the policy: none, 10 rules, or 10,000 rules (the public space and
project spaces for 50 groups). Measured in alternating rounds with wrk, as alice:
GET 1 KiB and PROPFIND Depth 0 of a file in the public space (the goal: at most 1.05
times the CPU without a policy), and PROPFIND Depth 1 of a collection of 1,000 files,
half of them hidden from alice by rules of their own under the policies (CPU per
returned entry, against the unfiltered listing in the same run). Printed per round:
requests/s and the CPU time (utime + stime of the deployment's processes) per request;
then each policy's CPU over the unpolicied one's, median of the paired rounds.
"""

import argparse
import base64
import os
import statistics
import subprocess
import sys
import tempfile

import benchkit
from benchkit import PEERS, REPO, Kubedav, cpu_seconds

AUTH = "Basic " + base64.b64encode(b"alice:bench-password").decode()
MEMBERS = 1000


def policy(rules):
    """A policy of `rules` rules (plus the hidden half of the listed collection)."""
    lines = ["homes: /home/{user}", "groups:"]
    lines += [f"  g{g}: [u{g}, v{g}]" for g in range(50)]
    lines += ["rules:", "  - path: /public", '    grant: {"*": read}']
    for n in range(rules - 1):
        lines += [f"  - path: /projects/p{n}", f'    grant: {{"group:g{n % 50}": write, "user:w{n}": read}}']
    for n in range(1, MEMBERS, 2):
        lines += [f"  - path: /public/many/f{n}.txt", '    grant: {"user:bob": read}']
    return "\n".join(lines) + "\n"


class Deployment:
    def __init__(self, binary, mode, work, rules):
        root = os.path.join(work, "root")
        os.makedirs(os.path.join(root, "public", "many"))
        with open(os.path.join(root, "public", "1k.bin"), "wb") as f:
            f.write(os.urandom(1024))
        for n in range(MEMBERS):
            with open(os.path.join(root, "public", "many", f"f{n}.txt"), "w") as f:
                f.write("x")
        users = os.path.join(work, "users")
        subprocess.run([binary, "passwd", users, "alice"], input="bench-password\n", text=True,
                       check=True, capture_output=True)
        extra = ["--users-file", users]
        if rules:
            path = os.path.join(work, "policy.yaml")
            with open(path, "w") as f:
                f.write(policy(rules))
            extra += ["--policy", path]
        self.kubedav = Kubedav(binary, mode, work, root, extra=extra)
        self.url = self.kubedav.url

    def pids(self):
        return self.kubedav.pids()

    def stop(self):
        self.kubedav.stop()


WORKLOADS = [
    # name, path, wrk arguments, connections, environment, entries per answer
    ("GET 1 KiB", "/public/1k.bin", [], 16, {}, 1),
    ("PROPFIND Depth 0", "/public/1k.bin", ["-s", os.path.join(PEERS, "propfind.lua")], 16, {"DEPTH": "0"}, 1),
    ("PROPFIND Depth 1, 1,000", "/public/many/", ["-s", os.path.join(PEERS, "propfind.lua")], 4,
     {"DEPTH": "1"}, None),
]


def measure(deployment, workload, seconds, filtered):
    """One wrk run: (requests/s, µs of CPU per request, µs of CPU per returned entry)."""
    _, path, args, conns, env, entries = workload
    if entries is None:
        entries = 1 + (MEMBERS // 2 if filtered else MEMBERS)
    before = cpu_seconds(deployment.pids())
    requests, rate = benchkit.wrk(deployment.url + path, conns, seconds,
                                  ["-H", f"Authorization: {AUTH}", *args], env)
    used = cpu_seconds(deployment.pids()) - before
    per_request = used / max(requests, 1) * 1e6
    return rate, per_request, per_request / entries


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("binary", nargs="?", default=os.path.join(REPO, "target", "dist", "kubedav"))
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--seconds", type=int, default=5)
    parser.add_argument("--modes", default="all",
                        help="comma-separated run modes; only all yet (benchkit starts no auth service)")
    parser.add_argument("--pin", action="store_true", help="servers on the last CPU, wrk on the others")
    options = parser.parse_args()
    pinned = ""
    if options.pin:
        servers, load = benchkit.pin_servers()
        pinned = f"; servers on CPU {sorted(servers)}, wrk on CPU {sorted(load)}"
    print(f"wrk -t2, {options.seconds} s per run, {options.rounds} alternating rounds; "
          f"CPU = utime+stime of all the deployment's processes per request{pinned}")
    if options.modes != "all":
        sys.exit("only --modes all: benchkit's microservices deployment has no auth service yet")
    setups = {"no policy": 0, "10 rules": 10, "10,000 rules": 10_000}
    ratios = {}
    # Set up in both orders, as bench_ab.py does: a deployment set up later can pay more
    # per request whatever it runs.
    placements = (list(setups), list(reversed(list(setups))))
    for mode, placement in [(m, p) for m in options.modes.split(",") for p in placements]:
        with tempfile.TemporaryDirectory() as work:
            deployments = {}
            try:
                for name in placement:
                    rules = setups[name]
                    os.makedirs(os.path.join(work, str(rules)))
                    deployments[name] = Deployment(options.binary, mode, os.path.join(work, str(rules)), rules)
                for workload in WORKLOADS:
                    figures = {name: [] for name in setups}
                    for round_ in range(options.rounds):
                        order = placement if round_ % 2 == 0 else list(reversed(placement))
                        for name in order:
                            figures[name].append(
                                measure(deployments[name], workload, options.seconds, setups[name] > 0))
                    for name in setups:
                        rates = " / ".join(f"{r:7.0f}" for r, _, _ in figures[name])
                        cpus = " / ".join(f"{c:7.1f}" for _, c, _ in figures[name])
                        where = "set up first" if name == placement[0] else ""
                        line = (f"{mode:13} {workload[0]:24} {name:13} {where:12} r/s {rates}   "
                                f"µs CPU/req {cpus}")
                        if workload[5] is None:
                            entry = " / ".join(f"{e:5.2f}" for _, _, e in figures[name])
                            line += f"   µs CPU/entry {entry}"
                        print(line)
                    base = figures["no policy"]
                    for name in list(setups)[1:]:
                        index = 2 if workload[5] is None else 1
                        ratios.setdefault((mode, workload[0], name), []).extend(
                            ours[index] / theirs[index] for ours, theirs in zip(figures[name], base))
            finally:
                for deployment in deployments.values():
                    deployment.stop()
    for (mode, workload, name), paired in ratios.items():
        print(f"{mode:13} {workload:24} {name:13} over no policy: median {statistics.median(paired):.3f}× "
              f"({' / '.join(f'{r:.3f}' for r in paired)})")


if __name__ == "__main__":
    main()
