"""Issue 3, acceptance 3: workers of torch 1.13 and 2.x rendezvous through the store the
agent serves (no worker hosts it), and a restart gets a fresh store with no old keys."""
import json
import re
import subprocess

from conftest import MUSTER, REPO, muster_env

SCRIPT = REPO / "tests" / "integration" / "scripts" / "store_check.py"


def test_workers_use_agent_store_and_restart_gets_fresh_keys(any_torch, tmp_path):
    out = tmp_path / "out.jsonl"
    agent = subprocess.Popen([str(MUSTER), "run", "--standalone", "--nproc-per-node", "4",
                              "--max-restarts", "1", str(SCRIPT)],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                             env=muster_env(PYTHON_EXEC=any_torch, OUT=out))
    stdout, stderr = agent.communicate(timeout=180)
    assert agent.returncode == 0, stderr[-3000:]
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    assert sorted((r["attempt"], r["rank"]) for r in rows) == [(a, r) for a in (0, 1)
                                                              for r in range(4)]
    for r in rows:
        assert r["sum"] == 4.0 and r["world"] == 4
        assert r["use_agent_store"] == "True"
        # The store's listening socket belongs to the agent itself, not to a worker.
        assert r["owner"] == agent.pid == r["ppid"], r
    ports = {a: {r["port"] for r in rows if r["attempt"] == a} for a in (0, 1)}
    assert len(ports[0]) == len(ports[1]) == 1 and ports[0] != ports[1], ports
    assert all(r["leaked"] is False for r in rows if r["attempt"] == 1), rows
    assert "restarting all 4 local workers" in stderr


def test_rank0_store_keeps_torchrun_static_behaviour(tmp_path):
    out = tmp_path / "out.jsonl"
    r = subprocess.run([str(MUSTER), "run", "--store", "rank0", "--standalone",
                        "--nproc-per-node", "2", "--max-restarts", "1", str(SCRIPT)],
                       capture_output=True, text=True, timeout=180,
                       env=muster_env(OUT=out))
    assert r.returncode == 0, r.stderr[-3000:]
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    for row in rows:
        assert row["use_agent_store"] == "False"
        assert row["owner"] != row["ppid"]  # a worker (rank 0) hosts it


def test_a_worker_filling_the_store_past_its_limit_is_cut_off_with_a_clear_log(any_torch):
    """Issue 31 item 7: the store had no total limit (400 k keys: 454 MB); past
    --store-max-bytes a write stores nothing, the worker's connection is closed (torch's
    protocol has no error reply for SET) and the agent's log names the client, the limit
    and the flag."""
    r = subprocess.run([str(MUSTER), "run", "--standalone", "--nproc-per-node", "1",
                        "--store-max-bytes", "1MiB", str(REPO / "tests" / "integration" /
                                                         "scripts" / "store_full.py")],
                       capture_output=True, text=True, timeout=120,
                       env=muster_env(PYTHON_EXEC=any_torch, BIG=str(2 << 20)))
    assert r.returncode == 1, r.stderr[-3000:]
    assert "c10d store: closing connection from " in r.stderr, r.stderr[-3000:]
    assert "the store is full: it holds " in r.stderr, r.stderr[-3000:]
    # torch 1.13's client sends "/big", 2.x's "big": the key's bytes and the value's.
    assert re.search(r"bytes of keys and values and this SET of key '(big|/big)' would add "
                     rf"({3 + (2 << 20)}|{4 + (2 << 20)}),", r.stderr), r.stderr[-3000:]
    assert f"past the limit of {1 << 20} bytes (--store-max-bytes)" in r.stderr
    assert "store error: " in r.stderr  # torch's own error, in the worker's stderr
