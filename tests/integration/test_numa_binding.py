"""Issue 28 item 7: `--numa-binding` with torchrun's four modes, read back from each worker's
own /proc entries: its CPU affinity (Cpus_allowed_list) and its memory policy (the policy
/proc/self/numa_maps shows for a mapping without one of its own: `prefer:N`).

There is no GPU here, so the GPUs come from the fake driver libraries (tests/fakes: CUDA
device N at PCI 0000:(18+N):00.0), and the agent reads sysfs from MUSTER_TEST_SYSFS_ROOT
(a variable for tests only): a copy of THIS machine's CPU, cache and NUMA topology from /sys,
plus a numa_node file for each fake GPU's PCI device. The CPU sets the agent computes are
then applied by the real kernel. The 2-socket 8-GPU host is the unit test's
(launch/numa_binding_test.cc)."""
import glob
import os
import re
import shutil
import subprocess

import pytest

from conftest import BUILD, muster_env, run_muster

FAKES = BUILD / "tests" / "fakes"
# Each worker prints "LOCAL_RANK CPUS POLICY".
SHOW = ("echo $LOCAL_RANK $(grep Cpus_allowed_list /proc/self/status | cut -f2) "
        "$(head -n1 /proc/self/numa_maps | cut -d' ' -f2)")


def cpulist(text):
    cpus = set()
    for part in text.strip().split(","):
        if part:
            lo, _, hi = part.partition("-")
            cpus.update(range(int(lo), int(hi or lo) + 1))
    return cpus


def ranges(cpus):
    out, cpus = [], sorted(cpus)
    while cpus:
        lo = hi = cpus.pop(0)
        while cpus and cpus[0] == hi + 1:
            hi = cpus.pop(0)
        out.append(f"{lo}-{hi}" if hi > lo else f"{lo}")
    return ",".join(out)


@pytest.fixture(scope="module")
def sysfs(tmp_path_factory):
    """This machine's topology files, and the fake GPUs on its first NUMA node."""
    if not os.path.exists("/proc/self/numa_maps"):
        pytest.skip("SKIPPED LOUDLY: a kernel without NUMA (no /proc/self/numa_maps)")
    root = tmp_path_factory.mktemp("sysfs")
    patterns = ["devices/system/node/possible", "devices/system/node/node*/cpulist",
                "devices/system/cpu/cpu[0-9]*/topology/physical_package_id",
                "devices/system/cpu/cpu[0-9]*/topology/thread_siblings_list",
                "devices/system/cpu/cpu[0-9]*/cache/index*/level",
                "devices/system/cpu/cpu[0-9]*/cache/index*/type",
                "devices/system/cpu/cpu[0-9]*/cache/index*/shared_cpu_list"]
    for pattern in patterns:
        for path in glob.glob(f"/sys/{pattern}"):
            dest = root / os.path.relpath(path, "/sys")
            dest.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(path, dest)
    node = min(int(p.name[4:]) for p in (root / "devices/system/node").glob("node*"))
    for gpu in range(2):
        dev = root / f"bus/pci/devices/0000:{0x18 + gpu:02x}:00.0"
        dev.mkdir(parents=True)
        (dev / "numa_node").write_text(f"{node}\n")
    return root, node


def worker_line(line):
    """(LOCAL_RANK, CPUS, POLICY) from a worker's line, without a "[default0]:" prefix."""
    return re.sub(r"^\[[^]]*\]:", "", line).split()


def env_with_gpus(sysfs_root, gpus=2, **extra):
    return muster_env(MUSTER_LIBCUDA=FAKES / "libcuda.so.1", MUSTER_LIBNVML=FAKES /
                      "libnvidia-ml.so.1", MUSTER_LIBNCCL=FAKES / "libnccl.so.2",
                      FAKE_GPU_COUNT=gpus, MUSTER_TEST_SYSFS_ROOT=sysfs_root, **extra)


def expected(mode, root, node):
    """torch.numa.binding's answer for local ranks 0 and 1 (both GPUs on `node`), from the
    copied topology, as this test's own reading of it."""
    allowed = os.sched_getaffinity(0)
    node_cpus = cpulist((root / f"devices/system/node/node{node}/cpulist").read_text()) & allowed
    one_node = len(list((root / "devices/system/node").glob("node*"))) == 1
    if mode == "node" or (mode == "socket" and one_node):
        return [node_cpus, node_cpus]
    if mode == "exclusive":
        cores = {}
        for cpu in sorted(node_cpus):
            siblings = (root / f"devices/system/cpu/cpu{cpu}/topology/thread_siblings_list")
            cores.setdefault(min(cpulist(siblings.read_text())), set()).add(cpu)
        keys = sorted(cores)
        each, extra = divmod(len(keys), 2)
        first = each + (1 if extra else 0)
        return [set().union(*(cores[k] for k in keys[:first])),
                set().union(*(cores[k] for k in keys[first:first + each]))]
    pytest.skip(f"SKIPPED LOUDLY: no oracle here for {mode} on a multi-node machine")


