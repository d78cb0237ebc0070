"""Issue 7: the job status shows every worker (rank, local rank, node, pid, state, exit code
and signal, restarts) and Kubernetes-style conditions with transition times, through
`muster status --json`, the table, and a Python grpcio client generated from proto/.

A 3-node job (3 agents on loopback, 2 fake workers each, a standalone `muster serve`) runs
round 1, loses global rank 3 to SIGKILL (restartable: round 2), then global rank 4 exits 5
(fatal). The pids in the status are checked against the pids the workers wrote themselves.
"""
import datetime
import importlib
import json
import subprocess
import sys
import time

import pytest

from conftest import FAKE, MUSTER, REPO, muster_env, pid_alive, wait_for
from multinode import serve


def rank_pids(path, attempt):
    """{global rank: pid} that the workers of `attempt` wrote (fake_worker ranks=)."""
    try:
        lines = path.read_text().splitlines()
    except FileNotFoundError:
        return {}
    rows = [line.split() for line in lines]
    return {int(r[0]): int(r[7]) for r in rows if r[5] == str(attempt)}


def epoch(rfc3339):
    """Seconds since the epoch of the RFC 3339 times muster prints (ms precision)."""
    return datetime.datetime.fromisoformat(rfc3339.replace("Z", "+00:00")).timestamp()


def conditions(doc):
    return {c["type"]: c for c in doc["conditions"]}


def python_client(tmp_path):
    grpc = pytest.importorskip("grpc", reason="SKIPPED LOUDLY: python3-grpcio not installed")
    protoc = pytest.importorskip("grpc_tools.protoc",
                                 reason="SKIPPED LOUDLY: python3-grpc-tools not installed")
    out = tmp_path / "pb"
    out.mkdir()
    rc = protoc.main(["protoc", f"-I{REPO / 'proto'}", f"--python_out={out}",
                      f"--grpc_python_out={out}",
                      str(REPO / "proto" / "muster" / "v1" / "rendezvous.proto")])
    assert rc == 0
    sys.path.insert(0, str(out))
    try:
        return grpc, importlib.import_module("muster.v1.rendezvous_pb2"), \
            importlib.import_module("muster.v1.rendezvous_pb2_grpc")
    finally:
        sys.path.remove(str(out))


def start_agents(endpoint, ranks):
    """3 agents of 2 fake workers: global rank 3 is SIGKILLed in round 1 (restartable), rank 4
    exits 5 in round 2 (fatal); the others sleep."""
    common = ["--rdzv-endpoint", endpoint, "--rdzv-id", "sw", "--nnodes", "3",
              "--nproc-per-node", "2", "--max-restarts", "1", "--restart-policy", "ExitCode",
              "--no-python", str(FAKE),
              f"ranks={ranks}", "sleep=2.5", "if-attempt=0", "if-global-rank=3", "kill=9",
              "if-attempt=1", "if-global-rank=4", "exit=5", "sleep=30"]
    return [subprocess.Popen([str(MUSTER), "run", "--node-rank", str(i), *common],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                             env=muster_env()) for i in range(3)]


def snapshot(status):
    r = subprocess.run([*status, "--json"], capture_output=True, text=True, timeout=20)
    return json.loads(r.stdout) if r.returncode == 0 else None


def running_round(status, n):
    """A snapshot of round n with every worker's pid reported."""
    def ready():
        s = snapshot(status)
        ok = (s and s["round"] == n and s["phase"] == "Running"
              and len(s["workers"]) == 6
              and all(w["pid"] > 0 and w["state"] == "Running" for w in s["workers"]))
        return s if ok else None
    return wait_for(ready, 30, interval=0.05, what=f"round {n} running with pids")


