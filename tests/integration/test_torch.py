"""Acceptance 1 and 6 with real torch workers (Debian's torch 1.13, gloo on CPU)."""
import json
import os
import subprocess

from conftest import REPO, TORCH_PYTHON, TORCHRUN113, muster_env, needs_torch, run_muster

ALLREDUCE = REPO / "examples" / "allreduce.py"
SCRIPTS = REPO / "tests" / "integration" / "scripts"

# Names that legitimately differ between torchrun 1.13 and muster, with the reason.
ONLY_MUSTER = {
    "NODE_RANK": "docs/design.md §4.1: DeepSpeed/Horovod users expect it (seeds/004)",
    "TORCHELASTIC_SIGNALS_TO_HANDLE": "torchrun 2.x sets it (launcher/api.py); 1.13 does not",
    "CROSS_RANK": "docs/design.md §4.1: DeepSpeed's per-node contract (= GROUP_RANK)",
    "CROSS_SIZE": "docs/design.md §4.1: DeepSpeed's per-node contract (= GROUP_WORLD_SIZE)",
    "LOCAL_SIZE": "docs/design.md §4.1: DeepSpeed's per-node contract (= LOCAL_WORLD_SIZE)",
    "PYTHONPATH": "docs/guides/hangs-and-stacks.md: the stack hook's directory, first (the test "
                  "unsets the inherited value so that the name, not only the value, differs)",
    "MUSTER_STACKS_DIR": "docs/guides/hangs-and-stacks.md: where the hook writes the worker's "
                         "stacks",
    "MUSTER_STACKS_SIGNAL": "docs/guides/hangs-and-stacks.md: the signal the hook dumps on",
    "MUSTER_STACKS_OWNER": "docs/guides/hangs-and-stacks.md: set by the hook in the worker "
                           "(its pid), so that the worker's Python children do not register",
    "MUSTER_PREEMPTED": "docs/guides/preemption.md: the file a preemption notice is written to",
    # Issue 28: each under the spelling the workers' torch reads: for 1.13 the older one
    # (TORCH_NCCL_ASYNC_ERROR_HANDLING and TORCH_FR_* are torch 2.x's, not set here).
    "TORCH_NCCL_TRACE_BUFFER_SIZE": "docs/guides/collective-traces.md (older torch 2.x's spelling)",
    "TORCH_NCCL_DUMP_ON_TIMEOUT": "docs/guides/collective-traces.md (older torch 2.x's spelling)",
    "TORCH_NCCL_DEBUG_INFO_TEMP_FILE": "docs/guides/collective-traces.md (older torch 2.x's "
                                       "spelling)",
}
ONLY_TORCHRUN = {
    # torchrun 1.13 exports these into its own environment when it starts; they are
    # inherited by workers as a side effect of its Python logging/threading set-up.
}
# Values that legitimately differ (same names).
VALUE_DIFFERS = {
    "MASTER_PORT": "each launcher picks its own free port",
    "TORCHELASTIC_RUN_ID": "random per launch with --standalone",
    "TORCHELASTIC_ERROR_FILE": "per-launch temporary directory",
    "TORCHELASTIC_USE_AGENT_STORE": "1.13 --standalone uses its c10d backend (False too); "
                                    "kept in the list because 2.x prints True",
    "MASTER_ADDR": "torchrun 1.13 c10d advertises the FQDN; muster's static store 127.0.0.1",
    "ENVDUMP_DIR": "this test's output directory, one per launcher",
}


@needs_torch
def test_allreduce_4_workers():
    r = run_muster(["--standalone", "--nproc-per-node", "4", ALLREDUCE], timeout=120)
    assert r.returncode == 0, r.stderr
    for rank in range(4):
        assert f"[default{rank}]:rank {rank}/4" in r.stdout and "all_reduce = 10 OK" in r.stdout


def dump_env(launcher_args, tmp_path, name):
    out = tmp_path / name
    out.mkdir()
    env = muster_env(ENVDUMP_DIR=out)
    env.pop("PYTHONPATH", None)
    r = subprocess.run([*launcher_args, "--standalone", "--nproc_per_node", "2",
                        str(SCRIPTS / "envdump.py"), "--foo", "1"],
                       capture_output=True, text=True, timeout=120, env=env)
    assert r.returncode == 0, r.stderr[-2000:]
    return [json.loads((out / f"{i}.json").read_text()) for i in range(2)]


@needs_torch
def test_worker_env_matches_torchrun_113(tmp_path):
    ours = dump_env([str(REPO / "build" / "bin" / "muster"), "run"], tmp_path, "muster")
    theirs = dump_env([TORCH_PYTHON, str(TORCHRUN113)], tmp_path, "torchrun")
    for rank in range(2):
        a, b = ours[rank]["env"], theirs[rank]["env"]
        # The lists above are exact: a stale entry fails too.
        assert set(a) - set(b) == set(ONLY_MUSTER), sorted(set(a) ^ set(b))
        assert set(b) - set(a) == set(ONLY_TORCHRUN), sorted(set(a) ^ set(b))
        differing = {k for k in set(a) & set(b) if a[k] != b[k]} - set(VALUE_DIFFERS)
        assert not differing, {k: (a[k], b[k]) for k in differing}
        # Same command line shape: python -u script args.
        assert ours[rank]["argv"][1:] == theirs[rank]["argv"][1:] == ["--foo", "1"]


@needs_torch
def test_record_error_is_root_cause(tmp_path):
    r = run_muster(["--nproc-per-node", "3", "--standalone",
                    SCRIPTS / "raise_on_rank.py"], env=muster_env(FAIL_RANK=1), timeout=120)
    assert r.returncode == 1, r.stderr
    last = r.stderr.strip().splitlines()[-1]
    assert "rank 1" in last and "ValueError: boom from rank 1" in last, last
    assert "exiting 1" in last
