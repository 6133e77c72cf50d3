#!/usr/bin/env python3
"""What a client can cost the gateway at most, measured (docs/security.md, "The attacker
at the Ingress"). Starts kubedav all-in-one with authentication on free ports and prints:

  1. memory per connection: idle sockets, and sockets that sent all but the end of a
     64 KiB request head (the largest hyper buffers), as RSS growth per connection;
  2. CPU per unauthenticated request: wrk on a GET answered 401, server CPU time
     (utime+stime) per request (credentials are checked before any body is read);
  3. an authenticated read-only user's costliest requests: a PROPFIND body of 20,000
     names (refused: at most 512), and the worst PROPFIND accepted, 512 names in a
     1 KB namespace on a Depth 1 listing of 1,000 files: CPU per request, response size,
     and the gateway's peak RSS;
  4. issue 56's goal: memory per idle keep-alive connection after one GET, at 1,000 and
     10,000 connections, in both modes (the gateway process's RSS growth per
     connection; without authentication), against the goal of 8 KiB, met or NOT met.

usage: bench_edge.py KUBEDAV_BINARY
"""

import base64
import os
import re
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request

CLK = os.sysconf("SC_CLK_TCK")


def cpu_seconds(pid):
    fields = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / CLK


def status_kib(pid, field):
    for line in open(f"/proc/{pid}/status"):
        if line.startswith(field + ":"):
            return int(line.split()[1])
    return 0


def start(binary, work, extra):
    users = os.path.join(work, "users")
    subprocess.run([binary, "passwd", users, "reader"], input=b"reader-pw\n", check=True,
                   stdout=subprocess.DEVNULL)
    root = os.path.join(work, "root")
    os.makedirs(os.path.join(root, "dir"), exist_ok=True)
    for i in range(1000):
        with open(os.path.join(root, "dir", f"f{i:04}.txt"), "w") as f:
            f.write("x")
    log = open(os.path.join(work, "kubedav.log"), "w+")
    proc = subprocess.Popen(
        [binary, "--target=all", "--root", root, "--listen", "127.0.0.1:0",
         "--admin-listen", "127.0.0.1:0", "--users-file", users,
         "--read-only-users", "reader"] + extra,
        stdout=subprocess.DEVNULL, stderr=log, env={**os.environ, "RUST_LOG": "warn,kubedav=info"})
    deadline = time.time() + 30
    while time.time() < deadline:
        log.seek(0)
        m = re.search(r"gateway HTTP listening on (\S+)", log.read())
        if m:
            return proc, m.group(1)
        time.sleep(0.1)
    raise SystemExit("kubedav did not start:\n" + open(os.path.join(work, "kubedav.log")).read())


def connections_cost(pid, addr, count, opening, answered=False):
    """RSS growth of process `pid` per connection, in KiB: `count` sockets that sent
    `opening` and, when `answered`, read its whole answer (a keep-alive connection left
    idle after one GET of a one-byte file)."""
    host, port = addr.rsplit(":", 1)
    time.sleep(0.5)
    before = status_kib(pid, "VmRSS")
    sockets = []
    for _ in range(count):
        s = socket.create_connection((host, int(port)))
        if opening:
            s.sendall(opening)
        sockets.append(s)
    for s in sockets if answered else ():
        answer = b""
        while b"\r\n\r\n" not in answer or not answer.endswith(b"x"):
            chunk = s.recv(4096)
            if not chunk:
                raise SystemExit("a keep-alive connection was closed after its GET")
            answer += chunk
    time.sleep(1.0)
    after = status_kib(pid, "VmRSS")
    for s in sockets:
        s.close()
    time.sleep(0.5)
    return (after - before) / count


def keepalive_goal(binary):
    """Issue 56's idle keep-alive goal, both modes."""
    import resource
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (max(soft, min(hard, 65536)), hard))
    limits = ["--max-connections", "20000", "--max-connections-per-address", "20000"]
    print("idle keep-alive connections after one GET (issue 56's goal: at most 8 KiB each per gateway)")
    for mode in ("all", "microservices"):
        with tempfile.TemporaryDirectory(prefix="kubedav-keepalive-") as work:
            root = os.path.join(work, "root")
            os.makedirs(root)
            with open(os.path.join(root, "small.txt"), "w") as f:
                f.write("x")
            procs = []

            def launch(name, args):
                log = open(os.path.join(work, f"{name}.log"), "w+")
                procs.append(subprocess.Popen([binary, *args, "--admin-listen", "127.0.0.1:0"],
                                              stdout=subprocess.DEVNULL, stderr=log))
                deadline = time.time() + 30
                while time.time() < deadline:
                    log.seek(0)
                    m = re.search(r"(?:gateway HTTP|fileio gRPC|locks gRPC) listening on (\S+)", log.read())
                    if m:
                        return m.group(1)
                    time.sleep(0.1)
                raise SystemExit(f"kubedav --{name} did not start")
            try:
                if mode == "all":
                    addr = launch("all", ["--target=all", "--root", root, "--listen", "127.0.0.1:0", *limits])
                else:
                    fileio = launch("fileio", ["--target=fileio", "--root", root, "--grpc-listen", "127.0.0.1:0"])
                    locks = launch("locks", ["--target=locks", "--grpc-listen", "127.0.0.1:0"])
                    addr = launch("gateway", ["--target=gateway", "--fileio-url", f"http://{fileio}",
                                              "--locks-url", f"http://{locks}", "--markdown-url", "",
                                              "--listen", "127.0.0.1:0", *limits])
                gateway = procs[-1].pid
                for count in (1000, 10000):
                    kib = connections_cost(gateway, addr, count, b"GET /small.txt HTTP/1.1\r\nHost: x\r\n\r\n", answered=True)
                    verdict = "met" if kib <= 8 else "NOT met"
                    print(f"  {mode:13} {count:6,} connections  {kib:6.1f} KiB each   <= 8   {verdict}")
            finally:
                for p in procs:
                    p.terminate()
                    p.wait(timeout=30)


