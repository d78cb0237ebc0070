"""An agent killed before it could clean up (SIGKILL, the OOM killer) leaves its temporary
run directory; the next agent removes it, and only it: not a live agent's directory, not
a failed job's kept logs (agent/lifecycle/stale_run_dirs.h)."""
import os
import signal
import subprocess
import time

from conftest import MUSTER, fake, muster_env, run_muster, wait_for


def roots(tmp):
    return sorted(p for p in tmp.iterdir() if p.name.startswith("muster_"))


def start(args, env):
    return subprocess.Popen([str(MUSTER), "run", *map(str, args)], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env=env)


def test_next_agent_removes_what_a_killed_agent_left(tmp_path):
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    env = muster_env(TMPDIR=tmp)
    killed = start([*fake("sleep=30")], env)
    (left,) = wait_for(lambda: [r for r in roots(tmp) if (r / ".muster-lock").exists()], 20,
                       what="the agent's locked run directory")
    killed.send_signal(signal.SIGKILL)
    killed.communicate(timeout=20)
    time.sleep(0.5)  # the watchdog stops the worker
    assert left.exists(), "nothing was left to clean up: the test proves nothing"

    # The next agent removes it at its start; its own directory, locked while it lives,
    # is left alone by the agent after it.
    live = start([*fake("sleep=3")], env)
    (live_root,) = wait_for(lambda: [r for r in roots(tmp) if r != left and
                                     (r / ".muster-lock").exists()], 20,
                            what="the live agent's run directory")
    assert not left.exists()
    r = run_muster([*fake()], env=env)
    assert r.returncode == 0, r.stderr
    assert live_root.exists() and live.poll() is None, r.stderr
    _, err = live.communicate(timeout=30)
    assert live.returncode == 0, err
    assert f"removed {left}: the run directory of an agent killed" in err, err
    assert roots(tmp) == []


def test_a_failed_jobs_kept_logs_are_not_taken_for_stale(tmp_path):
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    env = muster_env(TMPDIR=tmp)
    r = run_muster(["-r", "3", *fake("eprint=boom", "exit=1")], env=env)
    assert r.returncode == 1, r.stderr
    (kept,) = roots(tmp)
    assert not (kept / ".muster-lock").exists()
    r = run_muster([*fake()], env=env)
    assert r.returncode == 0, r.stderr
    assert roots(tmp) == [kept] and "agent killed" not in r.stderr, r.stderr
    assert any("boom" in p.read_text() for p in kept.rglob("stderr.log"))