@pytest.mark.parametrize("mode", ["node", "socket", "exclusive", "core-complex"])
def test_each_worker_runs_on_its_gpus_cpus_and_prefers_its_node(sysfs, mode, tmp_path):
    root, node = sysfs
    if mode == "exclusive" and len(os.sched_getaffinity(0)) < 2:
        pytest.skip("SKIPPED LOUDLY: exclusive needs two physical cores for two GPUs")
    if mode == "core-complex":
        # On a machine whose node shares one last-level cache, both ranks get that cache's
        # CPUs (torch cycles through the complexes); that is this machine's answer too.
        l3 = cpulist((root / "devices/system/cpu/cpu0/cache/index3/shared_cpu_list").read_text()) \
            if (root / "devices/system/cpu/cpu0/cache/index3").exists() else None
        if l3 is None or not cpulist((root / f"devices/system/node/node{node}/cpulist")
                                     .read_text()) <= l3:
            pytest.skip("SKIPPED LOUDLY: core-complex checked here only where one L3 spans "
                        "the node (the unit test covers several)")
        want = [l3 & os.sched_getaffinity(0)] * 2
    else:
        want = expected(mode, root, node)
    r = run_muster(["--standalone", "--nproc-per-node", "2", "--numa-binding", mode,
                    "--no-python", "sh", "-c", SHOW], env=env_with_gpus(root))
    assert r.returncode == 0, r.stderr
    seen = {}
    for rank, cpus, policy in map(worker_line, r.stdout.splitlines()):
        seen[int(rank)] = (cpus, policy)
    assert seen == {rank: (ranges(want[rank]), f"prefer:{node}") for rank in (0, 1)}, r.stdout
    if mode == "node":  # the control: without the flag, the agent's CPUs and policy
        unbound = run_muster(["--standalone", "--nproc-per-node", "2", "--no-python", "sh", "-c",
                              SHOW], env=env_with_gpus(root))
        assert unbound.returncode == 0, unbound.stderr
        for _, cpus, policy in map(worker_line, unbound.stdout.splitlines()):
            assert (cpulist(cpus), policy) == (os.sched_getaffinity(0), "default"), unbound.stdout
    for rank in (0, 1):
        assert (f"--numa-binding {mode}: local rank {rank} near GPU {rank} "
                f"(0000:{0x18 + rank:02x}:00.0, NUMA node {node}): CPUs {ranges(want[rank])}, "
                f"memory preferred on node {node}") in r.stderr, r.stderr


# Runs in torch 2.x's python: torch.numa.binding's CPU sets for CUDA devices 0 and 1 on the
# NUMA node argv[1], on this machine's /sys, one "MODE CPUS0 CPUS1" line per mode.
TORCH_BINDING = """
import sys
import torch.numa.binding as b
node = int(sys.argv[1])
b._get_device_count = lambda: 2
b._get_numa_node_index_for_device_index = lambda device_index: node
for mode in b.AffinityMode:
    sets = [b._get_ranges_str_from_ints(b._get_logical_cpus_to_bind_to(
        device_index=d, numa_options=b.NumaOptions(affinity_mode=mode))) for d in (0, 1)]
    print(mode.value, *sets)
"""


