"""Shared fixtures for muster's integration tests: real binaries, real processes.

Paths come from MUSTER_BUILD_DIR (default <repo>/build). Torch tests use TORCH_PYTHON
(default /usr/bin/python3, Debian's python3-torch 1.13).
"""
import os
import pathlib
import subprocess
import time
import uuid

import pytest

REPO = pathlib.Path(__file__).resolve().parents[2]
BUILD = pathlib.Path(os.environ.get("MUSTER_BUILD_DIR", REPO / "build"))
MUSTER = BUILD / "bin" / "muster"
FAKE = BUILD / "tests" / "fake_worker"


def sanitizer_of_build():
    """The build's MUSTER_SANITIZE ("address", "thread"), or "" for a plain build."""
    cache = BUILD / "CMakeCache.txt"
    if not cache.exists():
        return ""
    for line in cache.read_text().splitlines():
        if line.startswith("MUSTER_SANITIZE:"):
            value = line.split("=", 1)[1].strip().lower()
            return "" if value in ("", "off") else value
    return ""
TORCH_PYTHON = os.environ.get("TORCH_PYTHON", "/usr/bin/python3")
TORCHRUN113 = REPO / "tests" / "tools" / "torchrun113.py"


def _torch_version():
    try:
        out = subprocess.run([TORCH_PYTHON, "-c", "import torch; print(torch.__version__)"],
                             capture_output=True, text=True, timeout=60)
        return out.stdout.strip() if out.returncode == 0 else None
    except (OSError, subprocess.TimeoutExpired):
        return None


TORCH_VERSION = _torch_version()
needs_torch = pytest.mark.skipif(
    TORCH_VERSION is None,
    reason=f"SKIPPED LOUDLY: no torch importable by {TORCH_PYTHON}; install python3-torch "
           f"(scripts/test.sh does) to run the real-torch tests")


@pytest.fixture(scope="session", autouse=True)
def _binaries_exist():
    for p in (MUSTER, FAKE):
        assert p.exists(), f"{p} missing: build first (scripts/test.sh builds it)"


def pytest_configure(config):
    config.addinivalue_line(
        "markers", "serial: runs alone, after the parallel part (scripts/integration.sh): the "
        "test asserts a latency, a deadline to 0.1 s or a peak RSS that other tests' load "
        "would blur")


# The order scripts/integration.sh hands tests to its pytest-xdist workers (--dist
# loadgroup: one test, or one group, at a time to whichever worker is free): these files
# first, longest first, so that no worker is left running a long test alone at the end.
# From `pytest -n 3 --durations=0` on the 2-core CI machine; a file not named here runs
# after them, in the usual order. Refresh it when a file's tests grow long.
LONGEST_FIRST = (
    "test_store_torch2.py", "test_exit_codes.py", "test_store_torch113.py", "test_install.py",
    "test_deepspeed_real.py", "test_agent_store.py", "test_listen_addresses.py",
    "test_operator_pods.py", "test_pods.py", "test_etcd.py", "test_manifest_dns.py",
    "test_one_port.py", "test_debug_deepspeed.py", "test_metrics.py", "test_multinode.py",
    "test_debug_ssh.py",
)
# Costly module-scoped fixtures (test_store_torch2's `differential`: every seed against
# both servers; test_etcd's `etcd`: a 3-member cluster): the tests that use one go to one
# worker (an xdist_group), so that it runs once, not once on each worker.
ONE_WORKER_FIXTURES = ("differential", "etcd")


@pytest.hookimpl(tryfirst=True)  # before xdist reads the groups (its own hook, in workers)
def pytest_collection_modifyitems(config, items):
    rank = {name: i for i, name in enumerate(LONGEST_FIRST)}
    items.sort(key=lambda item: rank.get(item.path.name, len(rank)))  # stable: file order kept
    if not config.pluginmanager.hasplugin("xdist"):
        return
    for item in items:
        for name in ONE_WORKER_FIXTURES:
            if name in getattr(item, "fixturenames", ()):
                item.add_marker(pytest.mark.xdist_group(f"{item.path.name}:{name}"))


