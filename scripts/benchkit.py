"""Shared by the Python bench scripts: starting kubedav in either run mode over a root,
finding the addresses it announces, and reading the CPU time its processes used."""

import os
import re
import subprocess
import sys
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PEERS = os.environ.get("PEERS_DIR", os.path.join(REPO, "..", "shared", "peers"))
TICKS = os.sysconf("SC_CLK_TCK")


# The CPUs the servers started by `start` may run on; None: any (see `pin_servers`).
SERVER_CPUS = None


def pin_servers():
    """Servers started from now on run on the last CPU only, and this process (with the
    load generators it starts) on the others: each side's CPU time then no longer
    includes being preempted by the other on a shared core, which is most of the noise
    between two builds' figures on this 2-core machine. Returns the two CPU sets."""
    global SERVER_CPUS
    cpus = sorted(os.sched_getaffinity(0))
    if len(cpus) < 2:
        sys.exit("--pin needs at least 2 CPUs")
    SERVER_CPUS = {cpus[-1]}
    load = set(cpus[:-1])
    os.sched_setaffinity(0, load)
    return SERVER_CPUS, load


def start(binary, log, args, env=None):
    """Starts `binary args`, logging to `log`, on SERVER_CPUS when set."""
    out = open(log, "w")
    cpus = SERVER_CPUS
    pin = (lambda: os.sched_setaffinity(0, cpus)) if cpus else None
    return subprocess.Popen([binary, *args], stdout=subprocess.DEVNULL, stderr=out, stdin=subprocess.DEVNULL,
                            preexec_fn=pin, env=env)


def announced(log, what, timeout=30):
    """The address kubedav announced as `<what> listening on ADDR` in `log`."""
    deadline = time.time() + timeout
    pattern = re.compile(re.escape(what) + r" listening on (\S+)")
    while time.time() < deadline:
        with open(log) as f:
            found = pattern.search(f.read())
        if found:
            return found.group(1)
        time.sleep(0.05)
    sys.exit(f"kubedav did not announce {what}; see {log}")


def wrk(url, connections, seconds, args=(), env=None, refused=False):
    """One wrk run (2 threads) on `url`: (requests, requests/s). Exits, showing wrk's
    report, when any answer was not 2xx, or, with `refused` (what an attacker sends),
    when any answer was."""
    out = subprocess.run(
        ["wrk", "-t2", f"-c{connections}", f"-d{seconds}s", *args, url],
        capture_output=True, text=True, timeout=seconds + 60, env={**os.environ, **(env or {})},
    ).stdout
    if refused:
        answered = re.search(r"(\d+) requests in", out)
        failed = re.search(r"Non-2xx or 3xx responses: (\d+)", out)
        if not answered or not failed or failed.group(1) != answered.group(1):
            sys.exit(f"answers other than refusals from {url}:\n{out}")
    elif "Non-2xx" in out:
        sys.exit(f"non-2xx answers from {url}:\n{out}")
    requests = int(re.search(r"(\d+) requests in", out).group(1))
    rate = float(re.search(r"Requests/sec:\s+([\d.]+)", out).group(1))
    return requests, rate


def cpu_seconds(pids):
    """utime + stime of the processes, in seconds."""
    total = 0
    for pid in pids:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        total += int(fields[11]) + int(fields[12])
    return total / TICKS


class Kubedav:
    """kubedav in one run mode (`all`, or `microservices`: gateway, fileio and locks as
    processes) over `root`, with `extra` arguments for the process that runs fileio; on
    the storage `storage` names instead (`s3://bucket/prefix`, with `env` saying where
    the S3 server is) when given."""

    def __init__(self, binary, mode, work, root, extra=(), storage=None, env=None, gateway_extra=()):
        self.procs = []
        self.root = root
        admin = ["--admin-listen", "127.0.0.1:0"]
        where = ["--storage", storage] if storage else ["--root", root]
        if mode == "all":
            log = os.path.join(work, "all.log")
            self.procs.append(start(binary, log, [
                "--target=all", *where, "--listen", "127.0.0.1:0", *admin, *extra], env))
            self.url = "http://" + announced(log, "gateway HTTP")
            return
        log = os.path.join(work, "fileio.log")
        self.procs.append(start(binary, log, [
            "--target=fileio", *where, "--grpc-listen", "127.0.0.1:0", *admin, *extra], env))
        fileio = announced(log, "fileio gRPC")
        log = os.path.join(work, "locks.log")
        self.procs.append(start(binary, log, ["--target=locks", "--grpc-listen", "127.0.0.1:0", *admin]))
        locks = announced(log, "locks gRPC")
        log = os.path.join(work, "gateway.log")
        self.procs.append(start(binary, log, [
            "--target=gateway", "--fileio-url", f"http://{fileio}", "--locks-url", f"http://{locks}",
            "--listen", "127.0.0.1:0", *admin, *gateway_extra]))
        self.url = "http://" + announced(log, "gateway HTTP")

    def pids(self):
        return [p.pid for p in self.procs]

    def stop(self):
        for p in self.procs:
            p.terminate()
        for p in self.procs:
            p.wait(timeout=30)
