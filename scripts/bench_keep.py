#!/usr/bin/env python3
"""What the trash and versions cost per request: one build, two deployments side by side.

    python3 scripts/bench_keep.py [BINARY] [--rounds 3] [--seconds 5] [--pin] [--modes all,microservices]
        [--workloads NAME,...]

The deployments serve the same files on a volume and differ only in fileio's flags:
nothing kept, or `--trash-retention-days 30 --versions-max 10`. Measured in alternating
rounds with wrk (one connection per thread, 2 threads): PUT then DELETE of a new 4 KiB
file (`scripts/putdelete.lua`: with the trash, each DELETE makes a trash item), and PUT
over the same 4 KiB file (`scripts/putsame.lua`: with versions, each keeps the replaced
content and drops the eleventh); and two reads that touch nothing kept, GET of a 1 KiB
file and PROPFIND Depth 0 of it (`scripts/propfind0.lua`), which show what the
gateway's check for the trash's and versions' URLs costs every other request (without
keeping it is not made). Printed per round: requests/s and the CPU time (utime +
stime of the deployment's processes) per request; then the kept deployment's CPU over the
other's, median of the paired rounds. Issue 54's goal: within 1.2 times on a volume.

Then `--together` rounds (default 8): both deployments loaded at once, each by its own
wrk, for the same seconds, and each one's CPU per request read over that same interval.
Whatever this shared VM does meanwhile (steal, the disk's other tenants, a cold cache)
falls on both alike, so their ratio varies far less than the alternating rounds' (on
2026-11-28, one build's PUT+DELETE: 1.03–1.06 at once, 0.73–1.87 alternating). Both share the
servers' CPU (with `--pin`, the last one; the two wrk share the others), so each one's
absolute figures are higher than alone; the ratio is the figure.
"""

import concurrent.futures

import argparse
import os
import statistics
import tempfile

import benchkit
from benchkit import REPO, Kubedav, cpu_seconds

SCRIPTS = os.path.dirname(os.path.abspath(__file__))
KEEPING = ["--trash-retention-days", "30", "--versions-max", "10"]
# Nothing kept: both features off (the defaults keep).
NOTHING_KEPT = ["--trash-retention-days", "0", "--versions-max", "0"]


class Deployment:
    def __init__(self, binary, mode, work, keeping):
        root = os.path.join(work, "root")
        os.makedirs(os.path.join(root, "bench", "put"))
        with open(os.path.join(root, "bench", "get.bin"), "wb") as f:
            f.write(b"g" * 1024)
        self.root = root
        self.runs = 0
        self.kubedav = Kubedav(binary, mode, work, root, extra=KEEPING if keeping else NOTHING_KEPT)
        self.url = self.kubedav.url

    def fresh_dir(self):
        """A new directory for one run's files."""
        self.runs += 1
        path = f"/bench/run{self.runs}/"
        os.makedirs(os.path.join(self.root, path.strip("/")))
        return path

    def pids(self):
        return self.kubedav.pids()

    def stop(self):
        self.kubedav.stop()


WORKLOADS = [
    # name, script, environment variable naming the run's directory (or the path read)
    ("PUT+DELETE 4 KiB", "putdelete.lua", "DELDIR"),
    ("PUT over a file 4 KiB", "putsame.lua", "PUTDIR"),
    # Reads: what the gateway's check for the trash's and versions' URLs costs a
    # request that is neither (the path without it: nothing kept, no check made).
    ("GET 1 KiB", None, "/bench/get.bin"),
    ("PROPFIND Depth 0", "propfind0.lua", "/bench/get.bin"),
]


def wrk_run(deployment, workload):
    """What one wrk run of `workload` on `deployment` is given: (url, arguments, env)."""
    _, script, variable = workload
    arguments = ["-s", os.path.join(SCRIPTS, script)] if script else []
    if variable.startswith("/"):
        return deployment.url + variable, arguments, None
    return deployment.url + "/", arguments, {variable: deployment.fresh_dir()}


def measure(deployment, workload, seconds):
    """One wrk run: (requests/s, µs of CPU per request)."""
    url, arguments, env = wrk_run(deployment, workload)
    before = cpu_seconds(deployment.pids())
    requests, rate = benchkit.wrk(url, 2, seconds, arguments, env)
    used = cpu_seconds(deployment.pids()) - before
    return rate, used / max(requests, 1) * 1e6


