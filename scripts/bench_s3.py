#!/usr/bin/env python3
"""make bench, object storage: kubedav on S3-compatible storage against its peer.

In one run, on one versitygw (posix backend, loopback), each in its own prefix of one
bucket:

  kubedav all-in-one      --target=all --storage s3://bench/kd-all
  kubedav microservices   fileio --storage s3://bench/kd-micro, locks, gateway
  kubedav, N replicas     N fileio replicas (--replicas, default 1,2,4) registered in a
                          redis-server (--registry), locks on it, one gateway
  rclone                  rclone serve webdav on :s3 ...:bench/rclone
and, for scale, kubedav all-in-one on a volume (--root).

For each: GET 1 KiB and GET 1 MiB (wrk), PROPFIND Depth 1 allprop on 1,000 files and
Depth 0 on one (wrk), PUT 4 KiB (wrk, replacing files: the write whose latency
coherence adds to; its median latency is printed too) and PUT 10 MiB (sequential curl
uploads). Each figure is the
median of ROUNDS alternating rounds (the order of the servers turns each round), with
the server's CPU time per request (the VM is shared and noisy: CPU per request is the
figure that survives it), the S3 server's CPU per request, and S3 requests per WebDAV
request, counted in versitygw's request log. Then each kubedav's fileio peak resident
set while a 1 GiB PUT and GET stream through it.

Usage: scripts/bench_s3.py [--rounds 3] [--seconds 5] [--bin target/dist/kubedav]
Needs wrk, curl and rclone (make bench installs them); versitygw from
scripts/need-versitygw.sh.
"""

import argparse
import os
import re
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request

from ports import free_port

KEY, SECRET = "bench-key", "bench-secret-key"
TICK = os.sysconf("SC_CLK_TCK")
PROPFIND_LUA = """wrk.method = "PROPFIND"
wrk.headers["Depth"] = os.getenv("DEPTH") or "1"
wrk.headers["Content-Type"] = 'application/xml; charset="utf-8"'
wrk.body = '<?xml version="1.0" encoding="utf-8"?><D:propfind xmlns:D="DAV:"><D:allprop/></D:propfind>'
"""




def wait_port(port, what, seconds=30):
    deadline = time.time() + seconds
    while time.time() < deadline:
        with socket.socket() as s:
            if s.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.05)
    sys.exit(f"bench_s3: {what} did not listen on {port}")


def announced(log, what, seconds=30):
    deadline = time.time() + seconds
    while time.time() < deadline:
        with open(log) as f:
            m = re.search(rf"{what} listening on (\S+)", f.read())
        if m:
            return m.group(1)
        time.sleep(0.05)
    sys.exit(f"bench_s3: no '{what}' in {log}:\n" + open(log).read())


def tree(pid):
    """pid and every descendant."""
    out = [pid]
    try:
        children = open(f"/proc/{pid}/task/{pid}/children").read().split()
    except OSError:
        return out
    for child in children:
        out += tree(int(child))
    return out


def cpu_seconds(pids):
    total = 0
    for root in pids:
        for pid in tree(root):
            try:
                for task in os.listdir(f"/proc/{pid}/task"):
                    fields = open(f"/proc/{pid}/task/{task}/stat").read().rsplit(")", 1)[1].split()
                    total += int(fields[11]) + int(fields[12])
            except OSError:
                pass
    return total / TICK


def peak_mib(pid):
    for line in open(f"/proc/{pid}/status"):
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return 0.0


