"""The etcd backend's round costs O(nodes) watch events in etcd, not O(nodes^2) (issue 16,
B2 etcd): an agent watches its own events key (to/NODE_ID) and the coordinator's node key,
not the whole job; only the coordinator reads the node keys and reports. Counted with
etcd's own metric of events sent to watchers (etcd_debugging_mvcc_events_total, every
member), over a whole job of real agents: join, round, success, leaving."""
import os
import subprocess
import urllib.request

import pytest

from conftest import MUSTER, muster_env, wait_for
from etcd_cluster import ETCD, EtcdCluster

pytestmark = pytest.mark.skipif(not os.path.exists(ETCD),
                                reason="etcd-server is not installed (scripts/setup.sh)")

CONF = "heartbeat_interval=1s,heartbeat_misses=3,last_call_timeout=1s,join_timeout=60s"


def events_sent(etcd):
    total = 0.0
    for port in etcd.client_ports:
        with urllib.request.urlopen(f"http://{etcd.host}:{port}/metrics", timeout=5) as r:
            for line in r.read().decode().splitlines():
                if line.startswith("etcd_debugging_mvcc_events_total "):
                    total += float(line.split()[1])
    return total


def test_a_job_of_twelve_agents_sends_watch_events_linear_in_nodes():
    n = 12
    etcd = EtcdCluster(3)
    try:
        before = events_sent(etcd)
        procs = [subprocess.Popen(
            [str(MUSTER), "run", "--rdzv-backend", "etcd", "--rdzv-endpoint", etcd.endpoints,
             "--rdzv-id", "scale", "--rdzv-conf", CONF, "--nnodes", str(n), "--nproc-per-node",
             "1", "--max-restarts", "0", "--no-python", "--", "/bin/true"],
            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
            env=muster_env()) for _ in range(n)]
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