def measure_together(deployments, workload, seconds):
    """One round with every deployment loaded at once: {name: (requests/s, µs CPU/req)}."""
    runs = {name: wrk_run(deployment, workload) for name, deployment in deployments.items()}
    before = {name: cpu_seconds(d.pids()) for name, d in deployments.items()}
    with concurrent.futures.ThreadPoolExecutor(len(runs)) as pool:
        started = {name: pool.submit(benchkit.wrk, url, 2, seconds, arguments, env)
                   for name, (url, arguments, env) in runs.items()}
        answered = {name: future.result() for name, future in started.items()}
    figures = {}
    for name, (requests, rate) in answered.items():
        used = cpu_seconds(deployments[name].pids()) - before[name]
        figures[name] = (rate, used / max(requests, 1) * 1e6)
    return figures


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("binary", nargs="?", default=os.path.join(REPO, "target", "dist", "kubedav"))
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--seconds", type=int, default=5)
    parser.add_argument("--together", type=int, default=8,
                        help="rounds with both deployments loaded at once (0: none)")
    parser.add_argument("--modes", default="all,microservices")
    parser.add_argument("--pin", action="store_true", help="servers on the last CPU, wrk on the others")
    parser.add_argument("--workloads", default=",".join(name for name, _, _ in WORKLOADS),
                        help="which of: " + ", ".join(name for name, _, _ in WORKLOADS))
    options = parser.parse_args()
    pinned = ""
    if options.pin:
        servers, load = benchkit.pin_servers()
        pinned = f"; servers on CPU {sorted(servers)}, wrk on CPU {sorted(load)}"
    print(f"wrk -t2 -c2, {options.seconds} s per run, {options.rounds} alternating rounds; "
          f"CPU = utime+stime of all the deployment's processes per request{pinned}")
    setups = {"nothing kept": False, "trash+versions": True}
    ratios = {}
    together = {}
    placements = (list(setups), list(reversed(list(setups))))
    for mode, placement in [(m, p) for m in options.modes.split(",") for p in placements]:
        with tempfile.TemporaryDirectory() as work:
            deployments = {}
            try:
                for name in placement:
                    where = os.path.join(work, name.replace(" ", "-").replace("+", "-"))
                    os.makedirs(where)
                    deployments[name] = Deployment(options.binary, mode, where, setups[name])
                for workload in [w for w in WORKLOADS if w[0] in options.workloads.split(",")]:
                    figures = {name: [] for name in setups}
                    for round_ in range(options.rounds):
                        order = placement if round_ % 2 == 0 else list(reversed(placement))
                        for name in order:
                            figures[name].append(measure(deployments[name], workload, options.seconds))
                    for name in setups:
                        rates = " / ".join(f"{r:7.0f}" for r, _ in figures[name])
                        cpus = " / ".join(f"{c:7.1f}" for _, c in figures[name])
                        first = "set up first" if name == placement[0] else ""
                        print(f"{mode:13} {workload[0]:22} {name:15} {first:12} r/s {rates}   µs CPU/req {cpus}")
                    ratios.setdefault((mode, workload[0]), []).extend(
                        kept[1] / plain[1] for kept, plain in zip(figures["trash+versions"], figures["nothing kept"]))
                    if placement is placements[0]:
                        for _ in range(options.together):
                            both = measure_together(deployments, workload, options.seconds)
                            together.setdefault((mode, workload[0]), []).append(
                                (both["trash+versions"], both["nothing kept"]))
            finally:
                for deployment in deployments.values():
                    deployment.stop()
    for (mode, workload), paired in ratios.items():
        print(f"{mode:13} {workload:22} kept over nothing kept: median {statistics.median(paired):.3f}× "
              f"of {len(paired)} paired rounds ({min(paired):.3f}–{max(paired):.3f})")
    for (mode, workload), rounds in together.items():
        paired = [kept[1] / plain[1] for kept, plain in rounds]
        kept = " / ".join(f"{k[1]:.0f}" for k, _ in rounds)
        plain = " / ".join(f"{p[1]:.0f}" for _, p in rounds)
        print(f"{mode:13} {workload:22} both loaded at once, µs CPU/req kept {kept}; nothing kept {plain}")
        print(f"{mode:13} {workload:22} kept over nothing kept, loaded at once: median "
              f"{statistics.median(paired):.3f}× of {len(paired)} rounds ({min(paired):.3f}–{max(paired):.3f})")


if __name__ == "__main__":
    main()
