"""Acceptance 2: the exit-code matrix (docs/design.md §4.4) with a fake worker.

For every exit code 0-255 and death by SIGINT, SIGKILL, SIGTERM, SIGUSR1, SIGSEGV, SIGABRT,
under each restart policy, one worker fails that way on attempt 0 and succeeds on
attempt 1 (--max-restarts 1). The expected decision is computed here from the table in
docs/design.md §4.4, independently of the agent's code:
  restart -> agent exits 0 after a second attempt
  fail    -> agent exits with the worker's code (128+N for signals), no second attempt
  succeed -> agent exits 0 after one attempt
The plain build runs every code; a sanitizer build (scripts/sanitize.sh) a sample that
takes every branch of the table and its edges, as the full matrix's 1,048 agent starts
under ASan cost CI a minute and run no agent code that the sample does not.
"""
import concurrent.futures
import signal

import pytest

from conftest import fake, run_muster, sanitizer_of_build

RESTARTABLE = {130, 137, 138, 143}
SIGNALS = [signal.SIGINT, signal.SIGKILL, signal.SIGTERM, signal.SIGUSR1, signal.SIGSEGV,
           signal.SIGABRT]
# Each branch (0, restartable, other codes), their neighbours, the exec codes and 255.
SANITIZER_SAMPLE = (0, 1, 2, 42, 125, 126, 127, 128, 129, 130, 131, 136, 137, 138, 139, 142,
                    143, 144, 254, 255)
CODES = SANITIZER_SAMPLE if sanitizer_of_build() else range(256)
CONCURRENT_AGENTS = 4
CASES = [("exit", c, c) for c in CODES] + [("kill", int(s), 128 + int(s)) for s in SIGNALS]


def expected(policy, code):
    if code == 0:
        return "restart" if policy == "Always" else "succeed"
    if policy == "Never":
        return "fail"
    if policy in ("OnFailure", "Always"):
        return "restart"
    return "restart" if code in RESTARTABLE else "fail"


def run_case(policy, kind, value, code, tmp_path):
    """One agent whose worker fails as KIND=VALUE on attempt 0; a mismatch's text, or None."""
    stamps = tmp_path / f"{kind}{value}"
    r = run_muster(["--max-restarts", "1", "--restart-policy", policy,
                    *fake(f"stamp={stamps}", "if-attempt=0", f"{kind}={value}")], timeout=30)
    attempts = len(stamps.read_text().splitlines())
    want = expected(policy, code)
    if want == "restart":
        ok = r.returncode == 0 and attempts == 2
    elif want == "fail":
        ok = r.returncode == code and attempts == 1
    else:
        ok = r.returncode == 0 and attempts == 1
    if ok:
        return None
    return f"{kind}={value}: want {want}, got rc={r.returncode} attempts={attempts}: " \
           f"{r.stderr[-300:]}"


@pytest.mark.parametrize("policy", ["Never", "OnFailure", "Always", "ExitCode"])
def test_exit_code_matrix(policy, tmp_path):
    # Agents side by side (each case its own agent and files): an agent start waits on
    # process start-up more than it computes, so a few at once take a fraction of the time.
    with concurrent.futures.ThreadPoolExecutor(max_workers=CONCURRENT_AGENTS) as pool:
        results = pool.map(lambda case: run_case(policy, *case, tmp_path), CASES)
        mismatches = [m for m in results if m is not None]
    assert not mismatches, "\n".join(mismatches[:20])


def test_budget_spent_exits_with_root_cause_and_says_so(tmp_path):
    """Acceptance 3: 137 with --max-restarts 2 restarts everyone; the new workers see
    TORCHELASTIC_RESTART_COUNT=1; when the budget is spent the agent exits 137."""
    stamps = tmp_path / "stamps"
    r = run_muster(["--nproc-per-node", "3", "--max-restarts", "2",
                    *fake(f"stamp={stamps}", "sleep=0.2", "if-rank=1", "exit=137", "sleep=5")])
    assert r.returncode == 137, r.stderr
    rows = [line.split() for line in stamps.read_text().splitlines()]
    by_attempt = {}
    for local_rank, attempt, pid, _ in rows:
        by_attempt.setdefault(attempt, set()).add((local_rank, pid))
    assert sorted(by_attempt) == ["0", "1", "2"], rows
    for attempt, workers in by_attempt.items():
        assert sorted(lr for lr, _ in workers) == ["0", "1", "2"], (attempt, workers)
    # All local workers were replaced, not just the failing one.
    assert not (by_attempt["0"] & by_attempt["1"])
    assert "restart budget spent (2 of 2 restarts used)" in r.stderr
    assert "exiting 137" in r.stderr.splitlines()[-1]


def test_restart_count_seen_by_new_workers(tmp_path):
    dump = tmp_path / "env1"
    r = run_muster(["--nproc-per-node", "2", "--max-restarts", "2",
                    *fake("if-attempt=0", "if-rank=0", "exit=137",
                          "if-attempt=1", "if-rank=0", f"envdump={dump}", "sleep=0.1")])
    assert r.returncode == 0, r.stderr
    env = dict(line.split("=", 1) for line in dump.read_text().splitlines())
    assert env["TORCHELASTIC_RESTART_COUNT"] == "1"
    assert env["TORCHELASTIC_MAX_RESTARTS"] == "2"


def test_exec_failures_are_126_and_127(tmp_path):
    r = run_muster(["--no-python", "no-such-command-anywhere"])
    assert r.returncode == 127, r.stderr
    assert "no-such-command-anywhere" in r.stderr
    script = tmp_path / "not_executable.sh"
    script.write_text("#!/bin/sh\necho hi\n")
    r = run_muster(["--no-python", str(script)])
    assert r.returncode == 126, r.stderr
