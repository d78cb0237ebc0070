"""Issue 5, acceptance item 2: real DeepSpeed and real HF Accelerate under muster.

Two simulated pods (pods.py: network + PID namespaces) x 2 slots, one muster agent per pod
as its PID 1, the torch 2.x venv's python (scripts/torch2_venv.sh installs DeepSpeed and
Accelerate into it). No ssh, no pdsh, no DeepSpeed launcher: `ssh`, `pdsh`, `mpirun`... on
PATH are traps that record any call, and each worker takes a census of its pod's processes
while the whole job is alive.
"""
import json
import os
import subprocess
import time

import pytest

from conftest import MUSTER, REPO, muster_env
from pods import Pods, read_text

SCRIPTS = REPO / "tests" / "integration" / "scripts"
DS_SCRIPT = SCRIPTS / "deepspeed_check.py"
ACC_SCRIPT = SCRIPTS / "accelerate_check.py"
ENDPOINT = "pod0:29400"
NNODES, NPROC = 2, 2
WORLD = NNODES * NPROC
# What DeepSpeed's own launcher would start: none of these may run.
LAUNCHERS = ("ssh", "sshd", "pdsh", "pdcp", "mpirun", "mpiexec", "srun")


@pytest.fixture(scope="module")
def ds_python(torch2_python):
    """The torch 2.x python, once it is known to have deepspeed and accelerate."""
    probe = ("from importlib.metadata import version as v; "
             "print(v('deepspeed'), v('accelerate'))")
    r = subprocess.run([torch2_python, "-c", probe], capture_output=True, text=True, timeout=120)
    if r.returncode != 0:
        # The venv script installs them when it can and says why when it cannot: ask it.
        why = subprocess.run([str(REPO / "scripts" / "torch2_venv.sh")], capture_output=True,
                             text=True, timeout=1500).stderr.strip()
        pytest.skip(f"SKIPPED LOUDLY: deepspeed/accelerate not installed in {torch2_python} "
                    f"({r.stderr.strip()[-300:]}); scripts/torch2_venv.sh says: {why[-1500:]}")
    return torch2_python


def launcher_traps(tmp_path):
    """A directory of `ssh`, `pdsh`, ... that append their argv to a file and fail."""
    bin_dir, calls = tmp_path / "traps", tmp_path / "launcher-calls"
    bin_dir.mkdir()
    for name in LAUNCHERS:
        trap = bin_dir / name
        trap.write_text(f'#!/bin/sh\necho "{name} $*" >> "{calls}"\nexit 1\n')
        trap.chmod(0o755)
    return bin_dir, calls


