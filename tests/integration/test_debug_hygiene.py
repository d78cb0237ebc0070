"""Issue 15, item 6: debug mode's files are only there while their agent lives.

An agent in debug mode holds a lock on its --debug-dir and removes its rank-N.env files
when it exits; `muster exec` refuses the files of an agent that was killed (their store's
MASTER_PORT is dead: a rank started from them used to hang), naming that agent's pid; a
second agent given the same directory is refused at start; the default sshd is not started
on a port something already listens on (the host's own sshd on bare metal).
"""
import os
import signal
import socket
import subprocess

import pytest

from conftest import MUSTER, muster_env, pid_alive, wait_for

DEBUG_JOB = ["--nproc-per-node", "2", "--no-python", "true"]


def start_debug_agent(debug_dir, *extra):
    return subprocess.Popen(
        [str(MUSTER), "run", "--debug", "--debug-command", "sleep infinity", "--debug-dir",
         str(debug_dir), *extra, *DEBUG_JOB],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=muster_env())


def exec_rank(debug_dir, rank=0):
    return subprocess.run([str(MUSTER), "exec", "--rank", str(rank), "--debug-dir",
                           str(debug_dir), "--", "true"],
                          capture_output=True, text=True, timeout=30, env=muster_env())


def read_pid_file(debug_dir):
    try:
        return (debug_dir / "agent.pid").read_text().strip()
    except FileNotFoundError:
        return None


def test_exec_refuses_the_files_of_a_killed_agent(tmp_path):
    agent = start_debug_agent(tmp_path)
    try:
        wait_for(lambda: (tmp_path / "rank-1.env").exists(), 30, what="rank-1.env")
        assert exec_rank(tmp_path).returncode == 0  # a live agent's files work
        agent.kill()
        agent.wait(10)
    finally:
        if agent.poll() is None:
            agent.kill()
        agent.communicate()
    r = exec_rank(tmp_path)
    assert r.returncode == 2, r.stderr
    assert f"pid {agent.pid}" in r.stderr and "muster run --debug" in r.stderr, r.stderr
    # The next agent on this directory takes it over and writes its own files.
    nxt = start_debug_agent(tmp_path)
    try:
        def took_over():
            if nxt.poll() is not None:  # say why, instead of waiting out the deadline
                raise AssertionError(f"the next agent exited {nxt.returncode}: "
                                     f"{nxt.communicate()[1][-2000:]}")
            return read_pid_file(tmp_path) == str(nxt.pid)
        wait_for(took_over, 30, what="the new agent's pid file")
        wait_for(lambda: (tmp_path / "rank-0.env").exists(), 30, what="rank-0.env")
        assert exec_rank(tmp_path).returncode == 0
    finally:
        nxt.send_signal(signal.SIGTERM)
        nxt.communicate(timeout=30)


def test_exiting_agent_removes_its_files(tmp_path):
    agent = start_debug_agent(tmp_path)
    wait_for(lambda: (tmp_path / "rank-1.env").exists(), 30, what="rank-1.env")
    agent.send_signal(signal.SIGTERM)
    _, err = agent.communicate(timeout=30)
    assert agent.returncode == 143, err[-2000:]
    assert sorted(os.listdir(tmp_path)) == [], "debug files left after the agent exited"
    r = exec_rank(tmp_path)
    assert r.returncode == 2 and "no environment for rank 0" in r.stderr, r.stderr


def test_second_agent_on_the_same_debug_dir_is_refused(tmp_path):
    first = start_debug_agent(tmp_path)
    try:
        wait_for(lambda: (tmp_path / "rank-0.env").exists(), 30, what="rank-0.env")
        before = (tmp_path / "rank-0.env").read_text()
        second = start_debug_agent(tmp_path)
        _, err = second.communicate(timeout=30)
        assert second.returncode == 2, err[-2000:]
        assert "--debug-dir" in err and f"pid {first.pid}" in err, err
        assert "its own --debug-dir" in err, err
        assert (tmp_path / "rank-0.env").read_text() == before  # untouched
        assert pid_alive(first.pid)
    finally:
        first.send_signal(signal.SIGTERM)
        first.communicate(timeout=30)


@pytest.mark.skipif(not os.access("/usr/sbin/sshd", os.X_OK),
                    reason="/usr/sbin/sshd is not installed: debug mode's default command is "
                           "sleep infinity and opens no port (scripts/setup.sh installs it)")
def test_default_sshd_refuses_a_port_in_use(tmp_path):
    with socket.socket(socket.AF_INET6, socket.SOCK_STREAM) as taken:
        taken.bind(("::", 0))
        taken.listen()
        port = taken.getsockname()[1]
        r = subprocess.run([str(MUSTER), "run", "--debug", "--debug-dir", str(tmp_path),
                            "--debug-port", str(port), *DEBUG_JOB],
                           capture_output=True, text=True, timeout=30, env=muster_env())
    assert r.returncode == 2, r.stderr[-2000:]
    assert f"--debug-port {port}" in r.stderr and "--debug-port 2222" in r.stderr, r.stderr
    assert sorted(os.listdir(tmp_path)) == []  # refused before anything was written
