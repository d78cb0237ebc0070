"""Issue 14, item 4: when a job fails, the root cause carries the failing rank's error file
message or, without one, the last lines of its stderr (at most 20 lines, 4 KB): on the
console, in --termination-log, in the status file and in `muster status`. With -r/-t and no
--log-dir the per-rank logs of a failed job are kept and their path printed."""
import json
import os
import pathlib
import re
import subprocess

from conftest import FAKE, MUSTER, REPO, fake, muster_env, needs_torch, run_muster
from multinode import serve

SCRIPTS = REPO / "tests" / "integration" / "scripts"
TRACEBACK = ["Traceback (most recent call last):",
             '  File "train.py", line 7, in <module>',
             "    main()",
             "ValueError: boom from rank 1"]
# 30 lines of noise first: only the last 20 lines may travel.
NOISE = [f"noise {i:02d} " + "n" * 150 for i in range(30)]


def failing_rank_1():
    """fake_worker actions: rank 1 prints NOISE and TRACEBACK to stderr and exits 1; rank 0
    sleeps until it is stopped."""
    return fake("if-rank=1", "eprint=" + "\n".join(NOISE + TRACEBACK), "if-rank=1", "exit=1",
                "sleep=30")


def kept_dir(stderr):
    m = re.search(r"logs of the failed job kept in (\S+)", stderr)
    return pathlib.Path(m.group(1)) if m else None


def test_console_and_termination_log_show_the_last_stderr_lines(tmp_path):
    term = tmp_path / "termination-log"
    r = run_muster(["--nproc-per-node", "2", "--restart-policy", "ExitCode", "--termination-log", term,
                    *failing_rank_1()])
    assert r.returncode == 1, r.stderr[-3000:]
    lines = r.stderr.strip().splitlines()
    # The root-cause line (the last) names the traceback's last line.
    assert "job failed: rank 1" in lines[-1], lines[-1]
    assert "exit 1: ValueError: boom from rank 1; not restartable" in lines[-1], lines[-1]
    # Above it, the last lines of the rank's stderr, bounded to 20.
    head = [i for i, x in enumerate(lines) if x.endswith("last lines of rank 1's stderr (host "
                                                         f"{os.uname().nodename}):")]
    assert len(head) == 1, r.stderr[-3000:]
    assert lines[head[0] + 1:-1] == ["  " + x for x in (NOISE + TRACEBACK)[-20:]], lines[head[0]:]
    text = term.read_bytes()
    assert len(text) <= 4096, len(text)
    log = text.decode()
    first = log.splitlines()[0]
    assert first.startswith("job failed: rank 1") and "ValueError: boom from rank 1" in first, log
    assert '    File "train.py", line 7, in <module>' in log, log
    assert log.rstrip("\n").endswith("  ValueError: boom from rank 1"), log[-300:]


def test_termination_log_is_bounded_for_long_lines(tmp_path):
    term = tmp_path / "termination-log"
    long_lines = "\n".join("L" * 1000 for _ in range(25)) + "\nOSError: disk full"
    r = run_muster(["--termination-log", term,
                    *fake("eprint=" + long_lines, "exit=3")])
    assert r.returncode == 3, r.stderr[-3000:]
    text = term.read_bytes()
    assert len(text) <= 4096, len(text)
    log = text.decode()
    assert "exit 3: OSError: disk full" in log.splitlines()[0], log[:300]
    assert log.rstrip("\n").endswith("  OSError: disk full"), log[-300:]


def test_status_file_has_the_tail_as_valid_text(tmp_path):
    """Bytes that are not UTF-8 (and control characters) are escaped before they travel:
    the status file stays valid JSON."""
    status = tmp_path / "status.json"
    env = muster_env()
    args = [str(MUSTER), "run", "--status-file", str(status), "--no-python", str(FAKE),
            b"eprint=bad \xff\xfe bytes \x1b[31mred", "exit=2"]
    r = subprocess.run(args, capture_output=True, timeout=60, env=env)
    assert r.returncode == 2, r.stderr[-3000:]
    root = json.loads(status.read_text())["root_cause"]
    assert root["stderr_tail"] == "bad \\xFF\\xFE bytes \\x1B[31mred", root
    assert root["message"] == "", root


def test_an_error_file_message_wins_over_stderr(tmp_path):
    """With torch's error file, its message is the root cause (as before) and no stderr
    lines travel."""
    status = tmp_path / "status.json"
    r = run_muster(["--status-file", status, "--no-python", "/bin/sh", "-c",
                    'echo "noise" >&2; printf \'{"message": "RuntimeError: recorded"}\' '
                    '> "$TORCHELASTIC_ERROR_FILE"; exit 1'])
    assert r.returncode == 1, r.stderr[-3000:]
    assert "exit 1: RuntimeError: recorded" in r.stderr.strip().splitlines()[-1], r.stderr
    root = json.loads(status.read_text())["root_cause"]
    assert root["message"] == "RuntimeError: recorded" and root["stderr_tail"] == "", root
    assert "last lines of rank" not in r.stderr, r.stderr


