"""Every way the agent ends (issue 14 item 9, issue 18 finding 8): each exits with a code of
the exit-code table in docs/reference/exit-codes.md and leaves nothing in the temporary directory. TMPDIR points at a fresh
directory per test, and the agent makes its run directory there (agent/lifecycle/run_dir.cc prefers
TMPDIR to /dev/shm), so concurrent tests never see each other's."""
import os
import signal
import socket
import pathlib
import re
import subprocess
import time
import uuid

import pytest

from conftest import MUSTER, REPO, fake, muster_env, wait_for

PIDS_CGROUP = pathlib.Path("/sys/fs/cgroup/pids")


def _fresh_tmpdir(tmp_path):
    tmpdir = tmp_path / "tmp"
    tmpdir.mkdir(exist_ok=True)
    return tmpdir


def _busy_port():
    """A listening socket (v4 and v6) and its port: the port is in use while it lives."""
    s = socket.socket(socket.AF_INET6, socket.SOCK_STREAM)
    s.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 0)
    s.bind(("::", 0))
    s.listen(1)
    return s, s.getsockname()[1]


def _free_port():
    s, port = _busy_port()
    s.close()
    return port


class Run:
    """One exit path: how it is driven (`drive(tmp_path, env) -> CompletedProcess`), the code
    docs/reference/exit-codes.md's table gives it and a phrase its last lines must hold."""

    def __init__(self, drive, code, says):
        self.drive, self.code, self.says = drive, code, says


def _muster(*args, timeout=60):
    def drive(tmp_path, env):
        return subprocess.run([str(MUSTER), *map(str, args)], capture_output=True, text=True,
                              timeout=timeout, env=env)
    return drive


def _run(*args, timeout=60):
    return _muster("run", *args, timeout=timeout)


def _with(make_args, timeout=60):
    """A run whose arguments need the test's directory or a port made for it."""
    def drive(tmp_path, env):
        return _run(*make_args(tmp_path), timeout=timeout)(tmp_path, env)
    return drive


def _not_executable(tmp_path):
    script = tmp_path / "not_executable"
    script.write_text("#!/bin/sh\n")
    return ["--no-python", script]


def _garbage_pem(tmp_path):
    pem = tmp_path / "bad.pem"
    pem.write_text("not a certificate\n")
    return ["--rdzv-endpoint", f"127.0.0.1:{_free_port()}", "--tls-cert", pem, "--tls-key", pem,
            "--tls-ca", pem, "--rdzv-conf", "join_timeout=10s", *fake("exit=0")]


def _port_in_use(flag_args):
    """Runs `flag_args(port)` while another socket holds the port."""
    def drive(tmp_path, env):
        s, port = _busy_port()
        with s:
            return _run(*flag_args(port), *fake("exit=0"))(tmp_path, env)
    return drive


def _signalled(sig):
    """A running job whose agent gets `sig` once its worker has started."""
    def drive(tmp_path, env):
        stamp = tmp_path / "started"
        agent = subprocess.Popen([str(MUSTER), "run", *fake(f"stamp={stamp}", "sleep=60")],
                                 stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                 env=env)
        wait_for(stamp.exists, 30, what="the worker to start")
        agent.send_signal(sig)
        out, err = agent.communicate(timeout=60)
        return subprocess.CompletedProcess(agent.args, agent.returncode, out, err)
    return drive


