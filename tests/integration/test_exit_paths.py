"""Every way the agent ends (issue 14 item 9, issue 18 finding 8): each exits with a code of
README's table and leaves nothing in the temporary directory. TMPDIR points at a fresh
directory per test, and the agent makes its run directory there (agent/run_dir.cc prefers
TMPDIR to /dev/shm), so concurrent tests never see each other's."""
import os
import pathlib
import re
import subprocess
import time
import uuid

import pytest

from conftest import FAKE, MUSTER, muster_env, wait_for

PIDS_CGROUP = pathlib.Path("/sys/fs/cgroup/pids")


def _fresh_tmpdir(tmp_path):
    tmpdir = tmp_path / "tmp"
    tmpdir.mkdir(exist_ok=True)
    return tmpdir


@pytest.fixture
def pids_cgroup():
    """A cgroup v1 pids controller group of our own; removed after the test."""
    if not (PIDS_CGROUP / "cgroup.procs").exists() or os.geteuid() != 0:
        pytest.skip(f"SKIPPED LOUDLY: needs root and the cgroup v1 pids controller at "
                    f"{PIDS_CGROUP} to make fork() fail with EAGAIN")
    group = PIDS_CGROUP / f"muster_test_{uuid.uuid4().hex[:12]}"
    group.mkdir()
    yield group
    for _ in range(100):  # the last task may take a moment to leave
        try:
            group.rmdir()
            return
        except OSError:
            time.sleep(0.05)
    raise AssertionError(f"{group} still has tasks: {(group / 'cgroup.procs').read_text()}")


def test_fork_failure_for_want_of_processes_is_transient(tmp_path, pids_cgroup):
    # The agent (main thread, console writer, store thread) and its watchdog take 4 tasks
    # today: with 8 allowed, the fifth of 8 workers cannot be forked (EAGAIN).
    (pids_cgroup / "pids.max").write_text("8")
    tmpdir = _fresh_tmpdir(tmp_path)
    command = (f"echo $$ > {pids_cgroup}/cgroup.procs && exec {MUSTER} run "
               f"--nproc-per-node 8 --max-restarts 1 --no-python sleep 30")
    r = subprocess.run(["sh", "-c", command], capture_output=True, text=True, timeout=60,
                       env=muster_env(TMPDIR=tmpdir))
    assert r.returncode == 138, r.stderr
    assert "cannot start the worker: fork (clone) failed: Resource temporarily unavailable " \
           "(process limit reached: the pids cgroup's pids.max or ulimit -u); transient" \
           in r.stderr, r.stderr
    assert "(ExitCode policy: restartable)" in r.stderr, r.stderr
    assert "1 of 1 restarts used" in r.stderr and "exiting 138" in r.stderr, r.stderr
    started = re.search(r"attempt 1: started (\d+) worker", r.stderr)
    assert started and 0 < int(started.group(1)) < 8, r.stderr  # the failed one not counted
    # No worker is left (the disarmed watchdog may take a moment to exit).
    wait_for(lambda: (pids_cgroup / "pids.current").read_text().strip() == "0", 5,
             what="every task of the agent's cgroup to exit")
    assert os.listdir(tmpdir) == []