def wrk(url, seconds, script=None, headers=()):
    cmd = ["wrk", "-t1", "-c16", f"-d{seconds}s", "--latency"]
    for h in headers:
        cmd += ["-H", h]
    if script:
        cmd += ["-s", script]
    out = subprocess.run(cmd + [url], capture_output=True, text=True, timeout=seconds + 30).stdout
    requests = int(re.search(r"(\d+) requests in", out).group(1))
    return requests, out


def cpu_per_request(pid, url, seconds, script=None, headers=()):
    start_cpu = cpu_seconds(pid)
    requests, _ = wrk(url, seconds, script, headers)
    used = cpu_seconds(pid) - start_cpu
    return requests / seconds, used / max(requests, 1) * 1e6


def lua_body(path, method, headers, body):
    f = tempfile.NamedTemporaryFile("w", suffix=".lua", delete=False)
    lines = [f'wrk.method = "{method}"', f'wrk.body = [[{body}]]']
    for k, v in headers.items():
        lines.append(f'wrk.headers["{k}"] = "{v}"')
    f.write("\n".join(lines) + "\n")
    f.close()
    return f.name


def main():
    binary = sys.argv[1]
    with tempfile.TemporaryDirectory(prefix="kubedav-edge-") as work:
        proc, addr = start(binary, work, ["--max-connections", "8192",
                                          "--max-connections-per-address", "8192"])
        try:
            pid, base = proc.pid, f"http://{addr}"
            print("edge costs, kubedav --target=all with authentication, one gateway process")
            idle = connections_cost(pid, addr, 2000, b"")
            head = b"GET / HTTP/1.1\r\nHost: x\r\nX-Fill: " + b"a" * (60 * 1024)
            partial = connections_cost(pid, addr, 500, head)
            print(f"  memory per idle connection               {idle:8.1f} KiB  (2,000 silent sockets)")
            print(f"  memory per connection with a 60 KiB head {partial:8.1f} KiB  (500 sockets, head unfinished)")
            rate, cpu = cpu_per_request(pid, f"{base}/", 5)
            print(f"  unauthenticated GET, 401                 {cpu:8.1f} us CPU/request ({rate:,.0f} requests/s)")
            auth = "Authorization: Basic " + base64.b64encode(b"reader:reader-pw").decode()
            biggest = ("<D:propfind xmlns:D=\"DAV:\"><D:prop>" + "<D:a/>" * 19_990 +
                       "</D:prop></D:propfind>")
            script = lua_body("/", "PROPFIND", {"Depth": "0", "Content-Type": "application/xml"}, biggest)
            rate, cpu = cpu_per_request(pid, f"{base}/", 5, script, [auth])
            print(f"  read-only user, 120 KB PROPFIND refused  {cpu:8.1f} us CPU/request ({rate:,.0f} requests/s; 20,000 names, over the 512 allowed)")
            dense = ("<D:propfind xmlns:D=\"DAV:\"><D:prop><v>" +
                     "<e a=\"1\" b=\"2\" c=\"3\" d=\"4\"/>" * 19_990 + "</v></D:prop></D:propfind>")
            script = lua_body("/", "PROPFIND", {"Depth": "0", "Content-Type": "application/xml"}, dense)
            rate, cpu = cpu_per_request(pid, f"{base}/", 5, script, [auth])
            print(f"  read-only user, {len(dense) // 1024} KiB PROPFIND refused    {cpu:8.1f} us CPU/request ({rate:,.0f} requests/s; 20,000 elements with 80,000 attributes: refused at the 20,001st attribute)")
            names = "".join(f"<z:n{i:04}/>" for i in range(512))
            worst = (f"<D:propfind xmlns:D=\"DAV:\" xmlns:z=\"urn:{'k' * 1000}\"><D:prop>{names}"
                     "</D:prop></D:propfind>")
            request = urllib.request.Request(f"{base}/dir/", data=worst.encode(), method="PROPFIND",
                                             headers={"Depth": "1", "Authorization": auth.split(": ", 1)[1]})
            size = len(urllib.request.urlopen(request, timeout=60).read())
            script = lua_body("/dir/", "PROPFIND", {"Depth": "1"}, worst)
            before_peak = status_kib(pid, "VmRSS")
            rate, cpu = cpu_per_request(pid, f"{base}/dir/", 5, script, [auth])
            peak = status_kib(pid, "VmHWM")
            print(f"  read-only user, worst PROPFIND Depth 1   {cpu / 1000:8.1f} ms CPU/request ({rate:,.1f} requests/s;"
                  f" 512 names in a 1 KB namespace over 1,000 files: {size / 1e6:.1f} MB, {size / 1001:,.0f} B per entry)")
            print(f"  gateway RSS {before_peak / 1024:.0f} MiB before those, peak {peak / 1024:.0f} MiB")
        finally:
            proc.terminate()
            proc.wait(timeout=30)
    keepalive_goal(binary)


if __name__ == "__main__":
    main()
