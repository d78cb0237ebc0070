"""Issue 14, item 6: a failure that the default policy does not restart says how to get
torchrun's behaviour; a spent budget or another policy does not get the hint."""
from conftest import FAKE, run_muster


def _last_line(r):
    return r.stderr.strip().splitlines()[-1]


def test_a_fatal_exit_under_exitcode_names_onfailure():
    r = run_muster(["--max-restarts", "2", "--no-python", FAKE, "exit=1"])
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
    for args in (["--no-python", FAKE, "exit=1"],
                 ["--max-restarts", "1", "--no-python", FAKE, "exit=137"]):
        r = run_muster(args)
        assert r.returncode in (1, 137), r.stderr
        assert "--restart-policy OnFailure" not in r.stderr, r.stderr
