#!/usr/bin/env python3
"""What each kind of credential costs per request, against no authentication, in one run.

    python3 scripts/bench_credentials.py [BINARY] [--rounds 3] [--seconds 5] [--pin]

Two all-in-one deployments over the same files: one without authentication, one with a
users file, app passwords and a real OpenID provider (panva's oidc-provider,
services/testkit/idp/idp.mjs, which scripts/need-oidc-provider.sh installs). Measured in
alternating rounds with wrk: GET 1 KiB and PROPFIND Depth 0, authenticated by a cached
htpasswd password, an app password, a cached bearer token, and nothing (the first
deployment). Then what an unauthenticated attacker's bogus tokens cost: a real token
with its signature changed (a full signature check, refused) and one whose signature is
short (refused by its length); the
deployment never locks an address out (--auth-max-failures-per-address 0), so this is
the cost per request of the worst case, many addresses at once. Printed per round:
requests/s and the CPU time (utime + stime of the deployment's processes) per request;
then each kind's CPU over no authentication's, median of the paired rounds (goal: at
most 1.1).
"""

import argparse
import base64
import json
import os
import statistics
import subprocess
import tempfile
import time
import urllib.request

import benchkit
import idp_token
from benchkit import PEERS, REPO, Kubedav, cpu_seconds

SECRET_KEY = "a bench key of more than thirty-two bytes, for app passwords"


