"""Issue 15, acceptance 1: every manifest in examples/k8s runs to completion on simulated
pods (pods.py) whose names reach the other pods' resolvers only once they are Ready
(cluster_dns.py), with the manifest's own probes run as the kubelet runs them.

Per manifest, the operator's part is modelled here: the Pods it makes (names, hostnames,
the environment it sets, as in envs/<manifest>.env) and its headless Services, which
publish not-ready Pods only when the manifest says so:
- Indexed Job: the manifest's Service (publishNotReadyAddresses: true).
- Volcano: the svc plugin's `--publish-not-ready-addresses=true` argument in the manifest.
- Kubeflow PyTorchJob: never. The training operator creates one headless Service per
  replica without it (kubeflow/training-operator pkg/controller.v1/common/service.go,
  CreateNewService, at 93c758c6033030905aada4ff6a32c439f3ce8bed).
- T9k PyTorchTrainingJob and DeepSpeedJob: assumed never (T9k's controller is not public;
  the manifest must work in the worst case).
- Kubeflow Trainer v2 TrainJob (torch-distributed runtime): always. Its JobSet's headless
  Service sets publishNotReadyAddresses from network.publishNotReadyAddresses, true unless
  set (kubernetes-sigs/jobset pkg/controllers/jobset_controller.go); the runtime sets no
  network. The env is the torch plugin's (kubeflow/trainer v2.3.0,
  pkg/runtime/framework/plugins/torch/torch.go); the node's GPUs (resourcesPerNode) are the
  fake driver's (tests/fakes), which muster's GPU probe counts for PET_NPROC_PER_NODE=auto.
- LeaderWorkerSet: always (kubernetes-sigs/lws pkg/utils/controller/controller_utils.go,
  CreateHeadlessServiceIfNotExists); the env is AddLWSVariables' (pkg/utils/pod/pod_utils.go),
  in namespace "default".
Each pod runs the container's own command (the training script replaced by
examples/allreduce.py, real torch, gloo); DeepSpeedJob's launcher runs the manifest's
customCommand in worker-0, with a pdsh that reaches each host only when its name resolves
in worker-0, as ssh would. Probe periods are scaled by SCALE so that a run takes seconds;
a manifest whose readiness waits for something that needs its own name never completes.
"""
import json
import os
import re
import subprocess
import time

import pytest

from cluster_dns import ClusterDns, Kubelet, Probe
from conftest import BUILD, MUSTER, REPO, TORCH_PYTHON, muster_env, needs_torch
from pods import Pods, read_text

yaml = pytest.importorskip("yaml", reason="SKIPPED LOUDLY: PyYAML is needed to read "
                           "examples/k8s (apt-get install python3-yaml)")
pytest.importorskip("grpc", reason="SKIPPED LOUDLY: python3-grpcio is needed for the probes")

K8S = REPO / "examples" / "k8s"
SCRIPT = "examples/allreduce.py"       # relative to the repo, the pods' working directory
SCALE = 0.2                            # a 10 s probe period becomes 2 s
DEADLINE = 25                          # seconds for one simulated run
IMAGE_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"


def load(name):
    return [d for d in yaml.safe_load_all((K8S / f"{name}.yaml").read_text()) if d]


def command(container):
    """The container's muster command line, runnable here."""
    argv = [str(a) for a in container.get("command", []) + container.get("args", [])]
    assert argv[0] == "muster", argv
    return [str(MUSTER)] + [SCRIPT if a.endswith(".py") else a for a in argv[1:]]


class Sim:
    """What an operator makes of a manifest: per pod its hostname, DNS names, env and
    container; whether its Services publish not-ready Pods."""

    def __init__(self, publish_not_ready, why):
        self.publish_not_ready, self.why = publish_not_ready, why
        self.hostnames, self.names, self.envs, self.containers = [], [], [], []
        self.launcher = None   # DeepSpeedJob: the customCommand run in pod 0

    def add(self, hostname, names, env, container):
        self.hostnames.append(hostname)
        self.names.append(names)
        self.envs.append(env)
        self.containers.append(container)


