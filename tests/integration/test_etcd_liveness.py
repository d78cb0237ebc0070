"""A dead agent is seen at once with the etcd backend (issue 16): SIGKILL of an agent while
real gloo workers all_reduce in a loop, under the default ExitCode restart policy. The
dead agent's workers die with it and the peers' collectives raise (exit 1, fatal under
ExitCode); the survivors must still see a lost node (a new round of WORLD_SIZE 4, the
budget unused, the restart count agreed), not a failed job, and much sooner than the
lease TTL would tell them."""
import os
import signal
import subprocess
import time

import pytest

from conftest import REPO, wait_for
from etcd_cluster import ETCD, EtcdCluster
from test_etcd import lines, node_keys, start_agents

pytestmark = pytest.mark.skipif(not os.path.exists(ETCD),
                                reason="etcd-server is not installed (scripts/setup.sh)")

LOOP = REPO / "tests" / "integration" / "scripts" / "etcd_loop_check.py"
# Lease TTL 4 s: a death seen only by the lease would take 4 s or more; last call 0.5 s.
CONF = "heartbeat_interval=2s,heartbeat_misses=2,last_call_timeout=500ms,join_timeout=60s"


@pytest.fixture(scope="module")
def etcd():
    cluster = EtcdCluster(3)
    yield cluster
    cluster.stop()


def kill_one_under_exitcode(etcd, tmp_path, run_id, victim):
    """3 agents x 2 looping workers; SIGKILL agent `victim` (0: the coordinator, the oldest
    key; 2: the youngest) once round 1 runs. Returns the ms from the kill to the first
    worker of the survivors' round, after checking that round and the job's outcome."""
    out, release = tmp_path / "out.jsonl", tmp_path / "release"
    procs = []
    for tag in "ABC":  # one at a time: the keys' age is A, B, C
        procs += start_agents(etcd, run_id, 1, "2:3", out, conf=CONF,
                              flags=("--restart-policy", "ExitCode"), script=LOOP,
                              RELEASE=release, TAG=tag)
        wait_for(lambda: len(node_keys(etcd, run_id)) == len(procs), timeout=20,
                 interval=0.05, what=f"agent {tag}'s node key")
    wait_for(lambda: len(lines(out)) == 6, timeout=60, interval=0.05, what="round 1's workers")
    keys = node_keys(etcd, run_id)
    by_age = sorted(keys, key=keys.get)
    dead = procs[victim]
    assert int(by_age[victim].split(":")[-2]) == dead.pid  # host:pid:random
    time.sleep(0.5)  # the collectives loop
    killed = time.time()
    dead.send_signal(signal.SIGKILL)
    dead.wait()
    survivors = [p for i, p in enumerate(procs) if i != victim]
    try:
        wait_for(lambda: len(lines(out)) >= 6 + 4 or any(p.poll() is not None for p in survivors),
                 timeout=30, interval=0.02, what="the survivors' round")
    finally:
        release.touch()
    results = []
    for p in survivors:
        try:
            o, e = p.communicate(timeout=60)
        except subprocess.TimeoutExpired:
            p.kill()
            o, e = p.communicate()
        results.append((p.returncode, e))
    for code, err in results:
        # Not 1 (a worker's exit 1 judged as a failure) and not 138 (rendezvous lost).
        assert code == 0, err[-4000:]
    second = lines(out)[6:]
    assert len(second) == 4, second
    assert {r["WORLD_SIZE"] for r in second} == {"4"}, second
    assert sorted(int(r["RANK"]) for r in second) == [0, 1, 2, 3]
    # --max-restarts 0: a membership change used no budget; every worker saw the same count.
    assert {r["TORCHELASTIC_RESTART_COUNT"] for r in lines(out)} == {"0"}
    dead_tag = "ABC"[victim]
    assert dead_tag not in {r["tag"] for r in second}
    return (min(r["started"] for r in second) - killed) * 1000


def test_non_coordinator_killed_under_exitcode_is_a_lost_node(etcd, tmp_path):
    ms = kill_one_under_exitcode(etcd, tmp_path, "livekill", victim=2)
    print(f"kill -> survivors' round started: {ms:.0f} ms")
    # The lease TTL is 4 s; the last call 0.5 s: seen at once, the round comes well before.
    assert ms < 3000, ms


def test_coordinator_killed_under_exitcode_is_a_lost_node(etcd, tmp_path):
    ms = kill_one_under_exitcode(etcd, tmp_path, "livecoord", victim=0)
    print(f"kill -> survivors' round started: {ms:.0f} ms")
    assert ms < 3000, ms
