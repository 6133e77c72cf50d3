#!/usr/bin/env python3
"""Offline validation of rendered manifests: every object against the Kubernetes OpenAPI
schemas (kubernetes-validate, strict: unknown fields are errors), and objects of custom
kinds against the openAPIV3Schema of their CustomResourceDefinition.

usage: chart_validate.py KUBERNETES_VERSION MANIFESTS.yaml [CRD.yaml ...]
"""

import sys

import jsonschema
import kubernetes_validate
import yaml


def closed(schema):
    """The schema with unknown fields refused, as the API server's pruning would drop
    them: `additionalProperties: false` wherever properties are listed and unknown fields
    are not preserved."""
    if isinstance(schema, dict):
        schema = {k: closed(v) for k, v in schema.items()}
        if "properties" in schema and "additionalProperties" not in schema \
                and not schema.get("x-kubernetes-preserve-unknown-fields"):
            schema["additionalProperties"] = False
    elif isinstance(schema, list):
        schema = [closed(v) for v in schema]
    return schema


def crd_schemas(paths):
    schemas = {}
    for path in paths:
        with open(path) as f:
            for crd in yaml.safe_load_all(f):
                if not crd or crd.get("kind") != "CustomResourceDefinition":
                    continue
                group, kind = crd["spec"]["group"], crd["spec"]["names"]["kind"]
                for version in crd["spec"]["versions"]:
                    schema = closed(version["schema"]["openAPIV3Schema"])
                    # Go regular expressions (such as a leading (?i)) are not all Python's, so
                    # the schema is used as it is, not checked against the metaschema.
                    schemas[(f"{group}/{version['name']}", kind)] = jsonschema.Draft7Validator(schema)
    return schemas


def main():
    version, manifests, crds = sys.argv[1], sys.argv[2], sys.argv[3:]
    custom = crd_schemas(crds)
    with open(manifests) as f:
        objects = [o for o in yaml.safe_load_all(f) if o]
    failures, kinds = [], set()
    for o in objects:
        name = f"{o['kind']}/{o['metadata']['name']}"
        kinds.add(o["kind"])
        key = (o["apiVersion"], o["kind"])
        try:
            if key in custom:
                custom[key].validate(o)
            else:
                kubernetes_validate.validate(o, version, strict=True)
        except (kubernetes_validate.ValidationError, jsonschema.ValidationError) as e:
            failures.append(f"{name}: {getattr(e, 'message', e)}")
        except kubernetes_validate.SchemaNotFoundError:
            failures.append(f"{name}: no schema for {o['apiVersion']} {o['kind']} in Kubernetes {version}")
    for failure in failures:
        print(f"INVALID {failure}")
    print(f"{manifests}: {len(objects) - len(failures)} of {len(objects)} objects valid "
          f"for Kubernetes {version} ({', '.join(sorted(kinds))})")
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