def run_job(tmp_path, python, script, *flags, **env_extra):
    """Runs SCRIPT on 2 pods x 2 workers; returns (rows written by the workers, pod0's IP)."""
    out = tmp_path / "out.jsonl"
    bin_dir, calls = launcher_traps(tmp_path)
    env = muster_env(PYTHON_EXEC=python, OUT=out, PATH=f"{bin_dir}:{os.environ['PATH']}",
                     **env_extra)
    with Pods(NNODES, tmp_path) as pods:
        procs = [pod.run([MUSTER, "run", "--nnodes", NNODES, "--nproc-per-node", NPROC,
                          "--rdzv-endpoint", ENDPOINT, "--rdzv-id", "ds",
                          "--node-rank", pod.index, *flags, script], env=env)
                 for pod in pods]
        deadline = time.monotonic() + 300
        for pod, p in zip(pods, procs):
            try:
                p.wait(max(1.0, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                raise AssertionError(f"agent on {pod.name} still running after 300 s; stderr:\n"
                                     f"{read_text(p.err_path)[-3000:]}") from None
            err = read_text(p.err_path)
            assert p.returncode == 0, f"{pod.name} exited {p.returncode}:\n{err[-4000:]}"
            assert f"job succeeded: all {WORLD} workers on {NNODES} nodes exited 0" in err, \
                err[-3000:]
        master_ip = pods[0].ip
    assert not calls.exists(), f"a launcher was called: {calls.read_text()}"
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    assert len(rows) == WORLD, rows
    return rows, master_ip


def check_deepspeed_rows(rows, master_ip):
    assert sorted(r["ds_rank"] for r in rows) == list(range(WORLD))
    for r in rows:
        env = r["env"]
        assert r["ds_rank"] == int(env["RANK"]) and r["ds_world"] == WORLD == int(env["WORLD_SIZE"])
        assert r["ds_local_rank"] == int(env["LOCAL_RANK"]), r
        assert r["ds_rank"] == NPROC * int(env["GROUP_RANK"]) + int(env["LOCAL_RANK"]), r
        # DeepSpeed's per-node contract, as its launcher sets it.
        assert (env["CROSS_RANK"], env["CROSS_SIZE"], env["LOCAL_SIZE"]) == \
            (env["GROUP_RANK"], str(NNODES), str(NPROC)), env
        assert r["hostname"] == f"pod{env['GROUP_RANK']}", r  # --node-rank pins the pods
        assert env["MASTER_ADDR"] == master_ip, env
        assert r["accelerator"] == "cpu" and r["ds_backend"] == "gloo", r
        assert r["sum"] == sum(range(1, WORLD + 1)) and r["gathered"] == list(range(WORLD)), r
        check_no_launcher(r)


def check_no_launcher(r):
    """The census: the pod holds muster (PID 1, and its own helpers such as its watchdog:
    processes of the muster binary) and its two workers, nothing else."""
    procs = {p["pid"]: p for p in r["procs"]}
    where = f"pod{r['env']['GROUP_RANK']} processes: " + "; ".join(
        f"{p['pid']}<-{p['ppid']} {p['comm']} {' '.join(p['argv'])[:150]}" for p in r["procs"])
    assert r["ppid"] == 1 and procs[1]["comm"] == "muster", where  # muster's own child
    assert procs[1]["argv"][:2] == [str(MUSTER), "run"], where
    for p in r["procs"]:
        assert p["comm"] not in LAUNCHERS, where
        assert not any("deepspeed.launcher" in a or a.endswith("/deepspeed") for a in p["argv"]), \
            where
    workers = [p for p in r["procs"] if p["argv"][:1] != [str(MUSTER)]]
    assert len(workers) == NPROC, where
    assert all(p["ppid"] == 1 and str(DS_SCRIPT) in p["argv"] for p in workers), where


def test_deepspeed_init_distributed_with_local_rank_arg(ds_python, tmp_path):
    """A DeepSpeed-style script that parses --local_rank (muster's --local-rank-arg)."""
    rows, master_ip = run_job(tmp_path, ds_python, DS_SCRIPT, "--local-rank-arg")
    check_deepspeed_rows(rows, master_ip)
    node_cpus = sorted(os.sched_getaffinity(0))
    for r in rows:
        assert r["arg_local_rank"] == int(r["env"]["LOCAL_RANK"]), r
        assert r["affinity"] == node_cpus, r  # no binding asked for: the node's CPUs


def test_deepspeed_init_distributed_from_env_with_bound_cores(ds_python, tmp_path):
    """The same script without --local_rank (it reads LOCAL_RANK), with --bind-cores-to-rank:
    each worker's sched_getaffinity is its own share of its node's CPUs."""
    node_cpus = set(os.sched_getaffinity(0))
    if len(node_cpus) < NPROC:
        pytest.skip(f"SKIPPED LOUDLY: {len(node_cpus)} CPU(s) here; disjoint shares for "
                    f"{NPROC} workers need at least {NPROC}")
    rows, master_ip = run_job(tmp_path, ds_python, DS_SCRIPT, "--bind-cores-to-rank")
    check_deepspeed_rows(rows, master_ip)
    by_node = {}
    for r in rows:
        assert r["arg_local_rank"] is None, r  # muster passed no --local_rank
        by_node.setdefault(r["hostname"], []).append(set(r["affinity"]))
    assert sorted(by_node) == ["pod0", "pod1"], by_node
    for node, shares in by_node.items():
        assert len(shares) == NPROC and all(shares), (node, shares)
        assert not shares[0] & shares[1], (node, shares)  # disjoint
        # Within the node's CPUs, and all of them used (there are at least NPROC).
        assert shares[0] | shares[1] == node_cpus, (node, shares, node_cpus)


def test_accelerate_accelerator_sees_muster_ranks(ds_python, tmp_path):
    """`Accelerator()` in each worker: process index/count and local index are muster's
    RANK/WORLD_SIZE/LOCAL_RANK, and its collectives reach all four workers."""
    rows, master_ip = run_job(tmp_path, ds_python, ACC_SCRIPT, ACCELERATE_USE_CPU="true")
    assert sorted(r["process_index"] for r in rows) == list(range(WORLD))
    for r in rows:
        env = r["env"]
        assert r["process_index"] == int(env["RANK"]) == r["torch_rank"], r
        assert r["num_processes"] == int(env["WORLD_SIZE"]) == WORLD == r["torch_world"], r
        assert r["local_process_index"] == int(env["LOCAL_RANK"]), r
        assert r["is_main_process"] == (env["RANK"] == "0"), r
        assert r["is_local_main_process"] == (env["LOCAL_RANK"] == "0"), r
        assert "MULTI_CPU" in r["distributed_type"] and r["backend"] == "gloo", r
        assert r["hostname"] == f"pod{env['GROUP_RANK']}" and env["MASTER_ADDR"] == master_ip, r
        assert r["sum"] == sum(range(1, WORLD + 1)) and r["gathered"] == list(range(WORLD)), r
