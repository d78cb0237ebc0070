"""Issue 14, item 6: a failure that the ExitCode policy does not restart says how to get
torchrun's behaviour; a spent budget or another policy does not get the hint. Issue 28,
item 4: the default policy is torchrun's (any failure restarts while the budget lasts)."""
import pytest

from conftest import FAKE, run_muster


def _last_line(r):
    return r.stderr.strip().splitlines()[-1]


def test_a_fatal_exit_under_exitcode_names_onfailure():
    r = run_muster(["--max-restarts", "2", "--restart-policy", "ExitCode", "--no-python", FAKE,
                    "exit=1"])
    assert r.returncode == 1, r.stderr
    last = _last_line(r)
    assert "--restart-policy OnFailure" in last and "130, 137, 138, 143" in last, last


def test_onfailure_restarts_and_needs_no_hint():
    r = run_muster(["--max-restarts", "2", "--restart-policy", "OnFailure", "--no-python", FAKE,
                    "exit=1"])
    assert r.returncode == 1, r.stderr
    assert "restart budget spent (2 of 2" in _last_line(r), r.stderr
    assert "--restart-policy OnFailure" not in r.stderr


def test_no_hint_without_a_restart_budget_or_for_a_restartable_code():
    for args in (["--restart-policy", "ExitCode", "--no-python", FAKE, "exit=1"],
                 ["--restart-policy", "ExitCode", "--max-restarts", "1", "--no-python", FAKE,
                  "exit=137"]):
        r = run_muster(args)
        assert r.returncode in (1, 137), r.stderr
        assert "--restart-policy OnFailure" not in r.stderr, r.stderr


def test_the_default_policy_restarts_any_failure_as_torchrun(tmp_path):
    stamps = tmp_path / "stamps"
    r = run_muster(["--max-restarts", "2", "--no-python", FAKE, f"stamp={stamps}", "exit=1"])
    assert r.returncode == 1, r.stderr
    assert len(stamps.read_text().splitlines()) == 3, r.stderr  # attempts 0, 1 and 2
    assert "restart budget spent (2 of 2" in _last_line(r), r.stderr
    assert "--restart-policy OnFailure" not in r.stderr, r.stderr


@pytest.mark.parametrize("args,says", [
    (["--restart-policy", "ExitCode"], "ExitCode: exit codes 130, 137, 138, 143 restart, any other non-zero exit fails the "
         "job (torchrun restarts on any failure: --restart-policy OnFailure); no restart budget"),
    (["--restart-policy", "OnFailure", "--max-restarts", "1"],
     "OnFailure: any non-zero exit restarts the job, as torchrun; up to 1 restart of the whole"),
    (["--restart-policy", "Never", "--max-restarts", "3"],
     "Never: no exit restarts: any non-zero exit fails the job; --max-restarts 3 has no effect"),
    (["--restart-policy", "ExitCode", "--restartable-exit-codes", "137", "--max-restarts", "2"],
     "ExitCode: exit codes 137 restart, any other"),
])
def test_dry_run_says_which_exits_restart(args, says):
    r = run_muster(["--dry-run", *args, "--no-python", FAKE])
    assert r.returncode == 0, r.stderr
    line = next(x for x in r.stdout.splitlines() if x.lstrip().startswith("restart policy"))
    assert says in line, line
