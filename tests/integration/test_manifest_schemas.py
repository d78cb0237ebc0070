"""Issue 15, acceptance 2: examples/k8s validated offline against the Kubernetes schemas
(PyPI's kubernetes-validate, pinned in scripts/k8s_validate_venv.sh, strict) and the
vendored CRD schemas of the custom resources (tests/fixtures/crds, SOURCE there), with
unknown fields rejected: a misspelt field anywhere must fail, which the second test shows
by misspelling one in each kind."""
import json
import subprocess

import pytest

from conftest import REPO

yaml = pytest.importorskip("yaml", reason="SKIPPED LOUDLY: PyYAML is needed to read "
                           "examples/k8s (apt-get install python3-yaml)")

K8S = REPO / "examples" / "k8s"
CRDS = REPO / "tests" / "fixtures" / "crds"
CHECKER = REPO / "tests" / "integration" / "scripts" / "validate_manifests.py"
# The oldest Kubernetes the examples promise to work on (docs/guides/kubernetes.md).
K8S_VERSION = "1.30"


@pytest.fixture(scope="module")
def validator_python():
    r = subprocess.run([str(REPO / "scripts" / "k8s_validate_venv.sh")], capture_output=True,
                       text=True, timeout=900)
    if r.returncode != 0:
        pytest.skip(f"SKIPPED LOUDLY: kubernetes-validate unavailable (scripts/setup.sh installs "
                    f"it): {r.stderr.strip()[-500:]}")
    return r.stdout.strip().splitlines()[-1]


def validate(python, *paths):
    r = subprocess.run([python, str(CHECKER), K8S_VERSION, str(CRDS), *map(str, paths)],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    return [json.loads(l) for l in r.stdout.splitlines()]


def test_every_manifest_is_valid(validator_python):
    manifests = sorted(K8S.glob("*.yaml"))
    results = validate(validator_python, *manifests)
    assert {r["file"] for r in results} == {str(m) for m in manifests}
    for r in results:
        assert r["errors"] == [], f"{r['file']} {r['kind']} {r['name']}: {r['errors']}"
        print(f"{pathlib_name(r['file'])}: {r['kind']} checked by {r['checked_by']}")
    kinds = {(r["kind"], r["checked_by"].split(",")[0]) for r in results}
    assert ("PyTorchJob", "vendored CRD schema") in kinds
    assert ("Job", "vendored CRD schema") in kinds          # Volcano's batch.volcano.sh Job
    assert ("Job", "kubernetes-validate") in kinds          # the Indexed Job
    assert ("TrainJob", "vendored CRD schema") in kinds     # Kubeflow Trainer v2
    assert ("LeaderWorkerSet", "vendored CRD schema") in kinds
    for kind in ("PyTorchTrainingJob", "DeepSpeedJob"):     # no public schema: templates only
        assert any(r["kind"] == kind and "PodTemplateSpec" in r["checked_by"] for r in results)


def pathlib_name(path):
    return path.rsplit("/", 1)[-1]


# One misspelt field per kind and level: (manifest, document index, path to a dict, key).
TYPOS = [
    ("indexed-job", 0, ["spec"], "publishNotReadyAdresses"),
    ("indexed-job", 1, ["spec"], "completion"),
    ("indexed-job", 1, ["spec", "template", "spec", "containers", 0], "readinesProbe"),
    ("pytorchjob", 0, ["spec"], "nprocsPerNode"),
    ("pytorchjob", 0, ["spec", "pytorchReplicaSpecs", "Worker"], "replica"),
    ("volcano-job", 0, ["spec", "tasks", 0], "replica"),
    ("t9k-pytorchtrainingjob", 0,
     ["spec", "replicaSpecs", 0, "template", "spec", "containers", 0], "comand"),
    ("t9k-deepspeedjob", 0, ["spec", "worker", "template", "spec"], "restartpolicy"),
    ("trainjob", 0, ["spec", "trainer"], "numNode"),
    ("trainjob", 0, ["spec", "runtimeRef"], "nam"),
    ("leaderworkerset", 0, ["spec", "leaderWorkerTemplate"], "groupSize"),
    ("leaderworkerset", 0,
     ["spec", "leaderWorkerTemplate", "workerTemplate", "spec", "containers", 0], "readinesProbe"),
]


def test_a_misspelt_field_fails(validator_python, tmp_path):
    paths = []
    for n, (name, index, where, key) in enumerate(TYPOS):
        docs = [d for d in yaml.safe_load_all((K8S / f"{name}.yaml").read_text()) if d]
        node = docs[index]
        for step in where:
            node = node[step]
        node[key] = node.get(key, 1)
        path = tmp_path / f"{n}-{name}.yaml"
        path.write_text(yaml.safe_dump_all(docs))
        paths.append((path, index, key))
    results = validate(validator_python, *(p for p, _, _ in paths))
    for path, index, key in paths:
        result = [r for r in results if r["file"] == str(path)][index]
        assert any(key in e for e in result["errors"]), \
            f"{path.name}: the misspelt {key!r} was not rejected: {result}"
