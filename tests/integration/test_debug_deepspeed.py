"""Issue 5: debug mode with `muster exec`, and the DeepSpeed-compatible extras."""
import os
import signal
import subprocess
import time

from conftest import FAKE, MUSTER, REPO, muster_env, needs_torch, wait_for
from multinode import Agents


@needs_torch
def test_debug_mode_exec_ranks_by_hand(tmp_path):
    dirs = [tmp_path / f"node{i}" for i in range(2)]
    agents = Agents(2, ["--debug", "--debug-command", "sleep infinity", "--nnodes", "2",
                        "--nproc-per-node", "2", REPO / "examples" / "allreduce.py"],
                    per_agent=lambda i: ["--node-rank", i, "--debug-dir", dirs[i]])
    wait_for(lambda: all((d / "hostfile").exists() for d in dirs), 30, what="env files")
    hostfile = (dirs[0] / "hostfile").read_text().split("\n")
    assert hostfile[0].endswith(" slots=2") and hostfile[1].endswith(" slots=2")
    env0 = (dirs[1] / "rank-2.env").read_text()
    assert "export RANK='2'" in env0 and "export WORLD_SIZE='4'" in env0
    assert "export TORCHELASTIC_USE_AGENT_STORE='True'" in env0
    execs = [subprocess.Popen([str(MUSTER), "exec", "--rank", str(r), "--debug-dir",
                               str(dirs[r // 2])], stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True, env=muster_env())
             for r in range(4)]
    for r, p in enumerate(execs):
        out, err = p.communicate(timeout=120)
        assert p.returncode == 0, err[-2000:]
        assert f"rank {r}/4" in out and "all_reduce = 10 OK" in out
    for p in agents.procs:  # the debug command runs until the pod is stopped
        assert p.poll() is None
        p.send_signal(signal.SIGTERM)
    for rc, _, err in agents.wait(30):
        # 143: stopped by its own SIGTERM. An agent that hears the job end before its own
        # signal arrives exits with the job's code: 138, the other node left on its SIGTERM.
        assert rc == 143 or (rc == 138 and "left: agent received SIGTERM" in err), err[-2000:]


def test_exec_without_debug_files_names_the_fix(tmp_path):
    r = subprocess.run([str(MUSTER), "exec", "--rank", "3", "--debug-dir", str(tmp_path), "--",
                        "true"], capture_output=True, text=True, env=muster_env())
    assert r.returncode == 2 and "rank 3" in r.stderr and "--debug" in r.stderr


def test_deepspeed_env_local_rank_arg_and_core_binding(tmp_path):
    out = tmp_path / "out"
    cpus = sorted(os.sched_getaffinity(0))
    r = subprocess.run([str(MUSTER), "run", "--nproc-per-node", "2", "--local-rank-arg",
                        "--bind-cores-to-rank", "--no-python", "/bin/sh", "-c",
                        f'echo "$LOCAL_RANK $1 $CROSS_RANK $CROSS_SIZE $LOCAL_SIZE '
                        f'$(grep Cpus_allowed_list /proc/self/status | cut -f2)" >> {out}', "sh"],
                       capture_output=True, text=True, timeout=60, env=muster_env())
    assert r.returncode == 0, r.stderr
    rows = sorted(line.split() for line in out.read_text().splitlines())
    assert [row[1] for row in rows] == ["--local_rank=0", "--local_rank=1"]
    assert all(row[2:5] == ["0", "1", "2"] for row in rows)
    shares = [set(_cpus(row[5])) for row in rows]
    assert not (shares[0] & shares[1]), shares  # disjoint
    assert shares[0] | shares[1] == set(cpus)


def test_bound_cores_set_omp_threads_to_the_share(tmp_path):
    """With --bind-cores-to-rank each worker gets OMP_NUM_THREADS = its share's size (as
    DeepSpeed's launcher sets it), unless the user set OMP_NUM_THREADS."""
    ncpu = len(os.sched_getaffinity(0))
    script = 'echo "$OMP_NUM_THREADS $(grep Cpus_allowed_list /proc/self/status | cut -f2)"'

    def run(nproc, **env):
        out = tmp_path / f"out{nproc}{len(env)}"
        r = subprocess.run([str(MUSTER), "run", "--nproc-per-node", str(nproc),
                            "--bind-cores-to-rank", "--no-python", "/bin/sh", "-c",
                            f"{script} >> {out}"], capture_output=True, text=True, timeout=60,
                           env=muster_env(**env))
        assert r.returncode == 0, r.stderr
        return [line.split() for line in out.read_text().splitlines()]

    for omp, cpus in run(1):
        assert int(omp) == len(_cpus(cpus)) == ncpu
    if ncpu >= 2:
        for omp, cpus in run(2):
            assert int(omp) == len(_cpus(cpus)) < ncpu
    assert {row[0] for row in run(1, OMP_NUM_THREADS="7")} == {"7"}


def _cpus(text):
    out = []
    for part in text.split(","):
        lo, _, hi = part.partition("-")
        out.extend(range(int(lo), int(hi or lo) + 1))
    return out


def test_save_pid_and_hostfile(tmp_path):
    pidfile, hostfile = tmp_path / "pid", tmp_path / "hostfile"
    agent = subprocess.Popen([str(MUSTER), "run", "--save-pid", str(pidfile), "--hostfile",
                              str(hostfile), "--nproc-per-node", "3", "--no-python", str(FAKE),
                              "sleep=0.5"], stderr=subprocess.PIPE, text=True, env=muster_env())
    wait_for(lambda: pidfile.exists(), 10, what="pid file")
    assert int(pidfile.read_text()) == agent.pid
    assert agent.wait(30) == 0
    assert hostfile.read_text() == "127.0.0.1 slots=3\n"
