"""Validates Kubernetes manifests offline; prints one JSON line per checked object.

Run by the python of scripts/k8s_validate_venv.sh (kubernetes-validate, pinned there):

    python validate_manifests.py K8S_VERSION CRD_DIR FILE.yaml...

- Core kinds (Service, Job, ...): kubernetes-validate, strict (unknown fields fail).
- Custom resources: the openAPIV3Schema vendored in CRD_DIR (<group>_<version>_<kind>.json,
  see its SOURCE), made strict as `kubectl apply --validate=strict` is: an object schema
  with properties rejects other fields unless it says x-kubernetes-preserve-unknown-fields.
- Every Pod template inside a custom resource, also one without a vendored schema (T9k):
  the core PodTemplateSpec, strict, by wrapping it in a v1 PodTemplate.
A line: {"file", "kind", "name", "checked_by", "errors": [...]}; exit 0 even on errors (the
test reads the lines), 2 on bad usage.
"""
import json
import pathlib
import sys

import jsonschema
import kubernetes_validate
import yaml


def strict(schema):
    if isinstance(schema, dict):
        schema = {k: strict(v) for k, v in schema.items()}
        if ("properties" in schema and "additionalProperties" not in schema
                and not schema.get("x-kubernetes-preserve-unknown-fields")):
            schema["additionalProperties"] = False
        return schema
    if isinstance(schema, list):
        return [strict(v) for v in schema]
    return schema


def crd_schema(crd_dir, doc):
    group, _, version = doc["apiVersion"].rpartition("/")
    path = crd_dir / f"{group}_{version}_{doc['kind'].lower()}.json"
    if not path.exists():
        return None
    return strict(json.loads(path.read_text())["openAPIV3Schema"])


def pod_templates(node, where="$"):
    """(json path, template) for every dict with a `spec` holding `containers`."""
    if isinstance(node, dict):
        if isinstance(node.get("spec"), dict) and "containers" in node["spec"]:
            yield where, node
            return
        for k, v in node.items():
            yield from pod_templates(v, f"{where}.{k}")
    elif isinstance(node, list):
        for i, v in enumerate(node):
            yield from pod_templates(v, f"{where}[{i}]")


def core(doc, k8s_version):
    try:
        kubernetes_validate.validate(doc, k8s_version, strict=True)
        return []
    except kubernetes_validate.ValidationError as e:
        return [f"{'.'.join(map(str, e.path)) or '$'}: {e.message}"]


def check(doc, k8s_version, crd_dir):
    """(checked_by, errors) for one object."""
    group = doc["apiVersion"].rpartition("/")[0]
    if "." not in group or group.endswith(".k8s.io"):   # v1, batch/v1, networking.k8s.io/v1
        return "kubernetes-validate", core(doc, k8s_version)
    errors, checked_by = [], []
    schema = crd_schema(crd_dir, doc)
    if schema is not None:
        checked_by.append("vendored CRD schema")
        validator = jsonschema.Draft7Validator(schema)
        errors += [f"{'.'.join(map(str, e.path)) or '$'}: {e.message}"
                   for e in validator.iter_errors(doc)]
    for where, template in pod_templates(doc.get("spec", {}), "spec"):
        checked_by.append(f"PodTemplateSpec at {where}")
        wrapped = {"apiVersion": "v1", "kind": "PodTemplate", "metadata": {"name": "t"},
                   "template": template}
        errors += [f"{where}: {e}" for e in core(wrapped, k8s_version)]
    return ", ".join(checked_by) or "nothing", errors


def main():
    if len(sys.argv) < 4:
        print(__doc__, file=sys.stderr)
        sys.exit(2)
    k8s_version, crd_dir = sys.argv[1], pathlib.Path(sys.argv[2])
    for path in sys.argv[3:]:
        for doc in yaml.safe_load_all(pathlib.Path(path).read_text()):
            if not doc:
                continue
            checked_by, errors = check(doc, k8s_version, crd_dir)
            print(json.dumps({"file": path, "kind": doc.get("kind"),
                              "name": doc.get("metadata", {}).get("name"),
                              "checked_by": checked_by, "errors": errors}))


if __name__ == "__main__":
    main()
