"""Issue 30 item 6, "no wedge, no fixed waits": a worker stuck in uninterruptible sleep past
SIGKILL is named (pid, state, wchan) and the agent exits 138 instead of starting a round
beside it; the grace of a stop for a restart is a flag of its own (--restart-grace); the
exit barrier's wait has a flag of its own (--exit-barrier-timeout, torchrun's rdzv-conf
exit_barrier_timeout). docs/guides/stopping-workers.md.

The D state is real: a loop-mounted ext4 frozen with fsfreeze, into which a worker writes
(`echo x > DIR/a` sleeps in percpu_rwsem_wait and SIGKILL does not end it until the thaw).
On main the agent gave up on it after 10 s without naming it, started the next round
beside it and exited with the root cause's code.
"""
import contextlib
import os
import shutil
import subprocess
import time

import pytest

from conftest import MUSTER, muster_env, run_muster, shell_script
from multinode import Agents
from test_containment import MODES, contain


def _run(cmd):
    return subprocess.run(cmd, capture_output=True, text=True, timeout=30)


@contextlib.contextmanager
def frozen_filesystem(tmp_path):
    """A loop-mounted ext4 at tmp_path/frozen, frozen (fsfreeze -f) while the block runs;
    thawed and unmounted after it, whatever happened. Skips LOUDLY where mounting is not
    permitted (not root, no loop devices, no mount(8) or fsfreeze(8))."""
    missing = [t for t in ("mount", "umount", "mkfs.ext4", "fsfreeze") if shutil.which(t) is None]
    if missing or os.geteuid() != 0:
        pytest.skip(f"SKIPPED LOUDLY: a real D state needs root and {', '.join(missing) or 'mount'}")
    img, mnt = tmp_path / "img", tmp_path / "frozen"
    mnt.mkdir()
    with open(img, "wb") as f:
        f.truncate(20 << 20)
    r = _run(["mkfs.ext4", "-q", "-F", str(img)])
    if r.returncode != 0:
        pytest.skip(f"SKIPPED LOUDLY: mkfs.ext4 failed: {r.stderr.strip()}")
    r = _run(["mount", "-o", "loop", str(img), str(mnt)])
    if r.returncode != 0:
        pytest.skip(f"SKIPPED LOUDLY: cannot loop-mount here (losetup/mount not permitted): "
                    f"{r.stderr.strip()}")
    try:
        r = _run(["fsfreeze", "-f", str(mnt)])
        if r.returncode != 0:
            pytest.skip(f"SKIPPED LOUDLY: fsfreeze not permitted: {r.stderr.strip()}")
        yield mnt
    finally:
        _run(["fsfreeze", "-u", str(mnt)])  # EINVAL when not frozen: fine
        # The stuck writer completes and dies once thawed; its open file keeps the mount
        # busy for a moment.
        deadline = time.monotonic() + 20
        while _run(["umount", str(mnt)]).returncode != 0:
            if time.monotonic() > deadline:
                _run(["umount", "-l", str(mnt)])
                break
            time.sleep(0.1)


def wait_until_in_d_state(pid_file, timeout=20):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            pid = int(pid_file.read_text().split()[0])
            with open(f"/proc/{pid}/stat") as f:
                if f.read().rsplit(")", 1)[1].split()[0] == "D":
                    return pid
        except (OSError, ValueError, IndexError):
            pass
        time.sleep(0.05)
    raise AssertionError("the worker never went into uninterruptible sleep")


@pytest.mark.parametrize("mode", MODES)
def test_worker_in_d_state_is_named_and_the_agent_exits_138(tmp_path, mode):
    with frozen_filesystem(tmp_path) as mnt:
        pids = tmp_path / "pids"
        # Rank 0 writes into the frozen filesystem (D state); rank 1 fails once rank 0 is
        # stuck, which stops the round for a restart.
        script = shell_script(tmp_path / "worker.sh",
                              f"if [ \"$RANK\" = 0 ]; then echo $$ > {pids}; echo x > {mnt}/a; fi\n"
                              f"while [ ! -s {pids} ]; do sleep 0.05; done\n"
                              "sleep 1; exit 1\n")
        start = time.monotonic()
        r = run_muster([*contain(mode), "--nproc-per-node", "2", "--max-restarts", "3",
                        "--shutdown-timeout", "60s", "--restart-grace", "1s",
                        "--no-python", str(script)], timeout=90)
        took = time.monotonic() - start
        stuck = int(pids.read_text().split()[0])
        err = r.stdout + r.stderr
        assert r.returncode == 138, err
        # --restart-grace, not --shutdown-timeout, ends the restart's SIGTERM grace.
        assert "sending SIGKILL to what is left of the workers after 1s" in err, err
        named = (f"rank 0 (local_rank 0, pid {stuck}): state D (uninterruptible sleep), "
                 "wchan percpu_rwsem_wait")
        assert named in err, err
        assert "this node leaves the job; exiting 138" in err, err
        assert "attempt 1" not in err, err  # no round beside the stuck worker
        # 1 s of failure, 1 s of grace, 10 s of kill grace (+10 s: the supervisor's, mode
        # session, which names it too).
        assert took < 45, f"took {took:.1f}s"
        if mode == "session":
            assert f"process {stuck} of the job was not reaped within 10s of SIGKILL" in err, err
            assert f"(pid {stuck}: state D (uninterruptible sleep), wchan percpu_rwsem_wait)" \
                in err, err


