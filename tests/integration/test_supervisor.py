"""Issue 18 finding 1, mode session: a process that both leaves its worker's session and
clears its environment (`env -i setsid`, then a double fork) carries no mark and is in no
tracked session; only its parentage finds it. Without a cgroup the process the user started
stays as a supervisor (a child subreaper) above the agent, so that such an orphan is killed
whether the agent or the supervisor is SIGKILLed. As PID 1 nothing changes (no supervisor).
"""
import os
import shutil
import signal
import subprocess
import sys

import pytest

from conftest import FAKE, MUSTER, fake, muster_env, pid_alive, read_pids, run_muster, wait_for

NEEDS_PIDNS = pytest.mark.skipif(
    shutil.which("unshare") is None or os.geteuid() != 0,
    reason="SKIPPED LOUDLY: PID namespaces need root and util-linux unshare")


def escapee_worker(tmp_path):
    """A worker that starts a process with an empty environment in a new session (the
    subshell exits, so it is an orphan), writes its pid to `escapees` and sleeps."""
    escapees = tmp_path / "escapees"
    script = tmp_path / "worker.sh"
    script.write_text("#!/bin/sh\n"
                      "env -i /usr/bin/setsid /bin/sh -c "
                      f"'(/bin/sleep 1000 & echo $! >> {escapees})'\n"
                      "exec /bin/sleep 1000\n")
    script.chmod(0o755)
    return script, escapees


def muster_children(pid):
    """Children of `pid` that are muster processes (the agent under its supervisor)."""
    out = []
    try:
        with open(f"/proc/{pid}/task/{pid}/children") as f:
            kids = [int(x) for x in f.read().split()]
    except OSError:
        return out
    for kid in kids:
        try:
            with open(f"/proc/{kid}/comm") as f:
                if f.read().strip() == "muster":  # not "muster-watchdog"
                    out.append(kid)
        except OSError:
            continue
    return out


def agent_of(proc):
    """The agent's pid: the supervisor's muster child, or the process itself without one."""
    kids = muster_children(proc.pid)
    return kids[0] if kids else proc.pid


@pytest.mark.parametrize("victim", ["agent", "supervisor"])
def test_env_cleared_setsid_orphan_dies_when_either_process_is_sigkilled(tmp_path, victim):
    script, escapees = escapee_worker(tmp_path)
    proc = subprocess.Popen([str(MUSTER), "run", "--containment", "session", "--nproc-per-node",
                             "2", "--no-python", str(script)], stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, text=True, env=muster_env())
    pids = []
    try:
        pids = wait_for(lambda: len(read_pids(escapees)) == 2 and read_pids(escapees), 10,
                        what="2 escapees")
        for pid in pids:  # what the watchdog cannot find: no mark, no tracked session
            with open(f"/proc/{pid}/environ", "rb") as f:
                assert b"MUSTER" not in f.read(), f"escapee {pid} kept the agent's mark"
        agent = agent_of(proc)
        os.kill(agent if victim == "agent" else proc.pid, signal.SIGKILL)
        proc.wait(timeout=10)
        wait_for(lambda: not any(pid_alive(p) for p in pids), 3,
                 what=f"escapees {pids} to die after SIGKILL of the {victim}")
        wait_for(lambda: not pid_alive(agent), 3, what=f"the agent {agent} to exit")
        # The supervisor re-raises the agent's signal: the caller sees what it saw before.
        assert proc.returncode == -signal.SIGKILL, proc.stderr.read()
        if victim == "supervisor":
            assert "the supervisor (pid %d) is gone" % proc.pid in proc.stderr.read()
    finally:
        proc.kill()
        for pid in read_pids(escapees):
            if pid_alive(pid):
                os.kill(pid, signal.SIGKILL)


def test_supervisor_forwards_signals_once_and_exits_as_the_agent(tmp_path):
    """SIGINT to the supervisor's whole process group (a terminal's ^C) reaches the agent
    once (it would escalate on a second); the exit code and the orphan cleanup at a normal
    end pass through the supervisor."""
    stamps, daemons = tmp_path / "stamps", tmp_path / "daemons"
    proc = subprocess.Popen([str(MUSTER), "run", "--containment", "session", "--nproc-per-node",
                             "2", *fake(f"stamp={stamps}", "sleep=-1")], stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, text=True, env=muster_env(),
                            start_new_session=True)
    wait_for(lambda: stamps.exists() and len(stamps.read_text().splitlines()) == 2, 10,
             what="2 workers")
    agent = agent_of(proc)
    assert agent != proc.pid and os.getpgid(agent) == agent, "no supervisor above the agent"
    os.killpg(proc.pid, signal.SIGINT)
    _, err = proc.communicate(timeout=15)
    assert proc.returncode == 130, err
    assert "received SIGINT" in err and "again" not in err, err
    script, escapees = escapee_worker(tmp_path)
    script.write_text(script.read_text().replace("exec /bin/sleep 1000", "exit 3"))
    r = run_muster(["--containment", "session", "--no-python", str(script)], timeout=30)
    assert r.returncode == 3, r.stderr
    pids = read_pids(escapees)
    assert pids and not any(pid_alive(p) for p in pids), f"escapees {pids} outlived the job"