def _server_lost(tmp_path, env):
    """A job whose `muster serve` is SIGKILLed while the worker runs."""
    serve = subprocess.Popen([str(MUSTER), "serve", "--port", "0"], stdout=subprocess.PIPE,
                             stderr=subprocess.DEVNULL, text=True, env=env)
    try:
        port = re.search(r":(\d+)$", serve.stdout.readline().strip()).group(1)
        stamp = tmp_path / "started"
        agent = subprocess.Popen(
            [str(MUSTER), "run", "--nnodes", "1:2", "--rdzv-endpoint", f"127.0.0.1:{port}",
             "--rdzv-host", "false", "--rdzv-conf", "last_call_timeout=0s",
             *fake(f"stamp={stamp}", "sleep=60")],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
        wait_for(stamp.exists, 30, what="the worker to start")
    finally:
        serve.kill()
        serve.wait()
    out, err = agent.communicate(timeout=60)
    return subprocess.CompletedProcess(agent.args, agent.returncode, out, err)


def _node_lost(tmp_path, env):
    """Two nodes with --fatal-exit-code 93; node 1's agent is SIGKILLed while both run: node
    0 is left below --nnodes' minimum, a transient end that keeps 138."""
    port = _free_port()
    agents, stamps = [], []
    # The agent SIGKILLed leaves its run directory to the next agent (docs/reference/
    # exit-codes.md): its own TMPDIR, so the survivor's stays checked.
    killed_tmp = tmp_path / "killed-tmp"
    killed_tmp.mkdir()
    try:
        for rank in (0, 1):
            stamps.append(tmp_path / f"started{rank}")
            agents.append(subprocess.Popen(
                [str(MUSTER), "run", "--nnodes", "2", "--node-rank", str(rank),
                 "--rdzv-endpoint", f"127.0.0.1:{port}", "--fatal-exit-code", "93",
                 *fake(f"stamp={stamps[-1]}", "sleep=60")],
                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                env=env if rank == 0 else {**env, "TMPDIR": str(killed_tmp)}))
        wait_for(lambda: all(s.exists() for s in stamps), 30, what="both nodes' workers")
    finally:
        agents[-1].kill()
        agents[-1].communicate(timeout=30)
    out, err = agents[0].communicate(timeout=60)
    return subprocess.CompletedProcess(agents[0].args, agents[0].returncode, out, err)


def _serve_stopped(tmp_path, env):
    serve = subprocess.Popen([str(MUSTER), "serve", "--port", "0"], stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True, env=env)
    assert "listening on" in serve.stdout.readline()
    serve.send_signal(signal.SIGTERM)
    out, err = serve.communicate(timeout=30)
    return subprocess.CompletedProcess(serve.args, serve.returncode, out, err)


def _serve_port_in_use(tmp_path, env):
    s, port = _busy_port()
    with s:
        return _muster("serve", "--port", port)(tmp_path, env)


def _serve_garbage_pem(tmp_path, env):
    pem = tmp_path / "bad.pem"
    pem.write_text("not a certificate\n")
    return _muster("serve", "--port", "0", "--tls-cert", pem, "--tls-key", pem)(tmp_path, env)


def _tmpdir_missing(tmp_path, env):
    return _run(*fake("exit=0"))(tmp_path, {**env, "TMPDIR": str(env["TMPDIR"]) + "/missing"})


EXIT_PATHS = {
    "success": Run(_run(*fake("exit=0")), 0, "job succeeded"),
    "worker_fails_fatally": Run(_run(*fake("exit=3")), 3, "exiting 3"),
    "restart_budget_spent": Run(_run("--max-restarts", 1, *fake("kill=9")), 137,
                                "restart budget spent (1 of 1 restarts used); exiting 137"),
    # --fatal-exit-code: a permanent end exits 93, a transient one keeps its code.
    "fatal_exit_code_budget_spent": Run(
        _run("--max-restarts", 1, "--fatal-exit-code", 93, *fake("kill=9")), 93,
        "restart budget spent (1 of 1 restarts used); exiting 93 (--fatal-exit-code; the root "
        "cause's code is 137)"),
    "fatal_exit_code_not_restartable": Run(
        _run("--restart-policy", "ExitCode", "--max-restarts", 3, "--fatal-exit-code", 93,
             *fake("exit=3")), 93, "not restartable; exiting 93"),
    "fatal_exit_code_rendezvous_timeout": Run(
        _with(lambda t: ["--nnodes", 2, "--rdzv-endpoint", f"127.0.0.1:{_free_port()}",
                         "--rdzv-conf", "join_timeout=2s", "--fatal-exit-code", 93,
                         *fake("exit=0")]), 138, "rendezvous timed out"),
    "fatal_exit_code_node_lost": Run(_node_lost, 138, "exiting 138"),
    "fatal_exit_code_bad_value": Run(_run("--fatal-exit-code", 138, *fake("exit=0")), 2,
                                     "--fatal-exit-code"),
    "command_not_found": Run(_run("--no-python", "/nonexistent/muster-cmd"), 127, "exiting 127"),
    "command_not_executable": Run(_with(_not_executable), 126, "exiting 126"),
    "bad_flag": Run(_run("--nproc-per-node", "x", *fake("exit=0")), 2, "--nproc-per-node"),
    "status_file_dir_missing": Run(
        _with(lambda t: ["--status-file", t / "missing" / "status.json", *fake("exit=0")]), 2,
        "--status-file"),
    "tmpdir_missing": Run(_tmpdir_missing, 2, "TMPDIR="),
    "store_port_in_use": Run(_port_in_use(lambda p: ["--master-port", p]), 138, "exiting 138"),
    "rdzv_port_in_use": Run(
        _port_in_use(lambda p: ["--rdzv-endpoint", f"127.0.0.1:{p}", "--rdzv-host", "true"]), 138,
        "--rdzv-host true"),
    "tls_cert_not_pem": Run(_with(_garbage_pem), 2, "is not PEM"),
    "rendezvous_timeout": Run(
        _with(lambda t: ["--nnodes", 2, "--rdzv-endpoint", f"127.0.0.1:{_free_port()}",
                         "--rdzv-conf", "join_timeout=2s", *fake("exit=0")]), 138,
        "rendezvous timed out"),
    "rendezvous_server_lost": Run(_server_lost, 138, "lost the rendezvous stream"),
    "debug_command_exits": Run(
        _with(lambda t: ["--debug", "--debug-dir", t / "debug", "--debug-command", "exit 3",
                         *fake("exit=0")]), 3, "debug command ended"),
    "sigterm": Run(_signalled(signal.SIGTERM), 143, "preempted (agent received SIGTERM)"),
    "sigint": Run(_signalled(signal.SIGINT), 130, "stopped by SIGINT"),
    "sighup": Run(_signalled(signal.SIGHUP), 129, "stopped by SIGHUP"),
    "sigquit": Run(_signalled(signal.SIGQUIT), 131, "stopped by SIGQUIT"),
    "serve_stopped": Run(_serve_stopped, 0, "stopping the rendezvous server"),
    "serve_port_in_use": Run(_serve_port_in_use, 138, "exiting 138"),
    "serve_tls_cert_not_pem": Run(_serve_garbage_pem, 2, "is not PEM"),
}


def _readme_codes():
    """The agent's own exit codes in docs/reference/exit-codes.md's "agent exit code" table, as text: "0", "2",
    "126", "127", "128+N", "138"."""
    text = (REPO / "docs" / "reference" / "exit-codes.md").read_text()
    table = text[text.index("| agent exit code | meaning |"):].split("\n\n", 1)[0]
    codes = set()
    for row in table.splitlines()[2:]:
        first = row.split("|")[1]
        for pair in re.findall(r"^\s*(\d+(?:\+N)?)|/ (\d+)", first):
            codes.update(pair)
    codes.discard("")
    # 128+N covers every signal's code.
    codes.update(str(128 + n) for n in range(1, 32) if "128+N" in codes)
    return codes


def test_run_help_lists_readmes_exit_codes():
    r = subprocess.run([str(MUSTER), "run", "--help"], capture_output=True, text=True,
                       timeout=30)
    listed = r.stdout[r.stdout.index("Exit codes:"):]
    for code in ("0", "2", "126/127", "128+N", "138"):
        assert re.search(rf"(^|[\s:;]){re.escape(code)}\b", listed), (code, listed)
    assert {"0", "2", "126", "127", "128+N", "138"} <= _readme_codes()


@pytest.mark.parametrize("path", EXIT_PATHS)
def test_every_exit_path_has_its_documented_code_and_leaves_nothing(tmp_path, path):
    run = EXIT_PATHS[path]
    tmpdir = _fresh_tmpdir(tmp_path)
    r = run.drive(tmp_path, muster_env(TMPDIR=tmpdir))
    assert r.returncode == run.code, r.stderr
    if path not in ("worker_fails_fatally", "restart_budget_spent", "debug_command_exits",
                    "fatal_exit_code_budget_spent", "fatal_exit_code_not_restartable"):
        # The agent's own code (the others are the worker's, as the table's second row says).
        assert str(run.code) in _readme_codes(), f"exit {run.code} is not in docs/reference/exit-codes.md's table"
    assert run.says in r.stderr, r.stderr
    assert os.listdir(tmpdir) == [], "left in the temporary directory"


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
               f"--nproc-per-node 8 --max-restarts 1 --restart-policy ExitCode --no-python sleep 30")
    r = subprocess.run(["sh", "-c", command], capture_output=True, text=True, timeout=60,
                       env=muster_env(TMPDIR=tmpdir))
    assert r.returncode == 138, r.stderr
    assert "cannot start the worker: fork (clone) failed: Resource temporarily unavailable " \
           "(process limit reached: the pids cgroup's pids.max or ulimit -u); transient" \
           in r.stderr, r.stderr
    assert "(ExitCode policy: restartable)" in r.stderr, r.stderr
    assert "1 of 1 restarts used" in r.stderr and "exiting 138" in r.stderr, r.stderr
    started = re.search(r"attempt 1\b[^:]*: started (\d+) worker", r.stderr)
    assert started and 0 < int(started.group(1)) < 8, r.stderr  # the failed one not counted
    # No worker is left (the disarmed watchdog may take a moment to exit).
    wait_for(lambda: (pids_cgroup / "pids.current").read_text().strip() == "0", 5,
             what="every task of the agent's cgroup to exit")
    assert os.listdir(tmpdir) == []