@pytest.mark.parametrize("mode", MODES)
def test_a_stuck_orphan_of_a_failed_worker_is_named_too(tmp_path, mode):
    """The stuck process is no worker but one a worker started and left behind (an orphan the
    agent adopted, or a process of the attempt's cgroup): named by pid, state and wchan."""
    with frozen_filesystem(tmp_path) as mnt:
        pids = tmp_path / "pids"
        script = shell_script(tmp_path / "worker.sh",
                              f"/bin/sh -c 'echo $$ > {pids}; echo x > {mnt}/a' &\n"
                              f"while [ ! -s {pids} ]; do sleep 0.05; done\n"
                              "sleep 0.5; exit 1\n")
        r = run_muster([*contain(mode), "--max-restarts", "3", "--restart-grace", "1s",
                        "--no-python", str(script)], timeout=90)
        stuck = int(pids.read_text().split()[0])
        err = r.stdout + r.stderr
        assert r.returncode == 138, err
        assert f"pid {stuck}: state D (uninterruptible sleep), wchan percpu_rwsem_wait" in err, err
        assert "attempt 1" not in err, err


def test_d_state_while_exiting_keeps_the_exit_code_and_names_it(tmp_path):
    """A stop for a signal (SIGTERM: 143, here through the preemption component) that gives
    up on a stuck worker keeps its code and names the worker in the last line."""
    with frozen_filesystem(tmp_path) as mnt:
        pids = tmp_path / "pids"
        script = shell_script(tmp_path / "worker.sh", f"echo $$ > {pids}\necho x > {mnt}/a\n")
        proc = subprocess.Popen([str(MUSTER), "run", "--shutdown-timeout", "1s",
                                 "--no-python", str(script)],
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                env=muster_env())
        try:
            stuck = wait_until_in_d_state(pids)
            proc.send_signal(15)
            out, err = proc.communicate(timeout=60)
        finally:
            proc.kill()
            proc.wait()
        assert proc.returncode == 143, err
        last = err.strip().splitlines()[-1]
        assert "exiting 143" in last, err
        assert (f"rank 0 (local_rank 0, pid {stuck}): state D (uninterruptible sleep), wchan "
                "percpu_rwsem_wait") in last, err


@pytest.mark.parametrize("how", ["flag", "rdzv-conf"])
def test_exit_barrier_timeout_ends_the_wait_with_138(tmp_path, how):
    """Node 0's workers exit 0 at once; node 1's run on. With a 2 s exit barrier node 0
    leaves the job 2 s later and exits 138, saying why; the job, short of a node, ends on
    node 1 with the reason. On main node 0 waited as long as node 1 ran (60 s here)."""
    script = shell_script(tmp_path / "worker.sh",
                          "if [ \"$GROUP_RANK\" = 0 ]; then exit 0; fi\nexec sleep 60\n")
    barrier = (["--exit-barrier-timeout", "2s"] if how == "flag"
               else ["--rdzv-conf", "exit_barrier_timeout=2"])
    start = time.monotonic()
    agents = Agents(2, ["--nnodes", "2", "--shutdown-timeout", "2s", "--no-python", str(script)],
                    per_agent=lambda i: ["--node-rank", i, *(barrier if i == 0 else [])])
    try:
        (rc0, out0, err0), (rc1, out1, err1) = agents.wait(timeout=50)
    finally:
        for p in agents.procs:
            p.kill()
    took = time.monotonic() - start
    assert rc0 == 138, err0
    assert ("exit barrier: this node's workers exited 0 2s ago and the rest of the job has not "
            "finished (--exit-barrier-timeout); left the job, exiting 138") in err0, err0
    assert rc1 == 138, err1
    assert "exit barrier" in err1, err1  # the job's reason names why node 0 left
    assert took < 40, f"took {took:.1f}s"


def test_without_exit_barrier_timeout_the_node_waits_for_the_job(tmp_path):
    """The default keeps the wait: node 0 exits 0 only once node 1's workers have."""
    script = shell_script(tmp_path / "worker.sh",
                          "if [ \"$GROUP_RANK\" = 0 ]; then exit 0; fi\nexec sleep 4\n")
    start = time.monotonic()
    agents = Agents(2, ["--nnodes", "2", "--no-python", str(script)],
                    per_agent=lambda i: ["--node-rank", i])
    (rc0, _, err0), (rc1, _, err1) = agents.wait(timeout=60)
    assert (rc0, rc1) == (0, 0), err0 + err1
    assert time.monotonic() - start >= 4
