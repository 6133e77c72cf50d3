#!/usr/bin/env python3
"""Every extension value of the chart lands where it should, in both modes.

Renders the chart with every workload's extension points set (extraArgs, extraEnvFrom,
extraVolumes, extraVolumeMounts, initContainers, sidecars, topologySpreadConstraints,
priorityClassName, podAnnotations, podLabels), the gateway Service's settings, and the
persistence choices (existingClaim, persistence off), the access policy's ConfigMap, the
shares' and links' settings, and checks each one in the
rendered objects. The renders are written to OUT_DIR for chart-test.sh to validate
against the Kubernetes schemas.

usage: chart_values.py CHART OUT_DIR
"""

import os
import subprocess
import sys

import yaml

RELEASE = "kd"
EXTENSIONS = ("extraArgs", "extraEnvFrom", "extraVolumes", "extraVolumeMounts", "initContainers",
              "sidecars", "topologySpreadConstraints", "priorityClassName", "podAnnotations", "podLabels")


def extras(workload):
    """Distinct values for one workload; the {{ .Release.Name }} shows tpl ran."""
    return {
        "extraArgs": [f"--log-format=text", f"--x-{workload}"],
        "extraEnvFrom": [{"configMapRef": {"name": f"{workload}-env"}}],
        "extraVolumes": [{"name": f"{workload}-extra", "emptyDir": {}}],
        "extraVolumeMounts": [{"name": f"{workload}-extra", "mountPath": f"/extra/{workload}"}],
        "initContainers": [{"name": f"init-{workload}", "image": "busybox:1.36",
                            "args": ["echo", "{{ .Release.Name }}"]}],
        "sidecars": [{"name": f"sidecar-{workload}", "image": "busybox:1.36",
                      "args": ["echo", "{{ .Release.Name }}"]}],
        "topologySpreadConstraints": [{
            "maxSkew": 1, "topologyKey": "topology.kubernetes.io/zone", "whenUnsatisfiable": "ScheduleAnyway",
            "labelSelector": {"matchLabels": {"app.kubernetes.io/instance": "{{ .Release.Name }}"}}}],
        "priorityClassName": f"prio-{workload}",
        "podAnnotations": {f"example.com/{workload}": "annotated"},
        "podLabels": {f"example.com/{workload}": "labelled"},
    }


def render(chart, values, out, name, expect_failure=None):
    path = os.path.join(out, f"values-{name}.yaml")
    with open(path, "w") as f:
        yaml.safe_dump(values, f)
    result = subprocess.run(["helm", "template", RELEASE, chart, "-n", "kubedav", "-f", path],
                            capture_output=True, text=True)
    if expect_failure:
        if result.returncode == 0 or expect_failure not in result.stderr:
            sys.exit(f"values: {name}: expected a refusal with {expect_failure!r}, got {result.stderr or 'a render'}")
        print(f"ok  {name}: refused ({expect_failure})")
        return []
    if result.returncode != 0:
        sys.exit(f"values: {name}: helm template failed:\n{result.stderr}")
    with open(os.path.join(out, f"{name}.yaml"), "w") as f:
        f.write(result.stdout)
    return [o for o in yaml.safe_load_all(result.stdout) if o]


def workload(objects, component):
    """The workload of a component; monolithic's ("all") has the release's full name."""
    name = f"{RELEASE}-kubedav" if component == "all" else f"{RELEASE}-kubedav-{component}"
    for o in objects:
        if o["kind"] in ("Deployment", "StatefulSet") and o["metadata"]["name"] == name:
            return o
    sys.exit(f"values: no workload {name}")


