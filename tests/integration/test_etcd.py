"""The etcd rendezvous backend (--rdzv-backend etcd) against a real 3-member etcd cluster
(Debian's etcd-server) with real torch workers: no agent serves the rendezvous, and killing
the agent that coordinates is a lost node like any other."""
import json
import os
import signal
import subprocess
import time

import pytest

from conftest import MUSTER, REPO, muster_env, pid_alive, run_muster, wait_for
from etcd_cluster import ETCD, EtcdCluster

pytestmark = pytest.mark.skipif(not os.path.exists(ETCD),
                                reason="etcd-server is not installed (scripts/setup.sh)")

CHECK = REPO / "tests" / "integration" / "scripts" / "etcd_check.py"
# Lease TTL 2 s: a killed agent is noticed within about 2 s.
FAST = "heartbeat_interval=1s,heartbeat_misses=2,last_call_timeout=1s,join_timeout=60s"


@pytest.fixture(scope="module")
def etcd():
    cluster = EtcdCluster(3)
    yield cluster
    cluster.stop()


def start_agents(etcd, run_id, n, nnodes, out, hold_world=None, conf=FAST, flags=(),
                 **env_extra):
    env = muster_env(OUT=out, **({"HOLD_WORLD": hold_world} if hold_world else {}), **env_extra)
    procs = []
    for _ in range(n):
        procs.append(subprocess.Popen(
            [str(MUSTER), "run", "--rdzv-backend", "etcd", "--rdzv-endpoint", etcd.endpoints,
             "--rdzv-id", run_id, "--rdzv-conf", conf, "--nnodes", nnodes,
             "--nproc-per-node", "2", "--max-restarts", "0", *flags, str(CHECK)],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env))
    return procs


def lines(path):
    try:
        with open(path) as f:
            return [json.loads(line) for line in f if line.strip()]
    except FileNotFoundError:
        return []


def finish(procs, timeout=60):
    results = []
    for p in procs:
        out, err = p.communicate(timeout=timeout)
        results.append((p.returncode, out, err))
    return results


def test_three_agents_all_reduce_through_etcd(etcd, tmp_path):
    out = tmp_path / "out.jsonl"
    results = finish(start_agents(etcd, "allreduce", 3, "3", out))
    for code, _, err in results:
        assert code == 0, err[-3000:]
    rows = lines(out)
    assert len(rows) == 6
    assert sorted(int(r["RANK"]) for r in rows) == list(range(6))
    assert {r["WORLD_SIZE"] for r in rows} == {"6"}
    assert {r["sum"] for r in rows} == {21.0}  # 1 + 2 + ... + 6
    assert len({(r["MASTER_ADDR"], r["MASTER_PORT"]) for r in rows}) == 1
    # Every agent's keys went with its lease when it exited; the job's state expires too.
    wait_for(lambda: not [k for k in etcd.keys("/muster/allreduce/") if "/nodes/" in k],
             timeout=10, interval=0.2, what="the agents' node keys to go")


def test_coordinator_killed_survivors_continue_in_a_new_round(etcd, tmp_path):
    out = tmp_path / "out.jsonl"
    procs = start_agents(etcd, "coordkill", 3, "2:3", out, hold_world="6")
    wait_for(lambda: len(lines(out)) == 6, timeout=60, interval=0.1, what="round 1's workers")
    # The coordinator is the agent with the oldest node key; its node id is host:pid:random.
    nodes = {k: rev for k, rev in etcd.keys("/muster/coordkill/nodes/").items()}
    oldest = min(nodes, key=nodes.get)
    coordinator_pid = int(oldest.rsplit("/", 1)[1].split(":")[-2])
    victim = next(p for p in procs if p.pid == coordinator_pid)
    victim.send_signal(signal.SIGKILL)
    survivors = [p for p in procs if p is not victim]
    results = finish(survivors, timeout=60)
    victim.wait()
    for code, _, err in results:
        # Not 138: the coordinator's death is a lost node, not a lost rendezvous.
        assert code == 0, err[-3000:]
    rows = lines(out)[6:]
    assert len(rows) == 4, rows
    assert {r["WORLD_SIZE"] for r in rows} == {"4"}
    assert sorted(int(r["RANK"]) for r in rows) == [0, 1, 2, 3]
    assert {r["sum"] for r in rows} == {10.0}
    # --max-restarts 0 and still a new round: the membership change used no budget.
    assert {r["TORCHELASTIC_RESTART_COUNT"] for r in rows} == {"0"}
    # Each survivor stopped its round because the coordinator was gone, not for a failure.
    for _, _, err in results:
        assert "node lost: the coordinator" in err and "takes over" in err, err[-3000:]