def test_cpu_sets_are_torchs_own(sysfs, torch2_python):
    """torch 2.x's binding.py itself, with its GPU lookup replaced by the fake GPUs' node,
    against what muster's workers run on, mode by mode."""
    root, node = sysfs
    out = subprocess.run([torch2_python, "-c", TORCH_BINDING, str(node)], capture_output=True,
                         text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    torch_sets = {line.split()[0]: line.split()[1:] for line in out.stdout.splitlines()}
    assert sorted(torch_sets) == ["core-complex", "exclusive", "node", "socket"], out.stdout
    for mode, want in torch_sets.items():
        r = run_muster(["--standalone", "--nproc-per-node", "2", "--numa-binding", mode,
                        "--no-python", "sh", "-c", SHOW], env=env_with_gpus(root))
        assert r.returncode == 0, r.stderr
        seen = sorted(worker_line(line)[:2] for line in r.stdout.splitlines())
        assert seen == [["0", want[0]], ["1", want[1]]], (mode, r.stdout)


def test_a_node_the_kernel_cannot_prefer_leaves_cpus_bound_and_the_default_policy(sysfs, tmp_path):
    """GPU 1 on a NUMA node this kernel does not have (a fake node1 listing this machine's
    CPUs): set_mempolicy refuses it (EINVAL), so the agent warns and binds CPUs only."""
    root, node = sysfs
    fake = tmp_path / "sysfs"
    shutil.copytree(root, fake)
    missing = 1 + max(int(p.name[4:]) for p in (fake / "devices/system/node").glob("node*"))
    (fake / f"devices/system/node/node{missing}").mkdir()
    cpus = (fake / f"devices/system/node/node{node}/cpulist").read_text()
    (fake / f"devices/system/node/node{missing}/cpulist").write_text(cpus)
    (fake / "bus/pci/devices/0000:19:00.0/numa_node").write_text(f"{missing}\n")
    r = run_muster(["--standalone", "--nproc-per-node", "2", "--numa-binding", "node",
                    "--no-python", "sh", "-c", SHOW], env=env_with_gpus(fake))
    assert r.returncode == 0, r.stderr
    want = ranges(cpulist(cpus) & os.sched_getaffinity(0))
    assert sorted(map(worker_line, r.stdout.splitlines())) == \
        [["0", want, "default"], ["1", want, "default"]], r.stdout
    assert (f"--numa-binding node: workers are bound to their CPUs only, with the kernel's "
            f"default memory policy (allocate on the node they run on): "
            f"set_mempolicy(MPOL_PREFERRED, node {missing}): Invalid argument") in r.stderr, \
        r.stderr
    assert f"local rank 1 near GPU 1 (0000:19:00.0, NUMA node {missing}): CPUs {want}\n" in \
        r.stderr, r.stderr


@pytest.mark.parametrize("args,env,message", [
    (["--numa-binding", "numa"], {},
     "--numa-binding: 'numa' is not a binding mode; use node, socket, exclusive or core-complex"),
    (["--numa-binding", "node", "--probe", "off"], {"gpus": 2},
     "--numa-binding: local rank 0 would be bound near GPU (CUDA device) 0, but --probe off "
     "leaves muster no list of GPUs"),
    (["--numa-binding", "node"], {"gpus": 0},
     "the GPU probe found no GPU (no NVIDIA driver, or none visible); torchrun fails here too"),
    (["--numa-binding", "node", "--nproc-per-node", "3"], {"gpus": 2},
     "local rank 2 would be bound near GPU (CUDA device) 2, but CUDA sees 2 GPUs for 3 "
     "workers (--nproc-per-node)"),
    (["--numa-binding", "socket", "--bind-cores-to-rank"], {},
     "--numa-binding: places each worker on the CPUs near its GPU, and --bind-cores-to-rank"),
], ids=["bad-mode", "probe-off", "no-gpu", "more-workers-than-gpus", "two-bindings"])
def test_bad_binding_is_refused_before_any_worker_starts(sysfs, tmp_path, args, env, message):
    root, _ = sysfs
    marker = tmp_path / "started"
    r = run_muster(["--standalone", *args, "--no-python", "touch", marker],
                   env=env_with_gpus(root, **{"gpus": env.get("gpus", 2)}))
    assert r.returncode == 2, r.stderr
    assert message in r.stderr, r.stderr
    assert not marker.exists()


def test_a_gpu_missing_from_sysfs_is_named(sysfs, tmp_path):
    root, _ = sysfs
    r = run_muster(["--standalone", "--nproc-per-node", "1", "--numa-binding", "node",
                    "--no-python", "true"], env=env_with_gpus(root, gpus=3))
    assert r.returncode == 2, r.stderr
    assert "--numa-binding: cannot find the NUMA node of GPU 2 (0000:1a:00.0): open " in r.stderr
    assert "bus/pci/devices/0000:1a:00.0/numa_node: No such file or directory" in r.stderr


def test_dry_run_shows_the_binding():
    r = run_muster(["--dry-run", "--numa_binding=core-complex", "--no-python", "true"])
    assert r.returncode == 0, r.stderr
    assert "numa binding" in r.stdout and "core-complex: local rank N on CPUs near GPU N" in \
        r.stdout, r.stdout
    assert "(from --numa-binding)" in r.stdout or "--numa_binding" in r.stdout, r.stdout
