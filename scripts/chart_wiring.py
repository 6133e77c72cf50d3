#!/usr/bin/env python3
"""The chart's wiring test: the manifests `helm template` renders, run for real.

The local control plane runs no containers, so this is where the chart's wiring is
proven: for every Deployment and StatefulSet it starts the process the pod would run,
with exactly the args and env the chart renders (Secrets and ConfigMap values resolved,
Secret volumes written to files), rewriting only what a pod has and a laptop has not:
Service host names and listen addresses become 127.0.0.1 on free ports, mount paths
become temporary directories, and the bundled Redis image becomes a local
redis-server. A workload of several replicas (its replicas, or its autoscaler's minimum,
two at most) runs that many processes, each on its own ports and announcing its own
address (status.podIP is 127.0.0.1), sharing the workload's volumes; a
PersistentVolumeClaim is one directory for every workload that mounts it. Then it runs the
chart's `helm test` pod (`kubedav smoke ...`) the same way.

usage: chart_wiring.py MANIFESTS.yaml KUBEDAV_BINARY [EXISTING.yaml...]
(EXISTING: objects the values name but the chart does not render, such as a Secret.)
"""

import base64
import os
import re
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request

import yaml

from ports import free_port




class Manifests:
    def __init__(self, text, binary):
        self.objects = [o for o in yaml.safe_load_all(text) if o]
        self.objects += hook_made_secrets(self.objects, binary)

    def of(self, kind):
        return [o for o in self.objects if o["kind"] == kind]

    def secret(self, name, key):
        for s in self.of("Secret"):
            if s["metadata"]["name"] == name:
                if key in s.get("data", {}):
                    return base64.b64decode(s["data"][key]).decode()
                if key in s.get("stringData", {}):
                    return s["stringData"][key]
        raise SystemExit(f"wiring: the chart references Secret {name} key {key}, which it does not render")

    def config_map(self, name, key):
        for c in self.of("ConfigMap"):
            if c["metadata"]["name"] == name and key in c.get("data", {}):
                return c["data"][key]
        raise SystemExit(f"wiring: the chart references ConfigMap {name} key {key}, which it does not render")


def hook_made_secrets(objects, binary):
    """The Secrets the chart's hook Job (`kubedav ensure-secrets`) makes in a cluster,
    made here from the Job's own arguments: the hook itself is run for real against the
    API server in chart-test.sh's live step."""
    made = []
    for job in (o for o in objects if o["kind"] == "Job"):
        for container in job["spec"]["template"]["spec"]["containers"]:
            args = container.get("args", [])
            if not args or args[0] != "ensure-secrets":
                continue
            for arg in args[1:]:
                if arg.startswith("--users="):
                    password = "wiring-admin-password"
                    with tempfile.TemporaryDirectory() as d:  # kubedav passwd, as the hook hashes
                        subprocess.run([binary, "passwd", f"{d}/users", "admin"], input=password + "\n",
                                       check=True, capture_output=True, text=True)
                        users = open(f"{d}/users").read()
                    data = {"users": users, "username": "admin", "password": password}
                elif arg.startswith("--random="):
                    key = arg.split("/", 1)[1]
                    data = {key: base64.b32encode(os.urandom(30)).decode().lower()}
                else:
                    continue
                name = arg.split("=", 1)[1].split("/", 1)[0]
                made.append({"kind": "Secret", "metadata": {"name": name}, "stringData": data})
    return made


def is_redis(image):
    """Whether an image is the bundled Redis (Valkey): run as a local redis-server."""
    return "redis" in image or "valkey" in image


def matches(selector, labels):
    return all(labels.get(k) == v for k, v in selector.items())