class Bench:
    def __init__(self, args):
        self.args = args
        self.work = tempfile.mkdtemp(prefix="kubedav-bench-s3.")
        self.procs = []
        self.s3_port = free_port()
        os.makedirs(f"{self.work}/s3/bench")
        self.s3_log = f"{self.work}/versitygw.log"
        vgw = self.spawn(
            [args.versitygw, "--access", KEY, "--secret", SECRET, "--port", f"127.0.0.1:{self.s3_port}",
             "posix", f"{self.work}/s3"],
            self.s3_log,
        )
        self.s3_pid = vgw.pid
        wait_port(self.s3_port, "versitygw")
        self.s3_env = dict(os.environ, AWS_ENDPOINT_URL=f"http://127.0.0.1:{self.s3_port}", AWS_REGION="us-east-1",
                           AWS_ACCESS_KEY_ID=KEY, AWS_SECRET_ACCESS_KEY=SECRET)

    def spawn(self, argv, log, env=None):
        proc = subprocess.Popen(argv, stdout=open(log, "w"), stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                env=env)
        self.procs.append(proc)
        return proc

    def kubedav(self, name, args, env=None):
        log = f"{self.work}/{name}.log"
        proc = self.spawn([self.args.bin, "--admin-listen", "127.0.0.1:0"] + args, log, env)
        return proc, log

    def start_servers(self):
        servers = []
        proc, log = self.kubedav("kd-all", ["--target=all", "--storage", "s3://bench/kd-all", "--listen",
                                            "127.0.0.1:0"], self.s3_env)
        servers.append({"name": "kubedav all-in-one (S3)", "url": "http://" + announced(log, "gateway HTTP"),
                        "pids": [proc.pid], "fileio": proc.pid})
        fileio, flog = self.kubedav("kd-fileio", ["--target=fileio", "--storage", "s3://bench/kd-micro",
                                                  "--grpc-listen", "127.0.0.1:0"], self.s3_env)
        locks, llog = self.kubedav("kd-locks", ["--target=locks", "--grpc-listen", "127.0.0.1:0"])
        gateway, glog = self.kubedav("kd-gateway", [
            "--target=gateway", "--listen", "127.0.0.1:0",
            "--fileio-url", "http://" + announced(flog, "fileio gRPC"),
            "--locks-url", "http://" + announced(llog, "locks gRPC")])
        servers.append({"name": "kubedav microservices (S3)", "url": "http://" + announced(glog, "gateway HTTP"),
                        "pids": [fileio.pid, locks.pid, gateway.pid], "fileio": fileio.pid})
        for count in self.args.replicas:
            servers.append(self.replicated(count))
        port = free_port()
        env = {k: v for k, v in os.environ.items() if k != "AWS_CA_BUNDLE"}
        remote = (f":s3,provider=Other,access_key_id={KEY},secret_access_key={SECRET},"
                  f"endpoint='http://127.0.0.1:{self.s3_port}':bench/rclone")
        rclone = self.spawn(["rclone", "--config", "/dev/null", "serve", "webdav", remote, "--addr",
                             f"127.0.0.1:{port}"], f"{self.work}/rclone.log", env)
        wait_port(port, "rclone")
        servers.append({"name": "rclone serve webdav (S3)", "url": f"http://127.0.0.1:{port}",
                        "pids": [rclone.pid], "fileio": None})
        os.makedirs(f"{self.work}/volume")
        proc, log = self.kubedav("kd-volume", ["--target=all", "--root", f"{self.work}/volume", "--listen",
                                               "127.0.0.1:0"])
        servers.append({"name": "kubedav all-in-one (volume)", "url": "http://" + announced(log, "gateway HTTP"),
                        "pids": [proc.pid], "fileio": proc.pid, "volume": True})
        return servers

    def replicated(self, count):
        """kubedav in microservices mode with `count` fileio replicas on one prefix,
        registered in a Redis of their own, locks there too (registered as well), one
        gateway."""
        name = f"kd-{count}x"
        redis_port = free_port()
        redis = self.spawn(["redis-server", "--port", str(redis_port), "--bind", "127.0.0.1", "--save", "",
                            "--appendonly", "no"], f"{self.work}/{name}-redis.log")
        wait_port(redis_port, "redis-server")
        url = f"redis://127.0.0.1:{redis_port}/0"
        replicas = []
        for i in range(count):
            proc, log = self.kubedav(f"{name}-fileio{i}", [
                "--target=fileio", "--storage", f"s3://bench/{name}", "--grpc-listen", "127.0.0.1:0",
                "--registry", url], self.s3_env)
            replicas.append((proc, log))
        locks, llog = self.kubedav(f"{name}-locks", ["--target=locks", "--grpc-listen", "127.0.0.1:0",
                                                     "--lock-store", url, "--registry", url])
        gateway, glog = self.kubedav(f"{name}-gateway", [
            "--target=gateway", "--listen", "127.0.0.1:0", "--registry", url,
            "--fileio-url", "http://" + announced(replicas[0][1], "fileio gRPC"),
            "--locks-url", "http://" + announced(llog, "locks gRPC")])
        for log, what in [(log, "fileio admin") for _, log in replicas] + [(llog, "locks admin")]:
            admin = announced(log, what)
            deadline = time.time() + 20
            while self.request("GET", f"http://{admin}/readyz") != 200:
                if time.time() > deadline:
                    sys.exit(f"bench_s3: {name}: a replica never became ready ({what})")
                time.sleep(0.05)
        return {"name": f"kubedav microservices, {count} fileio {'replica' if count == 1 else 'replicas'} "
                        "(S3, registry)",
                "url": "http://" + announced(glog, "gateway HTTP"),
                "pids": [p.pid for p, _ in replicas] + [locks.pid, gateway.pid, redis.pid],
                "fileio": replicas[0][0].pid}

    def s3_requests(self):
        with open(self.s3_log, errors="replace") as f:
            return sum(1 for line in f if " | vgw | " in line)

    def request(self, method, url, body=None, headers=None):
        req = urllib.request.Request(url, data=body, method=method, headers=headers or {})
        try:
            with urllib.request.urlopen(req, timeout=120) as response:
                response.read()
                return response.status
        except urllib.error.HTTPError as e:
            return e.code

    def load_fixtures(self, server):
        base = server["url"]
        for path in ["/bench/", "/bench/dir1000/", "/bench/put/"]:
            self.request("MKCOL", base + path)
        self.request("PUT", base + "/bench/1k.bin", os.urandom(1024))
        self.request("PUT", base + "/bench/1m.bin", os.urandom(1 << 20))
        small = b"small file for the PROPFIND Depth 1 test".ljust(100, b".")
        for i in range(1, 1001):
            status = self.request("PUT", f"{base}/bench/dir1000/f{i:04}.txt", small)
            if status not in (201, 204):
                sys.exit(f"bench_s3: {server['name']}: PUT fixture -> {status}")

    def wrk(self, url, extra, env=None):
        """Requests made, and their median latency in ms."""
        out = subprocess.run(
            ["wrk", "-t2", f"-c{self.args.conns}", f"-d{self.args.seconds}s", "--timeout", "10s", "--latency"]
            + extra + [url],
            capture_output=True, text=True, env=env, timeout=self.args.seconds + 60).stdout
        total = int(re.search(r"(\d+) requests in", out).group(1))
        if total == 0:
            sys.exit(f"bench_s3: {url}: no request completed in {self.args.seconds} s\n{out}")
        non2xx = re.search(r"Non-2xx or 3xx responses: (\d+)", out)
        if non2xx:
            sys.exit(f"bench_s3: {url}: {non2xx.group(1)} failed requests\n{out}")
        value, unit = re.search(r"^\s+50%\s+([\d.]+)(us|ms|s)\s*$", out, re.M).groups()
        return total, float(value) * {"us": 0.001, "ms": 1.0, "s": 1000.0}[unit]

    def measure(self, server, op):
        """One figure of `op` on `server`: (throughput, server CPU ms/request, S3 server CPU
        ms/request, S3 requests/request)."""
        base = server["url"]
        cpu0, s3cpu0, s3n0 = cpu_seconds(server["pids"]), cpu_seconds([self.s3_pid]), self.s3_requests()
        started = time.time()
        lua = f"{self.work}/propfind.lua"
        p50 = None
        if op == "PUT 10 MiB":
            body = f"{self.work}/10m.bin"
            count = self.args.puts
            for i in range(count):
                subprocess.run(["curl", "-sf", "-o", "/dev/null", "-T", body, f"{base}/bench/put/f{i}.bin"],
                               check=True, timeout=120)
        elif op == "GET 1 KiB":
            count, p50 = self.wrk(f"{base}/bench/1k.bin", [])
        elif op == "GET 1 MiB":
            count, p50 = self.wrk(f"{base}/bench/1m.bin", [])
        elif op == "PUT 4 KiB":
            count, p50 = self.wrk(base, ["-s", self.args.put_lua], dict(os.environ, PUTDIR="/bench/put/"))
        elif op == "PROPFIND d1":
            count, p50 = self.wrk(f"{base}/bench/dir1000/", ["-s", lua], dict(os.environ, DEPTH="1"))
        elif op == "PROPFIND d0":
            count, p50 = self.wrk(f"{base}/bench/1k.bin", ["-s", lua], dict(os.environ, DEPTH="0"))
        elapsed = time.time() - started
        cpu = (cpu_seconds(server["pids"]) - cpu0) * 1000 / count
        s3cpu = (cpu_seconds([self.s3_pid]) - s3cpu0) * 1000 / count
        s3n = (self.s3_requests() - s3n0) / count
        if op == "PUT 10 MiB":
            rate = count * 10 * (1 << 20) / 1e6 / elapsed
        elif op == "GET 1 MiB":
            rate = count * (1 << 20) / 1e6 / elapsed
        else:
            rate = count / elapsed
        return rate, cpu, s3cpu, s3n, p50

    def streaming_memory(self, server):
        """fileio's peak resident set after a 1 GiB PUT and GET through the server."""
        big = f"{self.work}/1g.bin"
        subprocess.run(["curl", "-sf", "-o", "/dev/null", "-T", big, server["url"] + "/bench/1g.bin"], check=True,
                       timeout=600)
        subprocess.run(["curl", "-sf", "-o", "/dev/null", server["url"] + "/bench/1g.bin"], check=True, timeout=600)
        return peak_mib(server["fileio"])

    def run(self):
        with open(f"{self.work}/propfind.lua", "w") as f:
            f.write(PROPFIND_LUA)
        with open(f"{self.work}/10m.bin", "wb") as f:
            f.write(os.urandom(10 << 20))
        servers = self.start_servers()
        for server in servers:
            self.load_fixtures(server)
        ops = ["GET 1 KiB", "GET 1 MiB", "PUT 4 KiB", "PUT 10 MiB", "PROPFIND d1", "PROPFIND d0"]
        results = {(s["name"], op): [] for s in servers for op in ops}
        for round_ in range(self.args.rounds):
            order = servers[round_ % len(servers):] + servers[:round_ % len(servers)]
            for op in ops:
                for server in order:
                    results[(server["name"], op)].append(self.measure(server, op))
            print(f"round {round_ + 1} of {self.args.rounds} done", file=sys.stderr)
        print(f"Object storage: {self.args.rounds} alternating rounds of {self.args.seconds} s, wrk -t2 "
              f"-c{self.args.conns}, {self.args.puts} sequential PUTs of 10 MiB; medians. versitygw "
              f"(posix) on loopback; CPU is the server's processes' user+system time per request.\n")
        print("| operation | server | throughput | p50 ms | server CPU ms/req | S3 server CPU ms/req | "
              "S3 requests/req |")
        print("|---|---|---|---|---|---|---|")
        for op in ops:
            unit = "MB/s" if op in ("GET 1 MiB", "PUT 10 MiB") else "req/s"
            for server in servers:
                figures = results[(server["name"], op)]
                rate, cpu, s3cpu, s3n = (statistics.median(f[i] for f in figures) for i in range(4))
                p50s = [f[4] for f in figures if f[4] is not None]
                p50 = f"{statistics.median(p50s):.2f}" if p50s else "—"
                s3 = "—" if server.get("volume") else f"{s3n:.2f}"
                s3c = "—" if server.get("volume") else f"{s3cpu:.3f}"
                print(f"| {op} | {server['name']} | {rate:,.1f} {unit} | {p50} | {cpu:.3f} | {s3c} | {s3} |")
        if self.args.gib:
            with open(f"{self.work}/1g.bin", "wb") as f:
                for _ in range(1024):
                    f.write(os.urandom(1 << 20))
            print("\n| fileio peak resident set, 1 GiB PUT then GET | MiB |")
            print("|---|---|")
            for server in servers:
                if server["fileio"]:
                    print(f"| {server['name']} | {self.streaming_memory(server):.1f} |")

    def close(self, keep=False):
        for proc in self.procs:
            proc.kill()
        for proc in self.procs:
            proc.wait()
        if keep:
            print(f"bench_s3: logs kept in {self.work}", file=sys.stderr)
        else:
            shutil.rmtree(self.work, ignore_errors=True)


def main():
    repo = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--bin", default=os.path.join(repo, "target/dist/kubedav"))
    parser.add_argument("--versitygw", default=os.environ.get("KUBEDAV_VERSITYGW"))
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--seconds", type=int, default=5)
    parser.add_argument("--conns", type=int, default=16)
    parser.add_argument("--puts", type=int, default=5)
    parser.add_argument("--replicas", default="1,2,4",
                        help="fileio replica counts of the registered setups, comma-separated ('' for none)")
    parser.add_argument("--no-gib", dest="gib", action="store_false", help="skip the 1 GiB memory figure")
    args = parser.parse_args()
    args.replicas = [int(n) for n in args.replicas.split(",") if n.strip()]
    args.put_lua = os.path.join(repo, "scripts/put4k.lua")
    if not args.versitygw:
        args.versitygw = subprocess.run(["bash", os.path.join(repo, "scripts/need-versitygw.sh")],
                                        capture_output=True, text=True, check=True).stdout.strip()
    bench = Bench(args)
    done = False
    try:
        bench.run()
        done = True
    finally:
        bench.close(keep=not done)


if __name__ == "__main__":
    main()