def xdist_worker_index():
    """0, 1, 2... for pytest-xdist's workers gw0, gw1, gw2...; 0 without xdist. Tests that
    pick ports or subnets split them by it so that workers never collide."""
    worker = os.environ.get("PYTEST_XDIST_WORKER", "gw0")
    return int(worker[2:]) if worker.startswith("gw") and worker[2:].isdigit() else 0


_TEST_MARK = {"value": ""}


@pytest.fixture(autouse=True)
def _no_leftover_processes():
    """Kills any process a test started and left running (a failed assertion must not leave
    agents or workers behind). Processes are recognised by a per-test marker that
    muster_env() puts into their environment (inherited by workers and their children), so
    a concurrent test session's processes are never touched."""
    _TEST_MARK["value"] = uuid.uuid4().hex
    yield
    for pid in processes_with_env("MUSTER_TEST_MARK", _TEST_MARK["value"]):
        try:
            os.kill(pid, 9)
        except ProcessLookupError:
            continue


def processes_with_env(name, value):
    """Pids of the processes whose environment holds NAME=value (inherited by children)."""
    entry_bytes = f"{name}={value}".encode()
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/environ", "rb") as f:
                if entry_bytes in f.read().split(b"\0"):
                    found.append(int(entry))
        except OSError:
            continue
    return found


def muster_env(**extra):
    env = dict(os.environ)
    for k in list(env):
        if k.startswith(("MUSTER_", "PET_")) or k in ("WORLD_SIZE", "RANK", "MASTER_PORT"):
            del env[k]
    env["PYTHON_EXEC"] = TORCH_PYTHON
    env["MUSTER_TEST_MARK"] = _TEST_MARK["value"]
    env.update({k: str(v) for k, v in extra.items()})
    return env


def run_muster(args, timeout=60, env=None, cwd=None, **kw):
    """Runs `muster run ARGS` to completion; returns CompletedProcess (text)."""
    return subprocess.run([str(MUSTER), "run", *map(str, args)], capture_output=True,
                          text=True, timeout=timeout, env=env or muster_env(), cwd=cwd, **kw)


def fake(*actions):
    """`--no-python <fake_worker> actions...` as muster arguments."""
    return ["--no-python", str(FAKE), *actions]


def shell_script(path, body):
    """Writes an executable /bin/sh script at `path` (a worker for `--no-python`); returns it."""
    path.write_text("#!/bin/sh\n" + body)
    path.chmod(0o755)
    return path


def wait_for(predicate, timeout, interval=0.01, what="condition"):
    """Waits for predicate() to be truthy; fails the test after `timeout` seconds."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(interval)
    raise AssertionError(f"timed out after {timeout}s waiting for {what}")


def pid_alive(pid):
    """True if pid exists and is not a zombie."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except (FileNotFoundError, ProcessLookupError):
        return False


def read_pids(path):
    try:
        return [int(x) for x in pathlib.Path(path).read_text().split()]
    except FileNotFoundError:
        return []


@pytest.fixture(scope="session")
def torch2_python():
    """Path of a python running PyPI's torch 2.x (scripts/torch2_venv.sh creates it once,
    cached outside the repo). Skips loudly when it cannot be had."""
    r = subprocess.run([str(REPO / "scripts" / "torch2_venv.sh")], capture_output=True,
                       text=True, timeout=1500)
    if r.returncode != 0:
        pytest.skip(f"SKIPPED LOUDLY: torch 2.x unavailable: {r.stderr.strip()[-500:]}")
    return r.stdout.strip().splitlines()[-1]


@pytest.fixture(params=["torch113", "torch2"])
def any_torch(request):
    """Each real-torch test runs with Debian's torch 1.13 and with PyPI's torch 2.x."""
    if request.param == "torch113":
        if TORCH_VERSION is None:
            pytest.skip(f"SKIPPED LOUDLY: no torch importable by {TORCH_PYTHON}")
        return TORCH_PYTHON
    return request.getfixturevalue("torch2_python")