class Wiring:
    def __init__(self, manifests, binary, work):
        self.m = manifests
        self.binary = binary
        self.work = work
        self.processes = []
        self.audited = set()
        # (workload name, container port) -> local port of its first replica; the
        # others' in self.replica_ports.
        self.local = {}
        # (workload name, replica) -> {container port: local port}
        self.replica_ports = {}
        self.workloads = self.m.of("Deployment") + self.m.of("StatefulSet")
        for w in self.workloads:
            name = w["metadata"]["name"]
            for replica in range(self.replicas(w)):
                ports = {}
                for c in w["spec"]["template"]["spec"]["containers"]:
                    for p in c.get("ports", []):
                        ports[p["containerPort"]] = free_port()
                self.replica_ports[(name, replica)] = ports
            for port, local in self.replica_ports[(name, 0)].items():
                self.local[(name, port)] = local
        # "service:port" -> "127.0.0.1:local"
        self.hosts = {}
        for svc in self.m.of("Service"):
            name = svc["metadata"]["name"]
            backends = [w for w in self.workloads
                        if matches(svc["spec"]["selector"], w["spec"]["template"]["metadata"]["labels"])]
            if not backends:
                raise SystemExit(f"wiring: Service {name} selects no workload")
            w = backends[0]
            for sp in svc["spec"]["ports"]:
                target = self.container_port(w, sp.get("targetPort", sp["port"]))
                local = self.local[(w["metadata"]["name"], target)]
                for host in (name, f"{name}.{self.namespace()}", f"{name}.{self.namespace()}.svc",
                             f"{name}.{self.namespace()}.svc.cluster.local"):
                    self.hosts[f"{host}:{sp['port']}"] = f"127.0.0.1:{local}"
                    if sp["port"] == 80:
                        self.hosts[f"{host}/"] = f"127.0.0.1:{local}/"

    def replicas(self, workload):
        """The pods a workload runs: its replicas, or its autoscaler's minimum (two at
        most here: enough to run the replicas side by side)."""
        count = workload["spec"].get("replicas")
        if count is None:
            for hpa in self.m.of("HorizontalPodAutoscaler"):
                if hpa["spec"]["scaleTargetRef"]["name"] == workload["metadata"]["name"]:
                    count = hpa["spec"]["minReplicas"]
        return max(1, min(int(count or 1), 2))

    def namespace(self):
        return os.environ.get("WIRING_NAMESPACE", "default")

    def container_port(self, workload, target):
        for c in workload["spec"]["template"]["spec"]["containers"]:
            for p in c.get("ports", []):
                if target in (p.get("name"), p["containerPort"]):
                    return p["containerPort"]
        raise SystemExit(f"wiring: {workload['metadata']['name']} has no port {target}")

    def rewrite_hosts(self, value):
        for host in sorted(self.hosts, key=len, reverse=True):
            # After the scheme, or after the credentials of a URL (redis://:pw@host:port).
            value = re.sub(r"(?:(?<=//)|(?<=@))" + re.escape(host), self.hosts[host], value)
        return value

    def env(self, container, mounts, ports=None):
        """The container's environment as the kubelet resolves it; `ports` (container
        port -> local port) turns the pod's own address, 127.0.0.1:PORT once status.podIP
        is 127.0.0.1, into the replica's local port."""
        out = {}
        for source in container.get("envFrom", []):
            ref = source.get("secretRef")
            if not ref:
                raise SystemExit(f"wiring: cannot resolve envFrom {source}")
            for s in self.m.of("Secret"):
                if s["metadata"]["name"] == ref["name"]:
                    data = {k: base64.b64decode(v).decode() for k, v in s.get("data", {}).items()}
                    data.update(s.get("stringData", {}))
                    out.update(data)
                    break
            else:
                raise SystemExit(f"wiring: envFrom names Secret {ref['name']}, which is neither rendered nor given")
        for e in container.get("env", []):
            if "value" in e:
                value = str(e["value"])
            elif "secretKeyRef" in e.get("valueFrom", {}):
                ref = e["valueFrom"]["secretKeyRef"]
                value = self.m.secret(ref["name"], ref["key"])
            elif "fieldRef" in e.get("valueFrom", {}):
                field = e["valueFrom"]["fieldRef"]["fieldPath"]
                value = "127.0.0.1" if field == "status.podIP" else "wiring-test-pod"
            else:
                raise SystemExit(f"wiring: cannot resolve env {e}")
            value = re.sub(r"\$\((\w+)\)", lambda g: out.get(g.group(1), ""), value)
            if ports:
                value = re.sub(r"^127\.0\.0\.1:(\d+)$",
                               lambda g: f"127.0.0.1:{ports.get(int(g.group(1)), g.group(1))}", value)
            out[e["name"]] = self.paths(self.rewrite_hosts(value), mounts)
        return out

    def paths(self, value, mounts):
        for mount, local in sorted(mounts.items(), key=lambda m: len(m[0]), reverse=True):
            if value == mount or value.startswith(mount + "/"):
                return local + value[len(mount):]
        return value

    def mounts(self, workload, container):
        """Mount path -> a local directory holding what the volume would."""
        name = workload["metadata"]["name"]
        volumes = {v["name"]: v for v in workload["spec"]["template"]["spec"].get("volumes", [])}
        out = {}
        for vm in container.get("volumeMounts", []):
            volume = volumes.get(vm["name"], {})
            claim = volume.get("persistentVolumeClaim", {}).get("claimName")
            # A claim is one directory wherever it is mounted (the gateways mount
            # fileio's shared volume too); any other volume is the workload's own.
            local = os.path.join(self.work, "claims", claim) if claim else os.path.join(self.work, name, vm["name"])
            os.makedirs(local, exist_ok=True)
            if vm.get("subPath"):
                # The folder must be there already: the chart's init container waits
                # for it, as the kubelet would otherwise make it as root.
                local = os.path.join(local, vm["subPath"])
                if not os.path.isdir(local):
                    raise SystemExit(f"wiring: {name} mounts {vm['subPath']} of {claim or vm['name']}, "
                                     "which is not there")
            if "secret" in volume:
                secret = volume["secret"]["secretName"]
                for item in volume["secret"].get("items", []):
                    with open(os.path.join(local, item["path"]), "w") as f:
                        f.write(self.m.secret(secret, item["key"]))
            if "configMap" in volume:
                config_map = volume["configMap"]["name"]
                for item in volume["configMap"].get("items", []):
                    with open(os.path.join(local, item["path"]), "w") as f:
                        f.write(self.m.config_map(config_map, item["key"]))
            out[vm["mountPath"]] = local
        return out

    def args(self, args, ports):
        out = []
        for a in args:
            m = re.match(r"^(--(?:listen|grpc-listen|admin-listen))=0\.0\.0\.0:(\d+)$", a)
            if m:
                a = f"{m.group(1)}=127.0.0.1:{ports[int(m.group(2))]}"
            out.append(self.rewrite_hosts(a))
        return out

    def start(self, workload):
        for replica in range(self.replicas(workload)):
            self.start_replica(workload, replica)

    def start_replica(self, workload, replica):
        name = workload["metadata"]["name"]
        ports = self.replica_ports[(name, replica)]
        pname = name if replica == 0 else f"{name}-{replica}"
        container = workload["spec"]["template"]["spec"]["containers"][0]
        log = open(os.path.join(self.work, f"{pname}.log"), "w")
        if is_redis(container["image"]):
            port = self.local[(name, 6379)]
            data = os.path.join(self.work, name, "data")
            os.makedirs(data, exist_ok=True)
            # Args as the kubelet gives them: $(VAR) replaced from the container's env.
            resolved = self.env(container, {})
            args = [re.sub(r"\$\((\w+)\)", lambda g: resolved.get(g.group(1), ""), a)
                    for a in container.get("args", [])]
            cmd = ["redis-server"] + [a.replace("/data", data) for a in args]
            cmd += ["--port", str(port), "--bind", "127.0.0.1"]
            env = dict(os.environ)
        else:
            # Init containers first, each to its end, as the kubelet runs them.
            for init in workload["spec"]["template"]["spec"].get("initContainers", []):
                init_mounts = self.mounts(workload, init)
                init_cmd = [self.binary] + [self.paths(a, init_mounts) for a in init.get("args", [])]
                print(f"wiring: init {pname}: {' '.join(init_cmd)}", flush=True)
                done = subprocess.run(init_cmd, stdout=log, stderr=subprocess.STDOUT, timeout=120)
                if done.returncode != 0:
                    raise SystemExit(f"wiring: {pname}'s init container {init['name']} failed; log:\n" +
                                     open(os.path.join(self.work, f"{pname}.log")).read())
            # Replicas share the workload's volumes, as pods share a ReadWriteMany claim.
            mounts = self.mounts(workload, container)
            cmd = [self.binary] + self.args(container.get("args", []), ports)
            env = {k: v for k, v in os.environ.items() if not k.startswith(("KUBEDAV_", "OTEL_", "AWS_"))}
            env.update(self.env(container, mounts, ports))
        print(f"wiring: start {pname}: {' '.join(cmd)}", flush=True)
        self.processes.append((pname, subprocess.Popen(cmd, env=env, stdout=log, stderr=subprocess.STDOUT)))

    def wait_ready(self, workload):
        for replica in range(self.replicas(workload)):
            self.wait_replica_ready(workload, replica)

    def wait_replica_ready(self, workload, replica):
        name = workload["metadata"]["name"]
        ports = self.replica_ports[(name, replica)]
        container = workload["spec"]["template"]["spec"]["containers"][0]
        probe = container.get("readinessProbe", {})
        deadline = time.time() + 30
        while time.time() < deadline:
            for pname, p in self.processes:
                if p.poll() is not None:
                    raise SystemExit(f"wiring: {pname} exited with {p.returncode}; log:\n" +
                                     open(os.path.join(self.work, f"{pname}.log")).read())
            try:
                if "httpGet" in probe:
                    port = ports[self.container_port(workload, probe["httpGet"]["port"])]
                    url = f"http://127.0.0.1:{port}{probe['httpGet']['path']}"
                    with urllib.request.urlopen(url, timeout=2) as r:
                        if r.status == 200:
                            return
                else:
                    with socket.create_connection(("127.0.0.1", self.local[(name, 6379)]), timeout=1):
                        return
            except OSError:
                pass
            time.sleep(0.2)
        pname = name if replica == 0 else f"{name}-{replica}"
        raise SystemExit(f"wiring: {pname} did not become ready; log:\n" +
                         open(os.path.join(self.work, f"{pname}.log")).read())

    def run(self):
        self.idp_noted = set()
        # Redis first, then the gRPC services, then the HTTP edge: the order Kubernetes
        # would converge to.
        def rank(w):
            image = w["spec"]["template"]["spec"]["containers"][0]["image"]
            args = " ".join(w["spec"]["template"]["spec"]["containers"][0].get("args", []))
            return 0 if is_redis(image) else 2 if ("--target=gateway" in args or "--target=all" in args) else 1
        for w in sorted(self.workloads, key=rank):
            self.start(w)
            self.wait_ready(w)
        tests = [p for p in self.m.of("Pod")
                 if p["metadata"].get("annotations", {}).get("helm.sh/hook") == "test"]
        if not tests:
            raise SystemExit("wiring: the chart renders no helm test pod")
        for pod in tests:
            container = pod["spec"]["containers"][0]
            cmd = [self.binary] + [self.rewrite_hosts(a) for a in container["args"]]
            env = {k: v for k, v in os.environ.items() if not k.startswith("KUBEDAV_")}
            env.update(self.env(container, {}))
            print(f"wiring: helm test pod {pod['metadata']['name']}: {' '.join(cmd)}", flush=True)
            result = subprocess.run(cmd, env=env, timeout=120)
            if result.returncode != 0:
                for name, _ in self.processes:
                    print(f"--- {name} log ---\n" + open(os.path.join(self.work, f"{name}.log")).read())
                raise SystemExit(f"wiring: the smoke test failed with {result.returncode}")
        # Which fileio replicas registered (several, on a bucket or a shared volume), which
        # gateways write into fileio's incoming area (a shared volume), and which
        # processes read an access policy (from the ConfigMap, mounted) and audit.
        for name, _ in self.processes:
            for line in open(os.path.join(self.work, f"{name}.log")):
                if any(needle in line for needle in ("registered as fileio replica", "access policy loaded",
                                                     "written into fileio's incoming area")):
                    print(f"wiring: {name}: {line.strip()}")
                if "identity provider unreachable" in line and name not in self.idp_noted:
                    self.idp_noted.add(name)
                    print(f"wiring: {name}: {line.strip()}")
                if '"target":"kubedav::audit"' in line and "audit lines" not in self.audited:
                    self.audited.add("audit lines")
                    print(f"wiring: {name}: audit lines, the first: {line.strip()}")
        # With an identity provider (here one that does not answer), the processes that
        # verify credentials tried to reach it, and started all the same.
        configured = any(
            e.get("name") == "KUBEDAV_OIDC_ISSUER"
            for w in self.workloads
            for e in w["spec"]["template"]["spec"]["containers"][0].get("env", []))
        if configured and not self.idp_noted:
            raise SystemExit("wiring: an identity provider is configured, but no process tried to reach it")
        # With a client secret and a public URL, the browser sign-in is on: the gateway
        # starts it and the auth side, holding the secret, answers that the provider
        # (which does not answer here) cannot be reached, not that sign-in is off.
        env_names = {e.get("name") for w in self.workloads
                     for e in w["spec"]["template"]["spec"]["containers"][0].get("env", [])}
        if configured and {"KUBEDAV_PUBLIC_URL", "KUBEDAV_OIDC_CLIENT_SECRET"} <= env_names:
            gateway = self.rewrite_hosts(tests[0]["spec"]["containers"][0]["args"][1]).rstrip("/")
            try:
                urllib.request.urlopen(f"{gateway}/.kubedav/sign-in", timeout=10)
                raise SystemExit("wiring: the sign-in started although the provider cannot be reached")
            except urllib.error.HTTPError as e:
                page = e.read().decode()
                if e.code != 503 or "cannot be reached" not in page:
                    raise SystemExit(f"wiring: the browser sign-in answered {e.code}: {page}")
            print("wiring: browser sign-in: on, waiting for the identity provider")

    def stop(self):
        for _, p in self.processes:
            if p.poll() is None:
                p.send_signal(signal.SIGTERM)
        for _, p in self.processes:
            try:
                p.wait(timeout=20)
            except subprocess.TimeoutExpired:
                p.kill()


def main():
    # Further files: objects the chart expects to exist (an existingSecret).
    manifests, binary, given = sys.argv[1], sys.argv[2], sys.argv[3:]
    text = ""
    for path in [manifests] + given:
        with open(path) as f:
            text += f.read() + "\n---\n"
    m = Manifests(text, binary)
    with tempfile.TemporaryDirectory(prefix="kubedav-wiring-") as work:
        wiring = Wiring(m, binary, work)
        try:
            wiring.run()
        finally:
            wiring.stop()
    print("wiring: the rendered workloads serve the smoke test")


if __name__ == "__main__":
    main()
