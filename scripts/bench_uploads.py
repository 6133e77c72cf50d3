"""One large file sent four ways to the same kubedav, in alternating rounds: one PUT,
TUS in 8 MiB PATCHes (each with its sha1 Upload-Checksum, as tuspy sends them), TUS
without checksums (as tus-js-client sends them), and Nextcloud chunking in 8 MiB
numbered chunks (MKCOL, PUTs, MOVE .file), without and with the whole file's SHA-1 in
the MOVE's OC-Checksum (as rclone's nextcloud vendor sends it). Prints each way's throughput
(MB/s, wall clock of the client), the servers' CPU seconds per GiB, and the peak RSS
of each kubedav process over its RSS before the round (docs/benchmarks.md).

    python3 scripts/bench_uploads.py [BINARY] [--size-mib 1024] [--rounds 3]
        [--modes all,microservices] [--pin] [--s3]

With --s3, kubedav stores into a bucket of versitygw (posix backend, loopback;
scripts/need-versitygw.sh, or KUBEDAV_VERSITYGW): every way then ends as S3 multipart
uploads. The CPU figures are kubedav's; versitygw's are printed beside them.

The client is Python's http.client reading the file in 1 MiB pieces: the same client
for every way, so the ratio is the servers'."""

import argparse
import base64
import hashlib
import http.client
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time

import benchkit

CHUNK = 8 << 20
PIECE = 1 << 20