def test_save_pid_is_the_supervisor(tmp_path):
    pidfile = tmp_path / "pid"
    proc = subprocess.Popen([str(MUSTER), "run", "--containment", "session", "--save-pid",
                             str(pidfile), *fake("sleep=0.5")], stderr=subprocess.PIPE,
                            text=True, env=muster_env())
    wait_for(lambda: pidfile.exists(), 10, what="pid file")
    assert int(pidfile.read_text()) == proc.pid
    assert proc.wait(30) == 0


@NEEDS_PIDNS
def test_as_pid1_there_is_no_supervisor(tmp_path):
    """Muster as PID 1 of a PID namespace: no supervisor (the worker's parent is PID 1), and
    --dry-run says so."""
    r = subprocess.run(["unshare", "--pid", "--fork", "--mount-proc", str(MUSTER), "run",
                        "--containment", "session", "--no-python", "/bin/sh", "-c",
                        "echo ppid=$PPID"], capture_output=True, text=True, timeout=30,
                       env=muster_env())
    assert r.returncode == 0, r.stderr
    assert "ppid=1" in r.stdout, r.stdout + r.stderr
    r = subprocess.run(["unshare", "--pid", "--fork", "--mount-proc", str(MUSTER), "run",
                        "--dry-run", "--containment", "session", "--no-python", "true"],
                       capture_output=True, text=True, timeout=30, env=muster_env())
    assert "session (--containment session), as PID 1 (no supervisor needed)" in r.stdout, (
        r.stdout + r.stderr)
    r = run_muster(["--dry-run", "--containment", "session", "--no-python", "true"])
    assert "session (--containment session), under a supervisor" in r.stdout, r.stdout


TRACER = r"""
import ctypes, sys, time
libc = ctypes.CDLL(None, use_errno=True)
PTRACE_SEIZE = 0x4206
if libc.ptrace(PTRACE_SEIZE, int(sys.argv[1]), None, None) != 0:
    sys.exit("ptrace: errno %d" % ctypes.get_errno())
print("attached", flush=True)
time.sleep(1000)  # never waits for the tracee: its zombie stays held
"""


def test_supervisor_gives_up_on_a_zombie_a_tracer_holds(tmp_path):
    """Issue 31 item 4: a ptrace tracer that never waits holds a dead worker's zombie; its
    parent cannot reap it. The agent gives up after its kill grace and exits 143; the
    supervisor, which then inherits the zombie, waits 10 s at most for it (on main it
    blocked in waitpid until the tracer let go), names it and exits as the agent did."""
    pids = tmp_path / "pids"
    script = tmp_path / "worker.sh"
    script.write_text(f"#!/bin/sh\necho $$ >> {pids}\nexec /bin/sleep 1000\n")
    script.chmod(0o755)
    proc = subprocess.Popen([str(MUSTER), "run", "--containment", "session",
                             "--shutdown-timeout", "1s", "--no-python", str(script)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                            env=muster_env())
    tracer = None
    try:
        worker = wait_for(lambda: read_pids(pids), 10, what="the worker's pid")[0]
        tracer = subprocess.Popen([sys.executable, "-c", TRACER, str(worker)],
                                  stdout=subprocess.PIPE, text=True)
        assert tracer.stdout.readline().strip() == "attached", "the tracer could not attach"
        proc.send_signal(signal.SIGTERM)
        # 1 s of shutdown timeout, the agent's 10 s kill grace, the supervisor's 10 s.
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            pytest.fail("the supervisor still waits for the traced zombie 30 s after SIGTERM")
        err = proc.stderr.read()
        assert proc.returncode == 143, err
        assert (f"process {worker} of the job was not reaped within 10s of SIGKILL: a ptrace "
                f"tracer (pid {tracer.pid}) holds its zombie") in err, err
    finally:
        if tracer is not None:
            tracer.kill()
            tracer.wait()
        proc.kill()
        proc.wait()