def start_idp(work):
    """The test OpenID provider on a free port; (process, issuer)."""
    modules = subprocess.run(["bash", os.path.join(REPO, "scripts", "need-oidc-provider.sh")],
                             check=True, capture_output=True, text=True).stdout.strip()
    script = os.path.join(modules, "idp.mjs")
    with open(os.path.join(REPO, "services", "testkit", "idp", "idp.mjs"), "rb") as source:
        with open(script, "wb") as copy:
            copy.write(source.read())
    key = subprocess.run(["node", script, "genkey", "bench"], check=True, capture_output=True, text=True).stdout
    keys = os.path.join(work, "keys.json")
    with open(keys, "w") as f:
        f.write('{"keys": [%s]}' % key.strip())
    accounts = os.path.join(work, "accounts.json")
    with open(accounts, "w") as f:
        json.dump({"accounts": [{"login": "alice", "password": "pw", "sub": "u-alice", "name": "Alice",
                                 "groups": ["team"]}]}, f)
    import socket
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    env = dict(os.environ, IDP_PORT=str(port), IDP_KEYS=keys, IDP_ACCOUNTS=accounts, IDP_TOKEN_TTL="86400")
    process = subprocess.Popen(["node", script], env=env, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    line = process.stdout.readline()
    if not line.startswith("listening on"):
        raise SystemExit(f"the OpenID provider did not start: {line}")
    return process, f"http://127.0.0.1:{port}"


def app_password(url, auth):
    request = urllib.request.Request(f"{url}/.kubedav/app-passwords", method="POST",
                                     data=json.dumps({"name": "bench"}).encode(),
                                     headers={"Authorization": auth, "X-Kubedav-Request": "1",
                                              "Content-Type": "application/json"})
    return json.loads(urllib.request.urlopen(request).read())["password"]


def basic(user, password):
    return "Basic " + base64.b64encode(f"{user}:{password}".encode()).decode()


WORKLOADS = [
    ("GET 1 KiB", "/1k.bin", []),
    ("PROPFIND Depth 0", "/1k.bin", ["-s", os.path.join(PEERS, "propfind.lua")]),
]


def measure(deployment, path, args, authorization, seconds, refused):
    """One wrk run: (requests/s, µs of CPU per request); `refused`: every answer must be
    a refusal (a bogus token's 401)."""
    headers = ["-H", f"Authorization: {authorization}"] if authorization else []
    before = cpu_seconds(deployment.pids())
    requests, rate = benchkit.wrk(deployment.url + path, 16, seconds, [*headers, *args], {"DEPTH": "0"}, refused)
    used = cpu_seconds(deployment.pids()) - before
    return rate, used / max(requests, 1) * 1e6


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("binary", nargs="?", default=os.path.join(REPO, "target", "dist", "kubedav"))
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--seconds", type=int, default=5)
    parser.add_argument("--pin", action="store_true", help="servers on the last CPU, wrk on the others")
    options = parser.parse_args()
    pinned = ""
    if options.pin:
        servers, load = benchkit.pin_servers()
        pinned = f"; servers on CPU {sorted(servers)}, wrk on CPU {sorted(load)}"
    print(f"wrk -t2 -c16, {options.seconds} s per run, {options.rounds} alternating rounds; "
          f"CPU = utime+stime of the deployment's processes per request{pinned}")
    with tempfile.TemporaryDirectory() as work:
        idp, issuer = start_idp(work)
        deployments = {}
        try:
            for name in ("open", "authenticated"):
                root = os.path.join(work, name, "root")
                os.makedirs(root)
                with open(os.path.join(root, "1k.bin"), "wb") as f:
                    f.write(os.urandom(1024))
                extra = ["--allow-unauthenticated"]
                if name == "authenticated":
                    users = os.path.join(work, name, "users")
                    subprocess.run([options.binary, "passwd", users, "carol"], input="bench-password\n",
                                   text=True, check=True, capture_output=True)
                    extra = ["--users-file", users, "--oidc-issuer", issuer, "--secret-key", SECRET_KEY,
                             "--auth-max-failures-per-address", "0", "--auth-max-failures", "0"]
                deployments[name] = Kubedav(options.binary, "all", os.path.join(work, name), root, extra=extra)
            url = deployments["authenticated"].url
            token = None
            for _ in range(100):
                try:
                    token = idp_token.token(issuer, "alice", "pw")
                    break
                except Exception:
                    time.sleep(0.1)
            password = basic("carol", "bench-password")
            app = basic("carol", app_password(url, password))
            signature = token.rsplit(".", 1)[1]
            flipped = ("A" if signature[10] != "A" else "B")
            forged = token[: -len(signature)] + signature[:10] + flipped + signature[11:]
            kinds = {
                "no auth": ("open", None),
                "htpasswd (cached)": ("authenticated", password),
                "app password": ("authenticated", app),
                "bearer (cached)": ("authenticated", f"Bearer {token}"),
                "bogus token: forged signature": ("authenticated", f"Bearer {forged}"),
                "bogus token: short signature": ("authenticated", "Bearer eyJhbGciOiJSUzI1NiJ9.e30.c2ln"),
            }
            ratios = {}
            for workload, path, args in WORKLOADS:
                figures = {kind: [] for kind in kinds}
                for round_ in range(options.rounds):
                    order = list(kinds) if round_ % 2 == 0 else list(reversed(list(kinds)))
                    for kind in order:
                        deployment, authorization = kinds[kind]
                        figures[kind].append(measure(deployments[deployment], path, args, authorization,
                                                     options.seconds, kind.startswith("bogus")))
                for kind in kinds:
                    rates = " / ".join(f"{r:7.0f}" for r, _ in figures[kind])
                    cpus = " / ".join(f"{c:6.1f}" for _, c in figures[kind])
                    print(f"{workload:18} {kind:31} r/s {rates}   µs CPU/req {cpus}")
                    if kind != "no auth":
                        ratios[(workload, kind)] = [
                            ours[1] / theirs[1] for ours, theirs in zip(figures[kind], figures["no auth"])]
            for (workload, kind), paired in ratios.items():
                print(f"{workload:18} {kind:31} over no auth: median {statistics.median(paired):.3f}× "
                      f"({' / '.join(f'{r:.3f}' for r in paired)})")
        finally:
            for deployment in deployments.values():
                deployment.stop()
            idp.terminate()
            idp.wait(timeout=10)


if __name__ == "__main__":
    main()
