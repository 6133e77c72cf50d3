#!/usr/bin/env python3
"""What the chart must never render, checked on `helm template` output (issue: safe
behind an Ingress):

* no Service other than ClusterIP carries an admin port (9180, /metrics), and the
  gateway's public Service carries the HTTP port only, whatever its type;
* the bundled Redis is Valkey, requires a password from a Secret, and is never started
  with protected mode off;
* in microservices mode every kubedav process gets the shared gRPC token from a Secret
  (monolithic mode has no gRPC between processes);
* the HTTP edge knows its trusted proxies.

A Secret counts as there when the chart renders it or when its secrets hook makes it.

usage: chart_security.py MANIFESTS.yaml
"""

import sys

import yaml


def main():
    objects = [o for o in yaml.safe_load_all(open(sys.argv[1])) if o]
    problems = []
    kinds = lambda kind: [o for o in objects if o["kind"] == kind]
    secrets = {s["metadata"]["name"] for s in kinds("Secret")}
    # ... and those the secrets hook (`kubedav ensure-secrets`) makes once, in the cluster.
    for job in kinds("Job"):
        for c in job["spec"]["template"]["spec"]["containers"]:
            args = c.get("args", [])
            if args[:1] == ["ensure-secrets"]:
                secrets |= {a.split("=", 1)[1].split("/", 1)[0] for a in args
                            if a.startswith(("--users=", "--random="))}

    for svc in kinds("Service"):
        name, spec = svc["metadata"]["name"], svc["spec"]
        ports = [p["port"] for p in spec["ports"]]
        if spec.get("type", "ClusterIP") != "ClusterIP" and 9180 in ports:
            problems.append(f"Service {name} ({spec['type']}) exposes the admin port")
        if name.endswith(("-gateway", "-all")) and [p["name"] for p in spec["ports"]] != ["http"]:
            problems.append(f"the public Service {name} carries {ports}, not the HTTP port alone")

    workloads = kinds("Deployment") + kinds("StatefulSet")
    microservices = any("--target=gateway" in c.get("args", [])
                        for w in workloads for c in w["spec"]["template"]["spec"]["containers"])
    for w in workloads:
        name = w["metadata"]["name"]
        for c in w["spec"]["template"]["spec"]["containers"]:
            args = c.get("args", [])
            env = {e["name"]: e for e in c.get("env", [])}
            if name.endswith("-redis"):
                if "valkey" not in c["image"]:
                    problems.append(f"{name} runs {c['image']}, not Valkey")
                if "--protected-mode" in args:
                    problems.append(f"{name} turns protected mode off")
                ref = env.get("REDIS_PASSWORD", {}).get("valueFrom", {}).get("secretKeyRef")
                if "--requirepass" not in args or not ref:
                    problems.append(f"{name} requires no password from a Secret")
                elif ref["name"] not in secrets:
                    problems.append(f"{name}'s password Secret {ref['name']} is not rendered")
                continue
            target = next((a.split("=", 1)[1] for a in args if a.startswith("--target=")), "")
            token = env.get("KUBEDAV_GRPC_TOKEN", {}).get("valueFrom", {}).get("secretKeyRef")
            if microservices and not token:
                problems.append(f"{name} ({target}) gets no shared gRPC token from a Secret")
            if token and token["name"] not in secrets:
                problems.append(f"{name}'s gRPC token Secret {token['name']} is not rendered")
            if target in ("gateway", "all") and not env.get("KUBEDAV_TRUSTED_PROXIES", {}).get("value"):
                problems.append(f"{name} has no trusted proxies")

    if problems:
        sys.exit("chart security:\n  " + "\n  ".join(problems))
    print(f"ok  security {sys.argv[1].rsplit('/', 1)[-1]}: admin ports internal, Redis "
          f"with a password, gRPC token: {'yes' if microservices else 'not needed (one process)'}")


if __name__ == "__main__":
    main()
