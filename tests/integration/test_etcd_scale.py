"""The etcd backend's round costs O(nodes) watch events in etcd, not O(nodes^2) (issue 16,
B2 etcd): an agent watches its own events key (to/NODE_ID) and the coordinator's node key,
not the whole job; only the coordinator reads the node keys and reports. Counted with
etcd's own metric of events sent to watchers (etcd_debugging_mvcc_events_total, every
member), over a whole job of real agents: join, round, success, leaving. And a coordinator
change costs each survivor one read (Range requests served, grpc_server_handled_total)."""
import os
import subprocess
import urllib.request

import pytest

from conftest import MUSTER, muster_env, wait_for
from etcd_cluster import ETCD, EtcdCluster

pytestmark = pytest.mark.skipif(not os.path.exists(ETCD),
                                reason="etcd-server is not installed (scripts/setup.sh)")

CONF = "heartbeat_interval=1s,heartbeat_misses=3,last_call_timeout=1s,join_timeout=60s"


def metric_total(etcd, selects):
    """The sum over every member of the Prometheus samples (on its client URL's /metrics)
    whose line `selects`."""
    total = 0.0
    for port in etcd.client_ports:
        with urllib.request.urlopen(f"http://{etcd.host}:{port}/metrics", timeout=5) as r:
            for line in r.read().decode().splitlines():
                if selects(line):
                    total += float(line.split()[-1])
    return total


def events_sent(etcd):
    """Events etcd sent to watchers."""
    return metric_total(etcd, lambda line: line.startswith("etcd_debugging_mvcc_events_total "))


def ranges_served(etcd):
    """Range requests (Get, prefix ranges, oldest-key reads) every member has answered."""
    return metric_total(etcd, lambda line: line.startswith("grpc_server_handled_total{") and
                        'grpc_method="Range"' in line)


def start_agents(etcd, run_id, conf, nnodes, n, *command):
    """n agents of one process each, `command` their worker (--no-python)."""
    return [subprocess.Popen(
        [str(MUSTER), "run", "--rdzv-backend", "etcd", "--rdzv-endpoint", etcd.endpoints,
         "--rdzv-id", run_id, "--rdzv-conf", conf, "--nnodes", nnodes, "--nproc-per-node", "1",
         "--max-restarts", "0", "--no-python", "--", *command], stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE, text=True, env=muster_env()) for _ in range(n)]


def test_a_job_of_twelve_agents_sends_watch_events_linear_in_nodes():
    n = 12
    etcd = EtcdCluster(3)
    try:
        before = events_sent(etcd)
        procs = start_agents(etcd, "scale", CONF, str(n), n, "/bin/true")
        for p in procs:
            _, err = p.communicate(timeout=60)
            assert p.returncode == 0, err[-2000:]
        wait_for(lambda: not etcd.keys("/muster/scale/nodes/"), timeout=10, interval=0.2,
                 what="the agents' node keys to go")
        sent = events_sent(etcd) - before
        # Each agent: its node key, its batches, its reports and their deletion reach the
        # coordinator or itself once, the coordinator's leaving every agent once. Watching
        # the whole job (every agent sees every change: the protocol before) sent 789 here.
        print(f"watch events sent for {n} agents: {sent:.0f}")
        assert sent <= 25 * n, f"{sent:.0f} watch events for {n} agents: not O(nodes)"
    finally:
        etcd.stop()


def test_a_coordinator_change_costs_each_survivor_one_read(tmp_path):
    # The coordinator of 12 agents is killed while round 1 runs. A survivor follows the
    # successor the coordinator's batches named after one read of its key (rendezvous/etcd/
    # election.h): not the coordinator key (gone with its lease) and then the oldest node
    # key, which etcd 3.4 answers by reading and sorting every node key (O(nodes) each:
    # O(nodes^2) a fail-over). etcd has no metric of keys read, so the reads are counted.
    n, run_id, out = 12, "failover", tmp_path / "rounds"
    conf = "heartbeat_interval=1s,heartbeat_misses=2,last_call_timeout=1s,join_timeout=60s"
    etcd = EtcdCluster(3)
    procs = []
    try:
        worker = f'echo "$TORCHELASTIC_RESTART_COUNT $WORLD_SIZE" >> {out}; exec sleep 120'
        procs = start_agents(etcd, run_id, conf, f"{n - 1}:{n}", n, "/bin/sh", "-c", worker)
        rounds = lambda: out.read_text().splitlines() if out.exists() else []  # noqa: E731
        # A round of all n: with nnodes n-1:n, a round can start with n-1 after the 1 s last
        # call when one agent is slow to join (a loaded machine), and the late one then
        # makes a second round of n. Wait for the n lines of a round of n, whichever it is.
        full = lambda: len(rounds()) >= n and all(  # noqa: E731
            r.split()[1] == str(n) for r in rounds()[-n:])
        wait_for(full, timeout=40, interval=0.1, what=f"a round of all {n} agents")
        first = len(rounds())
        keys = etcd.keys(f"/muster/{run_id}/nodes/")
        oldest = min(keys, key=keys.get).rsplit("/", 1)[1]
        coordinator = next(p for p in procs if int(oldest.split(":")[-2]) == p.pid)
        before = ranges_served(etcd)
        coordinator.kill()
        coordinator.wait()
        wait_for(lambda: len(rounds()) == first + n - 1, timeout=30, interval=0.1,
                 what="the survivors' round")
        assert {r.split()[1] for r in rounds()[first:]} == {str(n - 1)}, rounds()
        reads = ranges_served(etcd) - before
        # The successor: its own key, the node keys and the job's state; every other
        # survivor: the successor's key (which also gives the liveness address). Before:
        # the coordinator key, the oldest node key and the new coordinator's key each.
        print(f"reads on a coordinator change with {n - 1} survivors: {reads:.0f}")
        assert reads <= (n - 1) + 6, f"{reads:.0f} reads for {n - 1} survivors"
    finally:
        for p in procs:
            if p.poll() is None:
                p.terminate()
        for p in procs:
            try:
                p.communicate(timeout=20)
            except subprocess.TimeoutExpired:
                p.kill()
                p.communicate()
        etcd.stop()
