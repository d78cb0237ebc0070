"""Acceptance 4 and 5: signals, shutdown deadline, SIGKILL of the agent, daemons, PID 1."""
import os
import shutil
import signal
import subprocess
import time

import pytest

from conftest import FAKE, MUSTER, fake, muster_env, pid_alive, read_pids, run_muster, wait_for


def start_agent(args, **kw):
    return subprocess.Popen([str(MUSTER), "run", *map(str, args)], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env=muster_env(), **kw)


def worker_pids(stamps, n):
    rows = wait_for(lambda: len(read_lines(stamps)) >= n and read_lines(stamps), 10,
                    what=f"{n} workers to start")
    return [int(r.split()[2]) for r in rows]


def read_lines(path):
    try:
        return path.read_text().splitlines()
    except FileNotFoundError:
        return []


@pytest.mark.serial
@pytest.mark.parametrize("sig,code", [(signal.SIGTERM, 143), (signal.SIGINT, 130)])
def test_signal_reaches_groups_and_agent_exits_128_plus_n(tmp_path, sig, code):
    stamps, children = tmp_path / "stamps", tmp_path / "children"
    agent = start_agent(["--nproc-per-node", "3",
                         *fake(f"child={children}", f"stamp={stamps}", "sleep=-1")])
    workers = worker_pids(stamps, 3)
    grandchildren = wait_for(lambda: len(read_pids(children)) == 3 and read_pids(children), 5,
                             what="grandchildren")
    t0 = time.monotonic()
    agent.send_signal(sig)
    out, err = agent.communicate(timeout=10)
    elapsed = time.monotonic() - t0
    assert agent.returncode == code, err
    assert elapsed < 1.0, f"workers exit at once on {sig.name}, the agent took {elapsed:.3f}s"
    for pid in workers + grandchildren:
        assert not pid_alive(pid), f"pid {pid} survived {sig.name}"
    assert f"received {sig.name}" in err


@pytest.mark.serial
def test_shutdown_timeout_then_sigkill(tmp_path):
    stamps, children = tmp_path / "stamps", tmp_path / "children"
    agent = start_agent(["--nproc-per-node", "2", "--shutdown-timeout", "1s",
                         *fake("ignore-term", f"child={children}", f"stamp={stamps}", "sleep=-1")])
    workers = worker_pids(stamps, 2)
    grandchildren = wait_for(lambda: len(read_pids(children)) == 2 and read_pids(children), 5,
                             what="grandchildren")
    t0 = time.monotonic()
    agent.send_signal(signal.SIGTERM)
    # Still alive half-way through the grace period: SIGTERM is ignored.
    time.sleep(0.5)
    assert all(pid_alive(p) for p in workers + grandchildren)
    out, err = agent.communicate(timeout=10)
    elapsed = time.monotonic() - t0
    assert agent.returncode == 143, err
    assert 1.0 <= elapsed < 1.1, f"SIGKILL should follow 1 s after SIGTERM, took {elapsed:.3f}s"
    for pid in workers + grandchildren:
        assert not pid_alive(pid), f"pid {pid} survived SIGKILL"
    assert "SIGKILL" in err


@pytest.mark.serial
def test_sigkill_of_agent_leaves_nothing(tmp_path):
    stamps, children = tmp_path / "stamps", tmp_path / "children"
    agent = start_agent(["--nproc-per-node", "3",
                         *fake(f"child={children}", f"stamp={stamps}", "sleep=-1")])
    workers = worker_pids(stamps, 3)
    grandchildren = wait_for(lambda: len(read_pids(children)) == 3 and read_pids(children), 5,
                             what="grandchildren")
    agent.kill()
    agent.wait(timeout=5)
    wait_for(lambda: not any(pid_alive(p) for p in workers + grandchildren), 1.0,
             what="workers and grandchildren to die after SIGKILL of the agent")


def test_double_forked_daemon_is_cleaned_up_when_job_ends(tmp_path):
    daemons = tmp_path / "daemons"
    r = run_muster(["--nproc-per-node", "2", *fake(f"daemon={daemons}", "sleep=0.2")])
    assert r.returncode == 0, r.stderr
    pids = read_pids(daemons)
    assert len(pids) == 2
    for pid in pids:
        assert not pid_alive(pid), f"daemon {pid} outlived the job"


def test_double_forked_daemon_is_cleaned_up_after_failure(tmp_path):
    daemons = tmp_path / "daemons"
    r = run_muster(["--nproc-per-node", "2",
                    *fake(f"daemon={daemons}", "sleep=0.2", "if-rank=0", "exit=3", "sleep=-1")])
    assert r.returncode == 3, r.stderr
    for pid in read_pids(daemons):
        assert not pid_alive(pid), f"daemon {pid} outlived the job"


@pytest.mark.skipif(shutil.which("unshare") is None or os.geteuid() != 0,
                    reason="SKIPPED LOUDLY: PID namespaces need root and util-linux unshare")
def test_as_pid1_reaps_orphaned_zombies(tmp_path):
    # Inside the namespace the agent is PID 1. The worker orphans a short-lived process
    # (the subshell exits at once; its `sleep` is re-parented to PID 1), then counts
    # zombies after that sleep has exited. The agent must have reaped it.
    script = tmp_path / "worker.sh"
    script.write_text("#!/bin/sh\n"
                      "(sleep 0.1 &)\n"
                      "sleep 0.6\n"
                      "z=$(grep -l '^State:.*Z' /proc/[0-9]*/status 2>/dev/null | wc -l)\n"
                      "echo zombies=$z\n"
                      "[ \"$z\" = 0 ]\n")
    script.chmod(0o755)
    r = subprocess.run(["unshare", "--pid", "--fork", "--mount-proc", str(MUSTER), "run",
                        "--no-python", str(script)], capture_output=True, text=True, timeout=30,
                       env=muster_env())
    assert "zombies=0" in r.stdout, r.stdout + r.stderr
    assert r.returncode == 0, r.stderr


@pytest.mark.skipif(shutil.which("unshare") is None or os.geteuid() != 0,
                    reason="SKIPPED LOUDLY: PID namespaces need root and util-linux unshare")
def test_as_pid1_sigterm_exits_143_and_leaves_nothing(tmp_path):
    stamps = tmp_path / "stamps"
    unshare = subprocess.Popen(["unshare", "--pid", "--fork", "--mount-proc", "--kill-child",
                                str(MUSTER), "run", "--nproc-per-node", "2", "--no-python",
                                str(FAKE), f"stamp={stamps}", "sleep=-1"],
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                               env=muster_env())
    wait_for(lambda: len(read_lines(stamps)) == 2, 10, what="workers in the namespace")
    # unshare does not forward signals: signal the agent (PID 1 inside) by its outer pid.
    with open(f"/proc/{unshare.pid}/task/{unshare.pid}/children") as f:
        (agent_pid,) = [int(x) for x in f.read().split()]
    os.kill(agent_pid, signal.SIGTERM)
    out, err = unshare.communicate(timeout=10)
    assert unshare.returncode == 143, err
    assert "received SIGTERM" in err