@pytest.mark.parametrize("ending, code", [("exit=0", 0), ("exit=3", 3), ("sigterm", 143)])
def test_without_tmpdir_the_run_directory_in_dev_shm_is_removed(tmp_path, ending, code):
    # Without TMPDIR the run directory goes to /dev/shm (or /tmp): this run's is found
    # through the error file path its worker was given, so parallel tests do not matter.
    env = muster_env()
    env.pop("TMPDIR", None)
    dump = tmp_path / "env"
    actions = [f"envdump={dump}", "sleep=60" if ending == "sigterm" else ending]
    agent = subprocess.Popen([str(MUSTER), "run", *fake(*actions)], stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True, env=env)
    wait_for(lambda: dump.exists() and "TORCHELASTIC_ERROR_FILE=" in dump.read_text(), 30,
             what="the worker's environment")
    if ending == "sigterm":
        agent.send_signal(signal.SIGTERM)
    _, err = agent.communicate(timeout=60)
    assert agent.returncode == code, err
    error_file = pathlib.Path(re.search(r"^TORCHELASTIC_ERROR_FILE=(.*)$", dump.read_text(),
                                        re.M).group(1))
    root = error_file.parents[3]  # ROOT/<run_id>_XXXXXX/attempt_0/<local_rank>/error.json
    assert root.name.startswith("muster_") and str(root.parent) in ("/dev/shm", "/tmp"), root
    assert not root.exists(), f"{root} left behind"