def rss_kib(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0


class Peak(threading.Thread):
    """The highest RSS each of `pids` reaches while it runs (sampled every 20 ms)."""

    def __init__(self, pids):
        super().__init__(daemon=True)
        self.pids, self.peak, self.running = pids, {p: rss_kib(p) for p in pids}, True
        self.start_rss = dict(self.peak)

    def run(self):
        while self.running:
            for pid in self.pids:
                self.peak[pid] = max(self.peak[pid], rss_kib(pid))
            time.sleep(0.02)

    def growth_mib(self):
        self.running = False
        self.join()
        return max((self.peak[p] - self.start_rss[p]) / 1024 for p in self.pids)


def connect(url):
    host, port = url.removeprefix("http://").split(":")
    return http.client.HTTPConnection(host, int(port), timeout=600)


def send_body(conn, method, path, headers, file, offset, length):
    conn.putrequest(method, path)
    for name, value in headers.items():
        conn.putheader(name, value)
    conn.putheader("Content-Length", str(length))
    conn.endheaders()
    file.seek(offset)
    left = length
    while left:
        piece = file.read(min(PIECE, left))
        conn.send(piece)
        left -= len(piece)
    response = conn.getresponse()
    body = response.read()
    if response.status >= 300:
        sys.exit(f"{method} {path}: {response.status} {body[:200]!r}")
    return response


def put(url, path, size):
    conn = connect(url)
    with open(path, "rb") as f:
        send_body(conn, "PUT", "/put.bin", {}, f, 0, size)


def tus(url, path, size, checksums):
    conn = connect(url)
    meta = "path " + base64.b64encode(b"/tus.bin").decode()
    conn.request("POST", "/.kubedav/uploads/", headers={
        "Tus-Resumable": "1.0.0", "Upload-Length": str(size), "Upload-Metadata": meta})
    response = conn.getresponse()
    response.read()
    if response.status != 201:
        sys.exit(f"POST: {response.status}")
    location = response.getheader("Location")
    with open(path, "rb") as f:
        offset = 0
        while offset < size:
            length = min(CHUNK, size - offset)
            headers = {"Tus-Resumable": "1.0.0", "Upload-Offset": str(offset),
                       "Content-Type": "application/offset+octet-stream"}
            if checksums:
                f.seek(offset)
                digest = hashlib.sha1(f.read(length)).digest()
                headers["Upload-Checksum"] = "sha1 " + base64.b64encode(digest).decode()
            send_body(conn, "PATCH", location, headers, f, offset, length)
            offset += length


# The whole file's SHA-1 for each source path, learnt before the rounds (rclone learns it
# while it reads the file to send it).
WHOLE_SHA1 = {}


def nextcloud(url, path, size, checksum=False):
    conn = connect(url)
    folder = f"/remote.php/dav/uploads/bench/bench-{time.monotonic_ns()}"
    conn.request("MKCOL", folder)
    response = conn.getresponse()
    response.read()
    if response.status != 201:
        sys.exit(f"MKCOL: {response.status}")
    with open(path, "rb") as f:
        offset, number = 0, 1
        while offset < size:
            length = min(CHUNK, size - offset)
            send_body(conn, "PUT", f"{folder}/{number:05}", {}, f, offset, length)
            offset, number = offset + length, number + 1
    headers = {"Destination": f"{url}/nc.bin", "OC-Total-Length": str(size)}
    if checksum:
        headers["OC-Checksum"] = "SHA1:" + WHOLE_SHA1[path]
    conn.request("MOVE", f"{folder}/.file", headers=headers)
    response = conn.getresponse()
    response.read()
    if response.status >= 300:
        sys.exit(f"MOVE .file: {response.status}")


WAYS = {
    "one PUT": lambda url, path, size: put(url, path, size),
    "TUS, 8 MiB, sha1 each": lambda url, path, size: tus(url, path, size, True),
    "TUS, 8 MiB": lambda url, path, size: tus(url, path, size, False),
    "Nextcloud, 8 MiB": nextcloud,
    "Nextcloud, 8 MiB, SHA1": lambda url, path, size: nextcloud(url, path, size, True),
}


def versitygw(work):
    """versitygw on a free loopback port over `work`/s3, with the bucket `bench`: the
    process, and the environment that points kubedav at it."""
    binary = os.environ.get("KUBEDAV_VERSITYGW") or subprocess.run(
        ["bash", os.path.join(benchkit.REPO, "scripts/need-versitygw.sh")],
        check=True, capture_output=True, text=True).stdout.strip()
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    os.makedirs(os.path.join(work, "s3", "bench"))
    proc = subprocess.Popen([binary, "--access", "bench", "--secret", "benchsecret", "--port", f"127.0.0.1:{port}",
                             "posix", os.path.join(work, "s3")], stdout=subprocess.DEVNULL,
                            stderr=open(os.path.join(work, "versitygw.log"), "w"))
    deadline = time.time() + 30
    while time.time() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            break
        except OSError:
            time.sleep(0.05)
    env = dict(os.environ, AWS_ENDPOINT_URL=f"http://127.0.0.1:{port}", AWS_REGION="us-east-1",
               AWS_ACCESS_KEY_ID="bench", AWS_SECRET_ACCESS_KEY="benchsecret")
    return proc, env


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("binary", nargs="?", default=os.path.join(benchkit.REPO, "target/release/kubedav"))
    parser.add_argument("--size-mib", type=int, default=1024)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--modes", default="all,microservices")
    parser.add_argument("--pin", action="store_true")
    parser.add_argument("--s3", action="store_true", help="store into a bucket of versitygw")
    args = parser.parse_args()
    if args.pin:
        benchkit.pin_servers()
    size = args.size_mib << 20
    work = tempfile.mkdtemp(prefix="bench-uploads-")
    source = os.path.join(work, "source.bin")
    with open(source, "wb") as f:
        for _ in range(args.size_mib):
            f.write(os.urandom(1 << 20))
    with open(source, "rb") as f:
        WHOLE_SHA1[source] = hashlib.file_digest(f, "sha1").hexdigest()
    s3, env = versitygw(work) if args.s3 else (None, None)
    where = "in a bucket of versitygw" if args.s3 else "on a volume"
    print(f"{args.size_mib} MiB, {args.rounds} rounds, alternating, {where}; binary {args.binary}")
    for mode in args.modes.split(","):
        root = os.path.join(work, f"root-{mode}")
        os.makedirs(root)
        storage = f"s3://bench/{mode}" if args.s3 else None
        # No versions kept: every round overwrites the same four files, and keeping the
        # old contents would fill the disk with rounds × ways GiB.
        kubedav = benchkit.Kubedav(args.binary, mode, work, root, extra=("--versions-max", "0"),
                                   storage=storage, env=env)
        results = {way: [] for way in WAYS}
        s3_cpu = {way: [] for way in WAYS}
        try:
            for _ in range(args.rounds):
                for way, run in WAYS.items():
                    pids = kubedav.pids()
                    peak = Peak(pids)
                    peak.start()
                    cpu = benchkit.cpu_seconds(pids)
                    s3_before = benchkit.cpu_seconds([s3.pid]) if s3 else 0
                    started = time.monotonic()
                    run(kubedav.url, source, size)
                    seconds = time.monotonic() - started
                    cpu = benchkit.cpu_seconds(pids) - cpu
                    if s3:
                        s3_cpu[way].append((benchkit.cpu_seconds([s3.pid]) - s3_before) / (size / (1 << 30)))
                    results[way].append((size / seconds / 1e6, cpu / (size / (1 << 30)), peak.growth_mib()))
        finally:
            kubedav.stop()
        print(f"\n{mode}:")
        s3_column = f" {'S3 CPU s/GiB':>13}" if s3 else ""
        print(f"{'way':<24} {'MB/s (median, range)':<26} {'CPU s/GiB':>10} {'RSS growth MiB':>15} {'vs PUT':>7}"
              + s3_column)
        put_median = sorted(r[0] for r in results["one PUT"])[args.rounds // 2]
        for way, rows in results.items():
            rates = sorted(r[0] for r in rows)
            median = rates[args.rounds // 2]
            cpu = sorted(r[1] for r in rows)[args.rounds // 2]
            rss = max(r[2] for r in rows)
            s3_figure = f" {sorted(s3_cpu[way])[args.rounds // 2]:13.2f}" if s3 else ""
            print(f"{way:<24} {median:7.1f} ({rates[0]:.1f}-{rates[-1]:.1f}){'':<8} {cpu:10.2f} {rss:15.1f} "
                  f"{median / put_median:7.2f}x" + s3_figure)
    if s3:
        s3.terminate()
        s3.wait(timeout=30)
    # Several GiB per mode: the disk is not this run's to keep.
    shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