def indexed_job():
    docs = load("indexed-job")
    job = next(d for d in docs if d["kind"] == "Job")
    pod = job["spec"]["template"]["spec"]
    svc = next(d for d in docs if d["kind"] == "Service" and
               d["metadata"]["name"] == pod["subdomain"])
    sim = Sim(svc["spec"].get("publishNotReadyAddresses", False), "the manifest's Service")
    for i in range(job["spec"]["completions"]):
        host = f"{job['metadata']['name']}-{i}"
        sim.add(host, [f"{host}.{pod['subdomain']}"], {"JOB_COMPLETION_INDEX": str(i)},
                pod["containers"][0])
    return sim


def pytorchjob():
    (doc,) = load("pytorchjob")
    job, nproc = doc["metadata"]["name"], int(doc["spec"]["nprocPerNode"])
    sim = Sim(False, "training-operator's CreateNewService")
    roles = [(role.lower(), spec) for role, spec in doc["spec"]["pytorchReplicaSpecs"].items()]
    roles.sort(key=lambda r: r[0] != "master")
    pods = [(f"{job}-{role}-{i}", spec) for role, spec in roles for i in range(spec["replicas"])]
    master = pods[0][0]
    for rank, (name, spec) in enumerate(pods):
        c = spec["template"]["spec"]["containers"][0]
        port = str(next(p["containerPort"] for p in c["ports"] if p["name"] == "pytorchjob-port"))
        env = dict(PET_NNODES=str(len(pods)), PET_NODE_RANK=str(rank), PET_NPROC_PER_NODE=str(nproc),
                   PET_MASTER_ADDR=master, PET_MASTER_PORT=port, MASTER_ADDR=master,
                   MASTER_PORT=port, WORLD_SIZE=str(len(pods) * nproc), RANK=str(rank),
                   PYTHONUNBUFFERED="1")
        sim.add(name, [name], env, c)
    return sim


def t9k_pytorchtrainingjob():
    (doc,) = load("t9k-pytorchtrainingjob")
    job, (spec,) = doc["metadata"]["name"], doc["spec"]["replicaSpecs"]
    sim = Sim(False, "assumed: T9k's controller is not public")
    n = spec["replicas"]
    for i in range(n):
        name = f"{job}-{spec['type']}-{i}"
        env = dict(MASTER_ADDR=f"{job}-{spec['type']}-0", MASTER_PORT="23456",
                   WORLD_SIZE=str(n), RANK=str(i))
        sim.add(name, [name], env, spec["template"]["spec"]["containers"][0])
    return sim


def volcano_job():
    (doc,) = load("volcano-job")
    job = doc["metadata"]["name"]
    publish = "--publish-not-ready-addresses=true" in doc["spec"]["plugins"].get("svc", [])
    sim = Sim(publish, "the svc plugin's arguments in the manifest")
    tasks = doc["spec"]["tasks"]
    hosts = {t["name"]: [f"{job}-{t['name']}-{i}.{job}" for i in range(t["replicas"])]
             for t in tasks}
    common = {}
    for t in tasks:
        common[f"VC_{t['name'].upper()}_HOSTS"] = ",".join(hosts[t["name"]])
        common[f"VC_{t['name'].upper()}_NUM"] = str(t["replicas"])
    for t in tasks:
        for i, fqdn in enumerate(hosts[t["name"]]):
            env = dict(common, VC_TASK_INDEX=str(i), VK_TASK_INDEX=str(i))
            sim.add(fqdn.split(".")[0], [fqdn], env, t["template"]["spec"]["containers"][0])
    return sim


PDSH = """#!/usr/bin/python3
# pdsh -R ssh stand-in, run in the launcher pod: a host whose name does not resolve here
# fails as ssh does (exit 255); for the others the command line is recorded, and the test
# runs it in that host's pod.
import json, os, socket, sys
args, hosts = sys.argv[1:], []
while args and args[0].startswith("-"):
    opt = args.pop(0)
    if opt in ("-f", "-R", "-w", "-l", "-u", "-t"):
        value = args.pop(0)
        hosts = value.split(",") if opt == "-w" else hosts
code = 0
with open(os.environ["PDSH_RECORD"], "w") as f:
    for n, host in enumerate(hosts):
        try:
            socket.gethostbyname(host)
        except OSError:
            print(f"{host}: ssh: Could not resolve hostname {host}: Name or service not known",
                  file=sys.stderr)
            code = 255
            continue
        f.write(json.dumps({"host": host, "command": " ".join(args).replace("%n", str(n))}) + "\\n")
sys.exit(code)
"""