def test_redirected_logs_of_a_failed_job_are_kept(tmp_path):
    tmpdir = tmp_path / "tmp"
    tmpdir.mkdir()
    r = run_muster(["--nproc-per-node", "2", "-r", "3", *failing_rank_1()],
                   env=muster_env(TMPDIR=tmpdir))
    assert r.returncode == 1, r.stderr[-3000:]
    # -r 3: the traceback never reached the console as worker output...
    assert "[default1]:ValueError" not in r.stderr, r.stderr[-3000:]
    # ... but the root cause shows it, and the logs stay where the message says.
    assert "ValueError: boom from rank 1" in r.stderr.strip().splitlines()[-1], r.stderr[-2000:]
    kept = kept_dir(r.stderr)
    assert kept is not None, r.stderr[-3000:]
    assert kept.is_dir() and str(kept).startswith(str(tmpdir)), kept
    err1 = (kept / "attempt_0" / "1" / "stderr.log").read_text()
    assert err1.endswith("\n".join(TRACEBACK) + "\n"), err1[-500:]
    assert (kept / "attempt_0" / "0" / "stdout.log").exists()
    # Only the kept run directory (inside the agent's own temporary root) is left.
    roots = os.listdir(tmpdir)
    assert len(roots) == 1 and roots[0].startswith("muster_"), roots
    assert [p.name for p in (tmpdir / roots[0]).iterdir()] == [kept.name]


def test_logs_of_a_successful_job_or_without_redirects_are_removed(tmp_path):
    tmpdir = tmp_path / "tmp"
    tmpdir.mkdir()
    ok = run_muster(["-r", "3", *fake("eprint=fine", "exit=0")], env=muster_env(TMPDIR=tmpdir))
    assert ok.returncode == 0, ok.stderr[-3000:]
    assert "kept in" not in ok.stderr and os.listdir(tmpdir) == [], ok.stderr[-2000:]
    failed = run_muster(["--nproc-per-node", "2", *failing_rank_1()],
                        env=muster_env(TMPDIR=tmpdir))
    assert failed.returncode == 1, failed.stderr[-3000:]
    assert "kept in" not in failed.stderr and os.listdir(tmpdir) == [], failed.stderr[-2000:]


def test_two_node_job_status_has_the_root_cause_stderr(tmp_path):
    with serve("--rdzv-id", "fv") as port:
        common = ["--rdzv-endpoint", f"127.0.0.1:{port}", "--rdzv-id", "fv", "--nnodes", "2",
                  "--nproc-per-node", "2", "--no-python", str(FAKE), "sleep=0.3",
                  "if-global-rank=3", "eprint=" + "\n".join(TRACEBACK), "if-global-rank=3",
                  "exit=1", "sleep=30"]
        agents = [subprocess.Popen([str(MUSTER), "run", "--node-rank", str(i), *common],
                                   stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                   env=muster_env())
                  for i in range(2)]
        results = [(a.communicate(timeout=60)[1], a.returncode) for a in agents]
        for err, rc in results:
            assert rc == 1, err[-3000:]
            # Node 0 never saw rank 3's output: the root cause brings its last line.
            last = err.strip().splitlines()[-1]
            assert "rank 3" in last and "exit 1: ValueError: boom from rank 1" in last, last
            assert "  Traceback (most recent call last):" in err, err[-3000:]
        status = [str(MUSTER), "status", "--rdzv-endpoint", f"127.0.0.1:{port}", "--rdzv-id",
                  "fv"]
        r = subprocess.run([*status, "--json"], capture_output=True, text=True, timeout=20,
                           env=muster_env())
        assert r.returncode == 0, r.stderr
        root = json.loads(r.stdout)["root_cause"]
        assert root["rank"] == 3 and root["stderr_tail"] == "\n".join(TRACEBACK), root
        table = subprocess.run(status, capture_output=True, text=True, timeout=20,
                               env=muster_env())
        assert "exit 1: ValueError: boom from rank 1" in table.stdout, table.stdout
        assert "last lines of rank 3's stderr" in table.stdout, table.stdout
        assert "  ValueError: boom from rank 1\n" in table.stdout, table.stdout


@needs_torch
def test_real_torch_exception_without_record(tmp_path):
    tmpdir = tmp_path / "tmp"
    tmpdir.mkdir()
    term = tmp_path / "termination-log"
    r = run_muster(["--nproc-per-node", "2", "-r", "3", "--termination-log", term,
                    SCRIPTS / "raise_without_record.py"],
                   env=muster_env(FAIL_RANK=1, TMPDIR=tmpdir), timeout=120)
    assert r.returncode == 1, r.stderr[-3000:]
    last = r.stderr.strip().splitlines()[-1]
    assert "rank 1" in last and "exit 1: ValueError: boom from rank 1" in last, last
    log = term.read_text()
    assert "raise ValueError(f\"boom from rank {os.environ['RANK']}\")" in log, log
    kept = kept_dir(r.stderr)
    assert kept is not None and kept.is_dir(), r.stderr[-3000:]
    err1 = (kept / "attempt_0" / "1" / "stderr.log").read_text()
    assert "Traceback (most recent call last):" in err1, err1
    assert err1.rstrip().endswith("ValueError: boom from rank 1"), err1[-500:]