def check_extras(objects, name, values_key):
    want = extras(values_key)
    obj = workload(objects, name)
    pod = obj["spec"]["template"]
    spec = pod["spec"]
    main = spec["containers"][0]
    problems = []

    def need(condition, what):
        if not condition:
            problems.append(what)

    need(main["args"][-2:] == want["extraArgs"], f"args end with extraArgs: {main['args']}")
    need(main["args"][0].startswith("--target="), "extraArgs come after kubedav's own")
    need(want["extraEnvFrom"][0] in main.get("envFrom", []), "envFrom holds extraEnvFrom")
    need(want["extraVolumes"][0] in spec["volumes"], "volumes hold extraVolumes")
    need(any(v["name"] == "tmp" for v in spec["volumes"]), "the chart's own volumes stay")
    need(want["extraVolumeMounts"][0] in main["volumeMounts"], "volumeMounts hold extraVolumeMounts")
    init = spec.get("initContainers", [])
    need(len(init) == 1 and init[0]["args"] == ["echo", RELEASE], f"initContainers, templated: {init}")
    need(len(spec["containers"]) == 2 and spec["containers"][1]["name"] == f"sidecar-{values_key}"
         and spec["containers"][1]["args"] == ["echo", RELEASE], "a templated sidecar after kubedav")
    tsc = spec.get("topologySpreadConstraints", [])
    need(len(tsc) == 1 and tsc[0]["labelSelector"]["matchLabels"]["app.kubernetes.io/instance"] == RELEASE,
         f"topologySpreadConstraints, templated: {tsc}")
    need(spec.get("priorityClassName") == want["priorityClassName"], "priorityClassName")
    annotations, labels = pod["metadata"]["annotations"], pod["metadata"]["labels"]
    need(annotations.get(f"example.com/{values_key}") == "annotated", "podAnnotations")
    need(annotations.get("example.com/global") == "g", "the global podAnnotations stay")
    need("checksum/config" in annotations, "checksum/config stays")
    need(labels.get(f"example.com/{values_key}") == "labelled", "podLabels")
    need(labels.get("app.kubernetes.io/component"), "the selector labels stay")
    # Nothing leaks to another workload.
    for other in objects:
        if other["kind"] in ("Deployment", "StatefulSet") and other is not obj:
            other_annotations = other["spec"]["template"]["metadata"].get("annotations", {})
            need(f"example.com/{values_key}" not in other_annotations,
                 f"{values_key}'s podAnnotations leaked into {other['metadata']['name']}")
    if problems:
        sys.exit(f"values: {name} ({values_key}):\n  " + "\n  ".join(problems))
    print(f"ok  {name}: every extension point ({', '.join(EXTENSIONS)}) in place")


def check_env_alone(chart, out, label, values, want, readers):
    """Renders `values` in both modes; `want` (env name -> value) must be exactly what the
    workloads `readers[mode]` have, and no other workload may have any of it."""
    for mode, names in readers.items():
        objects = render(chart, {"deploymentMode": mode, **values}, out, f"{label}-{mode}")
        wanted = [workload(objects, name) for name in names]
        for o in objects:
            if o["kind"] not in ("Deployment", "StatefulSet") or o["metadata"]["name"].endswith("-redis"):
                continue
            env = {e["name"]: e.get("value") for e in o["spec"]["template"]["spec"]["containers"][0]["env"]}
            got = {k: env.get(k) for k in want}
            if any(o is w for w in wanted):
                if got != want:
                    sys.exit(f"values: {mode} {label}: {o['metadata']['name']}'s env {got}")
            elif any(v is not None for v in got.values()):
                sys.exit(f"values: {mode} {label}: {o['metadata']['name']} should not have {got}")


def check_gateway_mounts(chart, out, rwx):
    """On a shared volume the gateways read it (read only) and write into its incoming area
    (a read-write subPath, once an init container saw fileio make it); each can be turned
    off, and on a ReadWriteOnce volume neither is mounted."""
    def gateway_of(values, name):
        spec = workload(render(chart, values, out, name), "gateway")["spec"]["template"]["spec"]
        main = spec["containers"][0]
        env = {e["name"]: e.get("value") for e in main.get("env", [])}
        mounts = [m for m in main.get("volumeMounts", []) if m["name"] == "data"]
        data = [v for v in spec.get("volumes", []) if v["name"] == "data"]
        init = [c for c in spec.get("initContainers", []) if c["name"] == "await-incoming-area"]
        return env, mounts, data, init
    env, mounts, data, init = gateway_of(rwx, "gateway-mounts")
    want = [{"name": "data", "mountPath": "/data", "readOnly": True},
            {"name": "data", "mountPath": "/incoming", "subPath": ".kubedav/incoming"}]
    if (env.get("KUBEDAV_FILEIO_VOLUME"), env.get("KUBEDAV_FILEIO_INCOMING")) != ("/data", "/incoming") \
            or mounts != want or data[0]["persistentVolumeClaim"].get("readOnly") \
            or len(init) != 1 or init[0]["args"][:2] != ["await-folder", "/data/.kubedav/incoming"] \
            or init[0]["volumeMounts"] != [{"name": "data", "mountPath": "/data", "readOnly": True}]:
        sys.exit(f"values: the gateway on a shared volume: env {env}, mounts {mounts}, volume {data}, init {init}")
    print("ok  on a shared volume the gateways read it and write into its incoming area, after an init container")
    off = {**rwx, "gateway": {"writeIntoFileioVolume": False}}
    env, mounts, data, init = gateway_of(off, "gateway-mounts-read")
    if "KUBEDAV_FILEIO_INCOMING" in env or mounts != want[:1] or not data[0]["persistentVolumeClaim"].get("readOnly") or init:
        sys.exit(f"values: gateway.writeIntoFileioVolume false: env {env}, mounts {mounts}, volume {data}, init {init}")
    off = {**rwx, "gateway": {"writeIntoFileioVolume": False, "sendFromFileioVolume": False}}
    env, mounts, data, init = gateway_of(off, "gateway-mounts-none")
    if "KUBEDAV_FILEIO_VOLUME" in env or mounts or data or init:
        sys.exit(f"values: both gateway mounts off: env {env}, mounts {mounts}, volume {data}, init {init}")
    env, mounts, data, init = gateway_of({}, "gateway-mounts-rwo")
    if "KUBEDAV_FILEIO_INCOMING" in env or mounts or data or init:
        sys.exit(f"values: on a ReadWriteOnce volume: env {env}, mounts {mounts}, volume {data}, init {init}")
    print("ok  gateway.writeIntoFileioVolume and sendFromFileioVolume turn each mount off; "
          "a ReadWriteOnce volume is never mounted")