def t9k_deepspeedjob():
    (doc,) = load("t9k-deepspeedjob")
    job, spec = doc["metadata"]["name"], doc["spec"]["worker"]
    sim = Sim(False, "assumed: T9k's controller is not public")
    for i in range(spec["replicas"]):
        name = f"{job}-worker-{i}"
        sim.add(name, [name], {}, spec["template"]["spec"]["containers"][0])
    sim.launcher = doc["spec"]["config"]["customCommand"]
    return sim


FAKES = BUILD / "tests" / "fakes"


def fake_gpus(count):
    """A node with `count` GPUs: the fake driver libraries muster's probe loads."""
    assert (FAKES / "libcuda.so.1").exists(), \
        f"{FAKES} lacks the fake driver: cmake --build build --target muster_probe_fakes"
    return dict(MUSTER_LIBCUDA=str(FAKES / "libcuda.so.1"),
                MUSTER_LIBNVML=str(FAKES / "libnvidia-ml.so.1"),
                MUSTER_LIBNCCL=str(FAKES / "libnccl.so.2"), FAKE_GPU_COUNT=str(count))


def trainjob():
    (doc,) = load("trainjob")
    job, trainer = doc["metadata"]["name"], doc["spec"]["trainer"]
    assert doc["spec"]["runtimeRef"]["name"] == "torch-distributed"
    sim = Sim(True, "JobSet's headless Service (publishNotReadyAddresses defaults to true)")
    n, gpus = trainer["numNodes"], int(trainer["resourcesPerNode"]["limits"]["nvidia.com/gpu"])
    # The runtime's container "node" with the TrainJob's command: no probes.
    container = {"name": "node", "command": trainer["command"], "args": trainer.get("args", [])}
    for i in range(n):
        host = f"{job}-node-0-{i}"   # <jobset>-<replicatedJob>-<job index>-<pod index>
        env = dict(PET_NNODES=str(n), PET_NPROC_PER_NODE="auto", PET_NODE_RANK=str(i),
                   PET_MASTER_ADDR=f"{job}-node-0-0.{job}", PET_MASTER_PORT="29500",
                   JOB_COMPLETION_INDEX=str(i), **fake_gpus(gpus))
        sim.add(host, [f"{host}.{job}"], env, container)
    return sim


def leaderworkerset():
    (doc,) = load("leaderworkerset")
    lws, template = doc["metadata"]["name"], doc["spec"]["leaderWorkerTemplate"]
    assert doc["spec"]["replicas"] == 1, "one group: one job"
    sim = Sim(True, "LWS's headless Service (PublishNotReadyAddresses: true)")
    worker = template["workerTemplate"]["spec"]["containers"][0]
    leader = template.get("leaderTemplate", template["workerTemplate"])["spec"]["containers"][0]
    size = template["size"]
    for i in range(size):
        # The leaders' StatefulSet names the leader <lws>-<group>; the group's workers'
        # StatefulSet, <lws>-<group>, names them <lws>-<group>-<index>.
        host = f"{lws}-0" if i == 0 else f"{lws}-0-{i}"
        env = dict(LWS_LEADER_ADDRESS=f"{lws}-0.{lws}.default", LWS_GROUP_SIZE=str(size),
                   LWS_WORKER_INDEX=str(i))
        sim.add(host, [f"{host}.{lws}", f"{host}.{lws}.default"], env, leader if i == 0 else worker)
    return sim


MANIFESTS = {"indexed-job": indexed_job, "trainjob": trainjob, "leaderworkerset": leaderworkerset, "pytorchjob": pytorchjob,
             "t9k-pytorchtrainingjob": t9k_pytorchtrainingjob, "volcano-job": volcano_job,
             "t9k-deepspeedjob": t9k_deepspeedjob}


def test_every_manifest_is_simulated():
    assert sorted(MANIFESTS) == sorted(p.stem for p in K8S.glob("*.yaml"))


