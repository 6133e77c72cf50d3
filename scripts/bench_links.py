#!/usr/bin/env python3
"""What a public link costs per request, against the same GET with an app password, in
one run (issue 53).

    python3 scripts/bench_links.py [BINARY] [--rounds 3] [--seconds 5] [--pin]

One all-in-one deployment with a users file, app passwords and a policy giving alice a
home. alice puts 1 KiB in /home/alice/pub, makes an app password, a read link to the
folder, and one with a password. Measured in alternating rounds with wrk: GET 1 KiB
with the app password, through the link, and through the password link (Basic with its
password, remembered after the first check). Printed per round: requests/s and the CPU
time (utime + stime of the deployment's processes) per request; then each link's CPU
over the app password's, median of the paired rounds (goal: at most 1.1).
"""

import argparse
import base64
import json
import os
import statistics
import subprocess
import tempfile
import urllib.request

import benchkit
from benchkit import REPO, Kubedav, cpu_seconds

SECRET_KEY = "a bench key of more than thirty-two bytes, for app passwords"


def basic(user, password):
    return "Basic " + base64.b64encode(f"{user}:{password}".encode()).decode()


def call(url, method, authorization, body=None, json_body=None):
    headers = {"Authorization": authorization, "X-Kubedav-Request": "1"}
    data = body
    if json_body is not None:
        headers["Content-Type"] = "application/json"
        data = json.dumps(json_body).encode()
    request = urllib.request.Request(url, method=method, data=data, headers=headers)
    return urllib.request.urlopen(request).read()


def measure(deployment, url, authorization, seconds):
    """One wrk run: (requests/s, µs of CPU per request)."""
    headers = ["-H", f"Authorization: {authorization}"] if authorization else []
    before = cpu_seconds(deployment.pids())
    requests, rate = benchkit.wrk(url, 16, seconds, headers, {"DEPTH": "0"}, False)
    used = cpu_seconds(deployment.pids()) - before
    return rate, used / max(requests, 1) * 1e6


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("binary", nargs="?", default=os.path.join(REPO, "target", "dist", "kubedav"))
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--seconds", type=int, default=5)
    parser.add_argument("--pin", action="store_true", help="the server on the last CPU, wrk on the others")
    options = parser.parse_args()
    pinned = ""
    if options.pin:
        servers, load = benchkit.pin_servers()
        pinned = f"; server on CPU {sorted(servers)}, wrk on CPU {sorted(load)}"
    print(f"wrk -t2 -c16, {options.seconds} s per run, {options.rounds} alternating rounds; "
          f"CPU = utime+stime of the deployment's processes per request{pinned}")
    with tempfile.TemporaryDirectory() as work:
        root = os.path.join(work, "root")
        os.makedirs(root)
        users = os.path.join(work, "users")
        subprocess.run([options.binary, "passwd", users, "alice"], input="bench-password\n",
                       text=True, check=True, capture_output=True)
        policy = os.path.join(work, "policy.yaml")
        with open(policy, "w") as f:
            f.write("homes: /home/{user}\n")
        extra = ["--users-file", users, "--secret-key", SECRET_KEY, "--policy", policy,
                 "--auth-max-failures-per-address", "0", "--auth-max-failures", "0"]
        deployment = Kubedav(options.binary, "all", work, root, extra=extra)
        try:
            url = deployment.url
            alice = basic("alice", "bench-password")
            call(f"{url}/home/alice/pub/", "MKCOL", alice)
            call(f"{url}/home/alice/pub/1k.bin", "PUT", alice, body=os.urandom(1024))
            made = json.loads(call(f"{url}/.kubedav/app-passwords", "POST", alice, json_body={"name": "bench"}))
            app = basic("alice", made["password"])
            link = json.loads(call(f"{url}/.kubedav/links", "POST", alice,
                                   json_body={"path": "/home/alice/pub", "permission": "read"}))["url"]
            locked = json.loads(call(f"{url}/.kubedav/links", "POST", alice,
                                     json_body={"path": "/home/alice/pub", "permission": "read",
                                                "password": "link-password"}))["url"]
            kinds = {
                "app password": (f"{url}/home/alice/pub/1k.bin", app),
                "link": (f"{url}{link}1k.bin", None),
                "link with a password": (f"{url}{locked}1k.bin", basic("anyone", "link-password")),
            }
            figures = {kind: [] for kind in kinds}
            for round_ in range(options.rounds):
                order = list(kinds) if round_ % 2 == 0 else list(reversed(list(kinds)))
                for kind in order:
                    target, authorization = kinds[kind]
                    figures[kind].append(measure(deployment, target, authorization, options.seconds))
            for kind in kinds:
                rates = " / ".join(f"{r:7.0f}" for r, _ in figures[kind])
                cpus = " / ".join(f"{c:6.1f}" for _, c in figures[kind])
                print(f"GET 1 KiB  {kind:22} r/s {rates}   µs CPU/req {cpus}")
            for kind in ("link", "link with a password"):
                paired = [ours[1] / theirs[1] for ours, theirs in zip(figures[kind], figures["app password"])]
                print(f"GET 1 KiB  {kind:22} over an app password: median {statistics.median(paired):.3f}× "
                      f"({' / '.join(f'{r:.3f}' for r in paired)})")
        finally:
            deployment.stop()


if __name__ == "__main__":
    main()
