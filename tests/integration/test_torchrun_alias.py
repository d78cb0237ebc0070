"""Issue 28 item 3: muster started by the name `torchrun` (a symlink or a copy on PATH, as a
container image or a venv installs it) is `muster run`, with torchrun's argument rules, so
scripts and tools that call torchrun run muster unchanged."""
import subprocess

from conftest import MUSTER, REPO, muster_env, needs_torch

ALLREDUCE = REPO / "examples" / "allreduce.py"


def _torchrun_on_path(tmp_path):
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "torchrun").symlink_to(MUSTER)
    env = muster_env()
    env["PATH"] = f"{bin_dir}:{env['PATH']}"
    return env


@needs_torch
def test_torchrun_symlink_runs_a_two_worker_torch_job(tmp_path):
    """torchrun's own spelling (underscores, `=` values) through the symlink: two real torch
    workers do a gloo all_reduce, each sees the standalone job's environment."""
    env = _torchrun_on_path(tmp_path)
    r = subprocess.run(["torchrun", "--standalone", "--nnodes=1", "--nproc_per_node=2",
                        "--max_restarts=0", str(ALLREDUCE)], capture_output=True, text=True,
                       timeout=180, env=env)
    assert r.returncode == 0, r.stderr[-3000:]
    for rank in (0, 1):
        assert f"[default{rank}]:rank {rank}/2 (local {rank}, restart 0" in r.stdout, r.stdout
    assert r.stdout.count("all_reduce = 3 OK") == 2, r.stdout
    assert "job succeeded: all 2 workers on 1 node exited 0" in r.stderr, r.stderr[-3000:]


def test_torchrun_symlink_answers_as_muster_run(tmp_path):
    """`torchrun --help` is `muster run --help`; a bad flag is refused as run refuses it
    (exit 2, naming the flag), not as an unknown muster command."""
    env = _torchrun_on_path(tmp_path)
    help_text = subprocess.run(["torchrun", "--help"], capture_output=True, text=True,
                               timeout=30, env=env)
    assert help_text.returncode == 0, help_text.stderr
    assert help_text.stdout.startswith("Usage: muster run "), help_text.stdout[:300]
    bad = subprocess.run(["torchrun", "--nproc_per_node=two", "train.py"], capture_output=True,
                         text=True, timeout=30, env=env)
    assert bad.returncode == 2, bad.stderr
    assert "--nproc-per-node" in bad.stderr and "unknown command" not in bad.stderr, bad.stderr
