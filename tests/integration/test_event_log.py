"""--event-log: one JSON line per transition, with monotonic timestamps."""
import json

from conftest import fake, run_muster


def test_event_log_records_each_transition(tmp_path):
    log = tmp_path / "events.jsonl"
    r = run_muster(["--event-log", log, "--nproc-per-node", "2", "--max-restarts", "1",
                    *fake("sleep=0.1", "if-attempt=0", "if-rank=1", "exit=137")])
    assert r.returncode == 0, r.stderr
    events = [json.loads(line) for line in log.read_text().splitlines()]
    names = [e["event"] for e in events]
    assert names.count("worker_started") == 4
    assert names.count("worker_exited") == 4
    assert names.count("restart_decided") == 1
    assert names[-1] == "job_finished" and events[-1]["exit_code"] == 0
    restart = events[names.index("restart_decided")]
    assert restart["rank"] == 1 and restart["code"] == 137 and restart["attempt"] == 1
    stamps = [e["mono_ns"] for e in events]
    assert stamps == sorted(stamps)


def test_event_log_root_cause(tmp_path):
    log = tmp_path / "events.jsonl"
    r = run_muster(["--event-log", log, "--nproc-per-node", "2",
                    *fake("sleep=0.1", "if-rank=0", "exit=3", "sleep=5")])
    assert r.returncode == 3
    last = json.loads(log.read_text().splitlines()[-1])
    assert last["event"] == "job_finished" and last["exit_code"] == 3
    assert last["root_cause"]["rank"] == 0 and last["root_cause"]["code"] == 3