def test_a_failure_restarts_every_node_with_the_budget_agreed(etcd, tmp_path):
    # The normal stop path (workers stopped, reported, next round) through etcd.
    out = tmp_path / "out.jsonl"
    results = finish(start_agents(etcd, "restart", 2, "2", out, FAIL_RANK=3,
                                  flags=["--max-restarts", "1", "--restart-policy", "OnFailure"]))
    for code, _, err in results:
        assert code == 0, err[-3000:]
    rows = [r for r in lines(out) if r["TORCHELASTIC_RESTART_COUNT"] == "1"]
    assert sorted(int(r["RANK"]) for r in rows) == [0, 1, 2, 3], lines(out)
    assert {r["sum"] for r in rows} == {10.0}


def test_etcd_leader_killed_workers_untouched(tmp_path):
    # A cluster of its own: this test kills a member.
    etcd = EtcdCluster(3)
    try:
        out, release = tmp_path / "out.jsonl", tmp_path / "release"
        # Lease TTL 4 s: longer than etcd's re-election (election timeout 1 s).
        conf = "heartbeat_interval=1s,heartbeat_misses=4,last_call_timeout=1s,join_timeout=60s"
        procs = start_agents(etcd, "leaderkill", 3, "3", out, hold_world="6", conf=conf,
                             RELEASE=release)
        wait_for(lambda: len(lines(out)) == 6, timeout=60, interval=0.1, what="round 1's workers")
        # The leader is also the member every agent talks to (the first listed): its death
        # takes their watch, their lease keep-alive and the cluster's leader at once.
        etcd.make_leader(0)
        assert etcd.leader() == 0
        leader = 0
        etcd.procs[leader].send_signal(signal.SIGKILL)
        etcd.procs[leader].wait()
        # Past the lease TTL with one member gone and a new leader elected: nothing moves.
        wait_for(lambda: etcd.leader(alive_only=True) not in (None, leader), timeout=10,
                 interval=0.2, what="a new etcd leader")
        time.sleep(5)
        assert all(p.poll() is None for p in procs), [p.poll() for p in procs]
        release.touch()
        results = finish(procs, timeout=60)
        for code, _, err in results:
            assert code == 0, err[-3000:]
        rows = lines(out)
        # One round only: the workers were never stopped or restarted.
        assert len(rows) == 6 and {r["WORLD_SIZE"] for r in rows} == {"6"}, rows
    finally:
        etcd.stop()


def test_etcd_gone_past_the_lease_every_agent_stops_and_exits_138(tmp_path):
    etcd = EtcdCluster(3)
    try:
        out = tmp_path / "out.jsonl"
        procs = start_agents(etcd, "outage", 2, "2", out, hold_world="4")
        wait_for(lambda: len(lines(out)) == 4, timeout=60, interval=0.1, what="the workers")
        workers = [r["pid"] for r in lines(out)]
        for p in etcd.procs:
            p.send_signal(signal.SIGKILL)
        gone = time.monotonic()
        results = finish(procs, timeout=30)
        took = time.monotonic() - gone
        for code, _, err in results:
            assert code == 138, err[-3000:]
            assert "etcd lease lost" in err or "no etcd member could be watched" in err, err[-3000:]
        # Lease TTL 2 s, then the workers' stop: the issue asks for lease + 2 s; slack for
        # a loaded machine.
        assert took < 2 + 4, took
        assert not any(pid_alive(pid) for pid in workers)
    finally:
        etcd.stop()


def test_etcd_v2_is_an_alias_and_unsupported_keys_are_refused(etcd, tmp_path):
    r = run_muster(["--rdzv-backend", "etcd-v2", "--rdzv-endpoint", etcd.endpoints,
                    "--nnodes", "2", "--dry-run", str(CHECK)])
    assert r.returncode == 0, r.stderr
    assert "etcd-v2 uses etcd's v3 API" in r.stderr
    # (TLS and user keys: test_etcd_security.py)
    for conf, needle in [("protocol=ftp", "protocol: 'ftp' must be http or https"),
                         ("etcd_prefix=x", "etcd_prefix: 'x' must start with /"),
                         ("secret=x", "unknown key 'secret'")]:
        r = run_muster(["--rdzv-backend", "etcd", "--rdzv-endpoint", etcd.endpoints,
                        "--rdzv-conf", conf, "--nnodes", "2", "--dry-run", str(CHECK)])
        assert r.returncode == 2 and needle in r.stderr, (conf, r.stderr)
    r = run_muster(["--rdzv-endpoint", "h1:1,h2:2", "--nnodes", "2", "--dry-run", str(CHECK)])
    assert r.returncode == 2 and "several endpoints are for --rdzv-backend etcd" in r.stderr
    # Without --local-addr (or POD_IP) a non-localhost etcd is refused: etcd cannot tell
    # where an agent is.
    r = run_muster(["--rdzv-backend", "etcd", "--rdzv-endpoint", "127.0.0.1:1", "--nnodes", "2",
                    "--rdzv-conf", "join_timeout=5s", str(CHECK)])
    assert r.returncode == 2 and "give --local-addr" in r.stderr, r.stderr
