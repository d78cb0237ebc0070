"""Issue 14, item 9: every set-up failure of the agent has a documented exit code (2: trying
again cannot help; 138: it may), names the flag or variable, reaches --termination-log, and
leaves nothing behind in the temporary directory."""
import os
import socket

import pytest

from conftest import FAKE, run_muster, muster_env


def _run(tmp_path, args, **env):
    tmpdir = tmp_path / "tmp"
    tmpdir.mkdir(exist_ok=True)
    term = tmp_path / "termination-log"
    r = run_muster(["--termination-log", term, *args, "--no-python", FAKE, "exit=0"], timeout=60,
                   env=muster_env(**{"TMPDIR": tmpdir, **env}))
    left = sorted(os.listdir(tmpdir))
    return r, (term.read_text() if term.exists() else ""), left


@pytest.mark.parametrize("flag", ["--event-log", "--status-file", "--save-pid"])
def test_a_file_in_a_missing_directory_is_refused_at_start(tmp_path, flag):
    r, term, left = _run(tmp_path, [flag, tmp_path / "missing" / "file"])
    assert r.returncode == 2, r.stderr
    assert flag in r.stderr and "No such file or directory" in r.stderr, r.stderr
    assert flag in term and "exiting 2" in term, term
    assert left == [], left  # the run directory made before --save-pid failed is gone too


def test_a_missing_tmpdir_names_tmpdir(tmp_path):
    r = run_muster(["--no-python", FAKE, "exit=0"], timeout=60,
                   env=muster_env(TMPDIR=tmp_path / "missing"))
    assert r.returncode == 2, r.stderr
    assert "TMPDIR=" in r.stderr and "writable directory" in r.stderr, r.stderr
    assert r.stderr.count("No such file or directory") == 1, r.stderr


def test_a_store_address_of_another_machine_is_permanent(tmp_path):
    # 192.0.2.1 (TEST-NET-1) is no address of this machine: bind says EADDRNOTAVAIL.
    r, term, left = _run(tmp_path, ["--master-addr", "192.0.2.1"])
    assert r.returncode == 2, r.stderr
    assert "agent setup failed" in r.stderr and "192.0.2.1" in r.stderr, r.stderr
    assert "exiting 2" in term
    assert left == [], left


def _busy_port():
    s = socket.socket(socket.AF_INET6, socket.SOCK_STREAM)
    s.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 0)
    s.bind(("::", 0))
    s.listen(1)
    return s, s.getsockname()[1]


@pytest.mark.parametrize("flag", ["--health-port", "--metrics-port"])
def test_a_side_port_in_use_is_transient(tmp_path, flag):
    s, port = _busy_port()
    with s:
        r, term, left = _run(tmp_path, [flag, port])
    assert r.returncode == 138, r.stderr
    assert str(port) in r.stderr and "exiting 138" in term, (r.stderr, term)
    assert flag in r.stderr, r.stderr
    assert left == [], left


def test_a_rendezvous_port_in_use_with_rdzv_host_true_is_transient(tmp_path):
    s, port = _busy_port()
    with s:
        r, term, left = _run(tmp_path, ["--nnodes", "2", "--rdzv-endpoint", f"127.0.0.1:{port}",
                                        "--rdzv-host", "true"])
    assert r.returncode == 138, r.stderr
    assert "--rdzv-host true" in r.stderr and "exiting 138" in term, (r.stderr, term)
    assert left == [], left