def _log_time(line):
    """Seconds of the day of a muster log line ("[muster 2026-11-26 05:43:32.781 info] ...")."""
    clock = line.split()[2]
    h, m, s = clock.split(":")
    return int(h) * 3600 + int(m) * 60 + float(s)


def test_transient_fork_failures_back_off_instead_of_spending_the_budget_at_once(pids_cgroup):
    """Issue 18: a restart after EAGAIN fails again at once while the process limit holds;
    each failure is reported 1 s, 2 s, 4 s... later, so a budget of 2 restarts lasts
    seconds (time for other processes to exit), not milliseconds."""
    (pids_cgroup / "pids.max").write_text("8")
    command = (f"echo $$ > {pids_cgroup}/cgroup.procs && exec {MUSTER} run "
               f"--nproc-per-node 8 --max-restarts 2 --no-python sleep 30")
    r = subprocess.run(["sh", "-c", command], capture_output=True, text=True, timeout=60,
                       env=muster_env())
    assert r.returncode == 138, r.stderr
    starts = [_log_time(line) for line in r.stderr.splitlines()
              if re.search(r"\] attempt \d+ \(round \d+\): started", line)]
    assert len(starts) == 3, r.stderr
    gaps = [b - a for a, b in zip(starts, starts[1:])]
    assert gaps[0] >= 1.0 and gaps[1] >= 2.0, (gaps, r.stderr)
    assert "reported in 1s (1 transient spawn failure in a row)" in r.stderr, r.stderr
    assert "reported in 4s (3 transient spawn failures in a row)" in r.stderr, r.stderr
    wait_for(lambda: (pids_cgroup / "pids.current").read_text().strip() == "0", 5,
             what="every task of the agent's cgroup to exit")


def test_status_file_naming_a_directory_is_refused_before_any_worker(tmp_path):
    """Issue 31 item 8: `--status-file DIR` exited 0 with a warning, wrote no status and
    left DIR.tmp; it is a usage error (exit 2) naming the flag and the fix, before any
    worker starts, and leaves nothing."""
    status_dir, ranks = tmp_path / "status", tmp_path / "ranks"
    status_dir.mkdir()
    tmpdir = _fresh_tmpdir(tmp_path)
    r = _run("--status-file", status_dir, *fake(f"ranks={ranks}", "exit=0"))(
        tmp_path, muster_env(TMPDIR=tmpdir))
    assert r.returncode == 2, r.stderr
    assert (f"--status-file {status_dir}: is a directory; name a file in it, e.g. "
            f"--status-file {status_dir}/status.json") in r.stderr, r.stderr
    assert not ranks.exists(), "a worker started"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["status", "tmp"]
    assert list(status_dir.iterdir()) == [] and os.listdir(tmpdir) == []