def main():
    chart, out = sys.argv[1], sys.argv[2]
    os.makedirs(out, exist_ok=True)
    common = {"podAnnotations": {"example.com/global": "g"}}

    # Microservices: every kubedav workload, and the gateway's Service settings.
    values = dict(common)
    for w in ("gateway", "auth", "locks", "markdown", "fileio"):
        values[w] = extras(w)
    values["gateway"]["service"] = {"type": "LoadBalancer", "loadBalancerSourceRanges": ["203.0.113.0/24"],
                                    "externalTrafficPolicy": "Local", "loadBalancerClass": "example.com/lb"}
    objects = render(chart, values, out, "extras-microservices")
    for w in ("gateway", "auth", "locks", "markdown", "fileio"):
        check_extras(objects, w, w)
    svc = next(o for o in objects if o["kind"] == "Service" and o["metadata"]["name"] == f"{RELEASE}-kubedav-gateway")
    expected = {"type": "LoadBalancer", "loadBalancerSourceRanges": ["203.0.113.0/24"],
                "externalTrafficPolicy": "Local", "loadBalancerClass": "example.com/lb"}
    got = {k: svc["spec"].get(k) for k in expected}
    if got != expected:
        sys.exit(f"values: the gateway Service: {got}, not {expected}")
    print("ok  gateway Service: type, loadBalancerSourceRanges, externalTrafficPolicy, loadBalancerClass")

    # Monolithic: its one workload.
    objects = render(chart, dict(common, deploymentMode="monolithic", monolithic=extras("monolithic")),
                     out, "extras-monolithic")
    check_extras(objects, "all", "monolithic")

    # Persistence: a claim of the user's, and none at all.
    for mode, key, name in (("microservices", "fileio", "fileio"), ("monolithic", "monolithic", "all")):
        objects = render(chart, {"deploymentMode": mode, key: {"persistence": {"existingClaim": "my-files"}}},
                         out, f"existing-claim-{mode}")
        sts = workload(objects, name)
        data = next(v for v in sts["spec"]["template"]["spec"]["volumes"] if v["name"] == "data")
        if data.get("persistentVolumeClaim", {}).get("claimName") != "my-files" or sts["spec"].get("volumeClaimTemplates"):
            sys.exit(f"values: {mode} existingClaim: volume {data}, claim templates {sts['spec'].get('volumeClaimTemplates')}")
        if any(o["kind"] == "PersistentVolumeClaim" for o in objects):
            sys.exit(f"values: {mode} existingClaim: the chart still renders a claim")
        print(f"ok  {key}.persistence.existingClaim: {name} serves my-files, no claim of the chart's")
        objects = render(chart, {"deploymentMode": mode, key: {"persistence": {"enabled": False}}},
                         out, f"no-persistence-{mode}")
        sts = workload(objects, name)
        data = next(v for v in sts["spec"]["template"]["spec"]["volumes"] if v["name"] == "data")
        if "emptyDir" not in data or sts["spec"].get("volumeClaimTemplates"):
            sys.exit(f"values: {mode} persistence off: volume {data}")
        print(f"ok  {key}.persistence.enabled false: an emptyDir (NOTES' warning: chart-test.sh step 6)")
    # Replicas sharing a claim of the user's (ReadWriteMany).
    rwx = {"fileio": {"replicas": 2, "persistence": {"accessModes": ["ReadWriteMany"], "existingClaim": "shared"}}}
    objects = render(chart, rwx, out, "existing-claim-rwx")
    deployment = workload(objects, "fileio")
    claims = [v["persistentVolumeClaim"]["claimName"] for v in deployment["spec"]["template"]["spec"]["volumes"]
              if "persistentVolumeClaim" in v]
    if deployment["kind"] != "Deployment" or claims != ["shared"] or any(o["kind"] == "PersistentVolumeClaim" for o in objects):
        sys.exit(f"values: replicas on an existing ReadWriteMany claim: {deployment['kind']}, claims {claims}")
    print("ok  fileio replicas share the existing ReadWriteMany claim")
    check_gateway_mounts(chart, out, rwx)
    # The OTLP protocol reaches every kubedav container.
    objects = render(chart, {"otel": {"endpoint": "http://collector:4318", "protocol": "http/protobuf"}},
                     out, "otel-http")
    for o in objects:
        if o["kind"] in ("Deployment", "StatefulSet") and not o["metadata"]["name"].endswith("-redis"):
            env = {e["name"]: e.get("value") for e in o["spec"]["template"]["spec"]["containers"][0]["env"]}
            if env.get("OTEL_EXPORTER_OTLP_PROTOCOL") != "http/protobuf":
                sys.exit(f"values: otel.protocol did not reach {o['metadata']['name']}: {env.get('OTEL_EXPORTER_OTLP_PROTOCOL')}")
    print("ok  otel.protocol reaches every kubedav container as OTEL_EXPORTER_OTLP_PROTOCOL")
    # The access policy: one ConfigMap, mounted (as a directory, so updates reach it) and
    # named where it is read: where HTTP is served, and in fileio (its quotas).
    document = "homes: /home/{user}\nadmins: [admin]\n"
    for mode, readers in (("microservices", ("gateway", "fileio")), ("monolithic", ("all",))):
        objects = render(chart, {"deploymentMode": mode, "policy": {"document": document, "auditLog": True}},
                         out, f"policy-{mode}")
        maps = [o for o in objects if o["kind"] == "ConfigMap" and o["metadata"]["name"] == f"{RELEASE}-kubedav-policy"]
        if len(maps) != 1 or maps[0]["data"]["policy.yaml"].strip() != document.strip():
            sys.exit(f"values: {mode} policy.document: ConfigMaps {maps}")
        for o in objects:
            if o["kind"] not in ("Deployment", "StatefulSet"):
                continue
            spec = o["spec"]["template"]["spec"]
            main = spec["containers"][0]
            env = {e["name"]: e.get("value") for e in main.get("env", [])}
            mounts = [m for m in main.get("volumeMounts", []) if m["name"] == "policy"]
            volumes = [v for v in spec.get("volumes", []) if v["name"] == "policy"]
            if any(o is workload(objects, reader) for reader in readers):
                reader = o["metadata"]["name"]
                if env.get("KUBEDAV_POLICY") != "/etc/kubedav/policy/policy.yaml" or env.get("KUBEDAV_AUDIT_LOG") != "true":
                    sys.exit(f"values: {mode} policy: {reader}'s env {env}")
                if mounts != [{"name": "policy", "mountPath": "/etc/kubedav/policy", "readOnly": True}] or "subPath" in str(mounts):
                    sys.exit(f"values: {mode} policy: {reader}'s mounts {mounts}")
                if volumes[0]["configMap"]["name"] != f"{RELEASE}-kubedav-policy":
                    sys.exit(f"values: {mode} policy: {reader}'s volume {volumes}")
            elif "KUBEDAV_POLICY" in env or mounts or volumes:
                sys.exit(f"values: {mode} policy: {o['metadata']['name']} reads no policy, but has it")
        print(f"ok  policy.document ({mode}): one ConfigMap, mounted as a directory in {' and '.join(readers)} alone, with --audit-log")
    objects = render(chart, {"policy": {"existingConfigMap": "my-policy", "existingConfigMapKey": "rules.yaml"}},
                     out, "policy-existing")
    volumes = [v for v in workload(objects, "gateway")["spec"]["template"]["spec"]["volumes"] if v["name"] == "policy"]
    if volumes != [{"name": "policy", "configMap": {"name": "my-policy", "items": [{"key": "rules.yaml", "path": "policy.yaml"}]}}] \
            or any(o["kind"] == "ConfigMap" and o["metadata"]["name"].endswith("-policy") for o in objects):
        sys.exit(f"values: policy.existingConfigMap: volumes {volumes}")
    print("ok  policy.existingConfigMap: the gateway reads my-policy's key, and the chart renders no ConfigMap")
    # Shares and links: their settings reach the process that serves HTTP, and only it.
    sharing = {"links": "upload", "linkMaxBytes": 5 << 20, "admins": ["alice", "oidc-7"]}
    want = {"KUBEDAV_LINKS": "upload", "KUBEDAV_LINK_MAX_BYTES": str(5 << 20), "KUBEDAV_ADMINS": "alice,oidc-7"}
    check_env_alone(chart, out, "sharing", {"sharing": sharing}, want,
                    {"microservices": ("gateway",), "monolithic": ("all",)})
    print("ok  sharing.links, linkMaxBytes and admins reach the gateways (and the one pod) alone")
    render(chart, {"sharing": {"links": "everything"}}, out, "bad-links",
           expect_failure="sharing.links")
    # The trash and versions: fileio's flags, on the process that runs fileio alone.
    trash = {"retentionDays": 14, "versionsMax": 5, "versionsRetentionDays": 60}
    want = {"KUBEDAV_TRASH_RETENTION_DAYS": "14", "KUBEDAV_VERSIONS_MAX": "5", "KUBEDAV_VERSIONS_RETENTION_DAYS": "60"}
    check_env_alone(chart, out, "trash", {"trash": trash}, want,
                    {"microservices": ("fileio",), "monolithic": ("all",)})
    print("ok  trash.retentionDays, versionsMax and versionsRetentionDays reach fileio (and the one pod) alone")
    # The identity provider: every claim and the public URL reach the processes that
    # verify credentials or offer Bearer (gateway and auth; the one pod), and no other.
    oidc = {"issuer": "https://idp.example/realms/files", "clientId": "files", "audience": "files-api",
            "usernameClaim": "oid", "groupsClaim": "roles", "userPrefix": "entra-"}
    want = {"KUBEDAV_OIDC_ISSUER": oidc["issuer"], "KUBEDAV_OIDC_CLIENT_ID": "files",
            "KUBEDAV_OIDC_AUDIENCE": "files-api", "KUBEDAV_OIDC_USERNAME_CLAIM": "oid",
            "KUBEDAV_OIDC_GROUPS_CLAIM": "roles", "KUBEDAV_OIDC_USER_PREFIX": "entra-",
            "KUBEDAV_PUBLIC_URL": "https://files.example"}
    check_env_alone(chart, out, "oidc", {"auth": {"oidc": oidc}, "gateway": {"publicUrl": "https://files.example/"}},
                    want, {"microservices": ("gateway", "auth"), "monolithic": ("all",)})
    print("ok  auth.oidc's issuer, client, audience, claims, prefix and the public URL reach the verifiers alone")
    render(chart, {"trash": {"retentionDays": -1}}, out, "bad-trash", expect_failure="retentionDays")
    render(chart, {"policy": {"document": document, "existingConfigMap": "x"}}, out, "policy-twice",
           expect_failure="either in policy.document or in policy.existingConfigMap")
    render(chart, {"policy": {"document": document}, "auth": {"enabled": False}}, out, "policy-without-auth",
           expect_failure="needs auth.enabled: true")
    render(chart, {"policy": {"auditLog": True}}, out, "audit-without-policy",
           expect_failure="policy.auditLog logs the access policy's decisions")
    render(chart, {"fileio": {"replicas": 2, "persistence": {"accessModes": ["ReadWriteMany"], "enabled": False}}},
           out, "rwx-without-persistence", expect_failure="ReadWriteMany asks its replicas to share one volume")
    render(chart, {"fileio": {"persistence": {"enabled": False, "existingClaim": "x"}}},
           out, "claim-without-persistence", expect_failure="keep persistence enabled to serve the claim")
    render(chart, {"gateway": {"extraArgs": ["target=all"]}}, out, "bad-extra-args",
           expect_failure="gateway.extraArgs.0: Does not match pattern")


if __name__ == "__main__":
    main()
