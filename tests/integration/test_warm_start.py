"""Issue 29, first slice: `muster run --warm-start` forks ranks from a template that imported
torch once (docs/guides/warm_start.md, docs/design.md §4.5a). Real torch 1.13 workers; each
warm result is held against the exec path's on the same job."""
import json
import os
import re
import signal
import subprocess
import time

import pytest

from conftest import MUSTER, REPO, muster_env, needs_torch, pid_alive, run_muster, wait_for

SCRIPTS = REPO / "tests" / "integration" / "scripts"
PROBE = SCRIPTS / "warm_probe.py"
ALLREDUCE = REPO / "examples" / "allreduce.py"
FALLBACK = "warm start: exec'd a worker instead"
# Values that differ between any two runs, warm or not: paths in each run's own directory,
# the store's port, and the pid the stack hook records.
PER_RUN = {"MASTER_PORT", "TORCHELASTIC_ERROR_FILE", "TORCH_NCCL_DEBUG_INFO_TEMP_FILE",
           "MUSTER_PREEMPTED", "PYTHONPATH", "MUSTER_STACKS_DIR", "MUSTER_STACKS_OWNER",
           "PROBE_DIR"}


def probe(tmp_path, name, args, warm, module=False, nproc=2):
    out = tmp_path / name
    out.mkdir()
    flags = ["--warm-start"] if warm else []
    command = ["-m", "warm_probe"] if module else [PROBE]
    r = run_muster([*flags, "--nproc-per-node", nproc, *command, *args], timeout=180,
                   env=muster_env(PROBE_DIR=out), cwd=SCRIPTS if module else None)
    return r, [json.loads((out / f"{i}.json").read_text()) for i in range(nproc)]


@needs_torch
@pytest.mark.parametrize("module", [False, True], ids=["script", "module"])
def test_a_warm_rank_sees_what_an_execd_rank_sees(tmp_path, module):
    warm_run, warm = probe(tmp_path, "warm", ["--foo", "1"], warm=True, module=module)
    exec_run, execd = probe(tmp_path, "exec", ["--foo", "1"], warm=False, module=module)
    assert warm_run.returncode == 0 and exec_run.returncode == 0, warm_run.stderr[-3000:]
    assert FALLBACK not in warm_run.stderr, warm_run.stderr[-3000:]
    for rank in range(2):
        a, b = warm[rank], execd[rank]
        assert a["preloaded"] and not b["preloaded"]  # the warm one did not import torch
        assert set(a["env"]) == set(b["env"]), sorted(set(a["env"]) ^ set(b["env"]))
        differing = {k for k in a["env"] if a["env"][k] != b["env"][k]} - PER_RUN
        assert not differing, {k: (a["env"][k], b["env"][k]) for k in differing}
        assert a["env"]["MUSTER_STACKS_OWNER"] == str(a["pid"])  # the stack hook ran
        for key in ("argv", "name", "file", "spec", "path0", "cwd", "unbuffered", "cpus"):
            assert a[key] == b[key], (key, a[key], b[key])
        # Its own session, as the exec path's spawn child makes; a child of the agent (not
        # of the template), as the exec'd one is.
        assert a["sid"] == a["pid"] == a["pgid"]
        assert a["parent"] == b["parent"] == "muster"
    for run in (warm_run, exec_run):
        for rank in range(2):
            assert f"[default{rank}]:probe rank {rank} says hello" in run.stdout
            assert f"[default{rank}]:probe rank {rank} on stderr" in run.stdout + run.stderr