def check_round1(r1, pids1):
    """Every worker running; pids are the real worker processes. Returns the times the job
    was created and round 1 started."""
    node_of_group = {n["group_rank"]: n["node_id"] for n in r1["nodes"]}
    assert sorted(node_of_group) == [0, 1, 2]
    for w in r1["workers"]:
        assert w["pid"] == pids1[w["rank"]], (w, pids1)
        assert pid_alive(w["pid"])
        assert w["group_rank"] == w["rank"] // 2 and w["local_rank"] == w["rank"] % 2
        assert w["node_id"] == node_of_group[w["group_rank"]]
        assert w["restarts"] == 0 and "code" not in w
    assert [w["rank"] for w in r1["workers"]] == list(range(6))
    assert all(n["state"] == "Running" for n in r1["nodes"])
    c1 = conditions(r1)
    assert list(c1) == ["Created", "Running", "Restarting", "Succeeded", "Failed"]
    assert c1["Created"]["status"] == "True"
    assert c1["Running"]["status"] == "True" and c1["Running"]["reason"] == "RoundStarted"
    assert "6 workers on 3 nodes" in c1["Running"]["message"]
    for t in ("Restarting", "Succeeded", "Failed"):
        assert c1[t]["status"] == "False", c1[t]
    created = epoch(c1["Created"]["last_transition_time"])
    started1 = epoch(c1["Running"]["last_transition_time"])
    assert created <= started1 <= time.time() + 1
    # Never True yet: False since the job was created.
    assert epoch(c1["Failed"]["last_transition_time"]) == created
    return created, started1


def check_python_client_round1(pb, pb_grpc, channel, pids1, started1):
    """The same through a client generated from proto/ (no muster code involved)."""
    reply = pb_grpc.JobStatusStub(channel).Get(pb.GetJobStatusRequest(run_id="sw"),
                                               timeout=10)
    assert {w.rank: w.pid for w in reply.workers} == pids1
    assert {w.state for w in reply.workers} == {pb.WORKER_STATE_RUNNING}
    py_cond = {c.type: c for c in reply.conditions}
    assert py_cond["Running"].status == "True"
    assert py_cond["Running"].last_transition_unix_ms == pytest.approx(started1 * 1000, abs=1)


def check_round2(r2, pids1, pids2, started1, created):
    """Round 2 after rank 3's SIGKILL: new pids, one restart each. Returns its start time."""
    assert {w["rank"]: w["pid"] for w in r2["workers"]} == pids2
    assert not set(pids1.values()) & set(pids2.values())
    assert all(w["restarts"] == 1 for w in r2["workers"])
    assert r2["history"][0]["failure"]["rank"] == 3
    # Round numbers and the agents' attempt numbers (TORCHELASTIC_RESTART_COUNT) side by side.
    assert (r2["round"], r2["attempt"]) == (2, 1)
    assert (r2["history"][0]["round"], r2["history"][0]["attempt"]) == (1, 0)
    assert r2["history"][0]["failure"]["code"] == 137
    c2 = conditions(r2)
    started2 = epoch(c2["Running"]["last_transition_time"])
    failed_at = epoch(r2["history"][0]["time"])
    # Running went False at the failure and True again at round 2; Restarting went True
    # at the failure and False at round 2: its last flip is round 2's start.
    assert started1 < failed_at <= started2
    assert c2["Restarting"]["status"] == "False"
    assert epoch(c2["Restarting"]["last_transition_time"]) == started2
    assert c2["Restarting"]["reason"] == "RoundStarted"
    assert epoch(c2["Created"]["last_transition_time"]) == created
    return started2