def launch_deepspeed(sim, pods, base, tmp_path, dns):
    """Runs the launcher in pod 0; returns the agents' Popens once it has reached them."""
    names = sim.hostnames
    hostfile = tmp_path / "hostfile"
    hostfile.write_text("".join(f"{n} slots=2\n" for n in names))
    custom = sim.launcher.replace("/t9k/hostfile", str(hostfile))
    custom = custom.replace(" muster run ", f" {MUSTER} run ")
    custom = re.sub(r"/t9k/mnt/train\.py.*$", SCRIPT, custom, flags=re.M)
    bindir = tmp_path / "launcher-bin"
    bindir.mkdir()
    (bindir / "pdsh").write_text(PDSH)
    (bindir / "pdsh").chmod(0o755)
    record = tmp_path / "pdsh.jsonl"
    env = dict(base, PATH=f"{bindir}:{base['PATH']}", PDSH_RECORD=str(record))
    launcher = pods[0].run(["sh", "-c", custom], env=env)
    try:
        launcher.wait(DEADLINE)
    except subprocess.TimeoutExpired:
        raise AssertionError(f"the launcher did not reach the hosts in {DEADLINE} s; events:\n"
                             f"{dns.history()}\n{read_text(launcher.err_path)[-2000:]}") from None
    assert launcher.returncode == 0, \
        f"launcher exited {launcher.returncode}; events:\n{dns.history()}\n" \
        f"{read_text(launcher.err_path)[-2000:]}"
    lines = [json.loads(l) for l in record.read_text().splitlines()]
    return [pods[names.index(l["host"])].run(["sh", "-c", l["command"]], env=dict(base))
            for l in lines]


def wait_or_explain(procs, deadline, sim, dns, kubelets):
    for p in procs:
        try:
            p.wait(max(0.1, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            raise AssertionError(
                f"{p.pod.name} still running after {DEADLINE} s. Pods Ready: "
                f"{dict(zip(sim.hostnames, dns.ready))}; Services publish not-ready Pods: "
                f"{sim.publish_not_ready} ({sim.why}); last readiness answers: "
                f"{ {sim.hostnames[k.index]: k.last for k in kubelets} }\nevents:\n"
                f"{dns.history()}\n" + "\n".join(
                    f"--- {q.pod.name}\n{read_text(q.err_path)[-1200:]}" for q in procs)) from None


@needs_torch
@pytest.mark.parametrize("name", sorted(MANIFESTS))
def test_manifest_completes_with_dns_that_follows_readiness(name, tmp_path, monkeypatch):
    monkeypatch.chdir(REPO)
    sim = MANIFESTS[name]()
    base = {"PATH": IMAGE_PATH, "HOME": os.environ.get("HOME", "/root"),
            "MUSTER_TEST_MARK": muster_env()["MUSTER_TEST_MARK"]}
    assert os.path.realpath(TORCH_PYTHON) == os.path.realpath("/usr/bin/python3"), \
        "python3 on the image PATH must be the torch python"
    with Pods(len(sim.hostnames), tmp_path, own_etc=True) as pods:
        for pod, hostname in zip(pods, sim.hostnames):
            pod.name = hostname
        dns = ClusterDns(list(pods), sim.names, sim.publish_not_ready)
        kubelets = [Kubelet(dns, i, Probe.from_container(c, "startupProbe"),
                            Probe.from_container(c, "readinessProbe"), SCALE, TORCH_PYTHON)
                    for i, c in enumerate(sim.containers)]
        t0 = time.monotonic()
        for k in kubelets:
            k.start()
        try:
            if sim.launcher:
                procs = launch_deepspeed(sim, pods, base, tmp_path, dns)
            else:
                procs = [pod.run(command(c), env=dict(base, POD_IP=pod.ip, **env))
                         for pod, c, env in zip(pods, sim.containers, sim.envs)]
            wait_or_explain(procs, t0 + DEADLINE, sim, dns, kubelets)
        finally:
            for k in kubelets:
                k.stop()
        took = time.monotonic() - t0
        world = 2 * len(pods)
        for p in procs:
            err = read_text(p.err_path)
            assert p.returncode == 0, f"{p.pod.name} exited {p.returncode}:\n{err[-3000:]}"
            assert f"job succeeded: all {world} workers on {len(pods)} nodes exited 0" in err
        sums = re.findall(r"all_reduce = ([\d.]+) OK", "".join(read_text(p.out_path)
                                                               for p in procs))
        assert sums == [f"{world * (world + 1) // 2}"] * world, sums
        print(f"\n{name}: done in {took:.1f} s\n{dns.history()}")