def check_final(final, pids2, started2, created):
    """Rank 4's exit 5 failed the job; its siblings were stopped."""
    assert final["phase"] == "Failed"
    # One restart happened; the fatal exit is the outcome, not a second history entry.
    assert len(final["history"]) == 1 and final["history"][0]["counted"], final["history"]
    by_rank = {w["rank"]: w for w in final["workers"]}
    assert {r: w["pid"] for r, w in by_rank.items()} == pids2
    assert by_rank[4]["state"] == "Failed" and by_rank[4]["code"] == 5
    assert by_rank[4]["signal"] == 0 and by_rank[4]["what"] == "exit 5"
    for r in (0, 1, 2, 3, 5):  # sleeping siblings, stopped by their agents with SIGTERM
        assert by_rank[r]["state"] == "Stopped", by_rank[r]
        assert by_rank[r]["signal"] == 15 and by_rank[r]["code"] == 143, by_rank[r]
    # Agents hung up after the outcome; the final status still lists them.
    assert len(final["nodes"]) == 3 and all(n["state"] == "Left" for n in final["nodes"])
    cf = conditions(final)
    assert cf["Failed"]["status"] == "True" and cf["Failed"]["reason"] == "NotRestartable"
    assert "rank 4" in cf["Failed"]["message"]
    failed_final = epoch(cf["Failed"]["last_transition_time"])
    assert started2 < failed_final <= time.time() + 1
    assert cf["Running"]["status"] == "False"
    assert epoch(cf["Running"]["last_transition_time"]) == failed_final
    assert cf["Succeeded"]["status"] == "False"
    assert epoch(cf["Succeeded"]["last_transition_time"]) == created


def check_python_client_final(pb, pb_grpc, channel):
    reply = pb_grpc.JobStatusStub(channel).Get(pb.GetJobStatusRequest(run_id="sw"),
                                               timeout=10)
    py_workers = {w.rank: w for w in reply.workers}
    assert py_workers[4].state == pb.WORKER_STATE_FAILED and py_workers[4].code == 5
    assert py_workers[0].state == pb.WORKER_STATE_STOPPED and py_workers[0].signal == 15
    assert {c.type: c.status for c in reply.conditions}["Failed"] == "True"


def check_table(status, pids2):
    """The table groups ranks under their node, with pids and states."""
    table = subprocess.run(status, capture_output=True, text=True, timeout=20).stdout
    lines = table.splitlines()
    assert any(line.startswith("Failed ") and "True" in line and "NotRestartable" in line
               for line in lines), table
    node2 = next(i for i, line in enumerate(lines) if line.startswith("2 "))
    # Under the node: its command line (and log directory with -r/-t), then its ranks.
    assert lines[node2 + 1].startswith("       command: ") and "fake_worker" in lines[node2 + 1]
    ranks = [line for line in lines[node2 + 1:node2 + 5] if line.startswith("       rank ")]
    assert f"rank 4     local 0   pid {pids2[4]}" in ranks[0], table
    assert "Failed" in ranks[0] and "exit 5" in ranks[0]
    assert f"pid {pids2[5]}" in ranks[1] and "Stopped" in ranks[1]
    assert lines[1].startswith("elapsed ") and " master 127.0.0.1:" in lines[1], table


def test_three_node_job_shows_workers_pids_and_conditions(tmp_path):
    grpc, pb, pb_grpc = python_client(tmp_path)
    ranks = tmp_path / "ranks"
    with serve("--rdzv-id", "sw") as port:
        endpoint = f"127.0.0.1:{port}"
        agents = start_agents(endpoint, ranks)
        status = [str(MUSTER), "status", "--rdzv-endpoint", endpoint, "--rdzv-id", "sw"]

        # ---- round 1: every worker running; pids are the real worker processes.
        r1 = running_round(status, 1)
        pids1 = wait_for(lambda: len(p := rank_pids(ranks, 0)) == 6 and p, 10,
                         what="round 1 workers' own pids")
        created, started1 = check_round1(r1, pids1)
        channel = grpc.insecure_channel(endpoint)
        check_python_client_round1(pb, pb_grpc, channel, pids1, started1)

        # ---- round 2 after rank 3's SIGKILL: new pids, one restart each.
        r2 = running_round(status, 2)
        pids2 = wait_for(lambda: len(p := rank_pids(ranks, 1)) == 6 and p, 10,
                         what="round 2 workers' own pids")
        started2 = check_round2(r2, pids1, pids2, started1, created)

        # ---- rank 4 exits 5: fatal. Every agent exits 5.
        for a in agents:
            out, err = a.communicate(timeout=60)
            assert a.returncode == 5, err[-2000:]
        check_final(snapshot(status), pids2, started2, created)
        check_python_client_final(pb, pb_grpc, channel)
        channel.close()
        check_table(status, pids2)
