"""A node cut off from etcd while its peers still reach it (issue 16, "no node is special"),
under the default ExitCode restart policy and --max-restarts 0: its lease ends, its fence
SIGTERMs its workers at once, and the survivors' gloo all_reduce fails with exit 1 (fatal
under ExitCode) milliseconds later, before the coordinator sees the node's lease end. The
coordinator holds that fatal failure for the settle window (docs/reference/exit-codes.md): the
loss that follows makes it a membership change, so the survivors re-form at WORLD_SIZE 4
with the budget unused; the node cut off exits 138."""
import os
import re
import subprocess
import time

import pytest

from conftest import REPO, wait_for
from etcd_cluster import ETCD, EtcdCluster
from pods import Pods, read_text
from test_etcd import etcd_status, lines, node_keys, pod_agent

pytestmark = pytest.mark.skipif(not os.path.exists(ETCD),
                                reason="etcd-server is not installed (scripts/setup.sh)")

LOOP = REPO / "tests" / "integration" / "scripts" / "etcd_loop_check.py"
# Lease TTL 4 s: the node cut off is out about 4 s after the cut; its fence stops its workers
# 400 ms (TTL / 10) before etcd may drop its lease, so the survivors' failures come first by a
# margin a loaded machine keeps (TTL 2 s: 200 ms). Last call 300 ms.
CONF = "heartbeat_interval=2s,heartbeat_misses=2,last_call_timeout=300ms,join_timeout=60s"


def loop_agent(pod, etcd, run_id, out, release):
    return pod_agent(pod, etcd, run_id, "2:3", out, conf=CONF,
                     flags=("--restart-policy", "ExitCode"), script=LOOP, RELEASE=release,
                     POD_IP=pod.ip, EXIT_AT_ONCE="1")


def test_node_cut_off_from_etcd_is_a_lost_node_not_a_failed_job(tmp_path):
    with Pods(4, tmp_path) as pods:
        etcd = EtcdCluster(1, host=pods[0].ip, netns=pods[0].ns)
        try:
            out, release = tmp_path / "out.jsonl", tmp_path / "release"
            agents = {}
            for i in (1, 2, 3):  # one at a time: pod1's key is the oldest (the coordinator)
                agents[i] = loop_agent(pods[i], etcd, "settle", out, release)
                wait_for(lambda: len(node_keys(etcd, "settle")) == len(agents), timeout=20,
                         interval=0.05, what=f"pod{i}'s node key")
            wait_for(lambda: len(lines(out)) >= 6 and
                     [r["WORLD_SIZE"] for r in lines(out)[-6:]] == ["6"] * 6, timeout=60,
                     interval=0.05, what="the workers of a round of three nodes")
            first = len(lines(out))
            time.sleep(0.3)  # the collectives loop
            # pod3 (not the coordinator) loses etcd only: its peers still reach it, so its
            # workers' end resets the survivors' gloo connections at once.
            subprocess.run(["ip", "-n", pods[3].ns, "route", "add", "blackhole",
                            f"{pods[0].ip}/32"], check=True, timeout=10)
            assert agents[3].wait(20) == 138, read_text(agents[3].err_path)[-3000:]
            assert "etcd lease lost" in read_text(agents[3].err_path)
            survivors = [agents[1], agents[2]]
            try:
                wait_for(lambda: len(lines(out)) >= first + 4 or
                         any(p.poll() is not None for p in survivors),
                         timeout=20, interval=0.05, what="the survivors' round")
                history = etcd_status(etcd, "settle", netns=pods[1].ns)["history"] \
                    if all(p.poll() is None for p in survivors) else []
            finally:
                release.touch()
            for p in survivors:
                # Not 1: a worker's exit 1 judged as the job's failure.
                assert p.wait(30) == 0, read_text(p.err_path)[-4000:]
            second = lines(out)[first:]
            assert len(second) == 4, second
            assert {r["WORLD_SIZE"] for r in second} == {"4"}, second
            assert "pod3" not in {r["tag"] for r in second}
            # --max-restarts 0: the loss used no budget; every worker saw the same count.
            assert {r["TORCHELASTIC_RESTART_COUNT"] for r in lines(out)} == {"0"}
            # The coordinator said why it waited; the history says why the failure did not
            # end the job: its last record is the loss, and no record is counted (with a
            # last call of 300 ms a round of two may form before pod3 joins: its join is an
            # uncounted record before the loss).
            coordinator = read_text(agents[1].err_path)
            assert re.search(r"holding the failure of rank \d+ on pod[12] \(exit 1\) for 3s",
                             coordinator), coordinator[-4000:]
            assert history and not any(r["counted"] for r in history), history
            assert all("joined" in r["reason"] for r in history[:-1]), history
            reason = history[-1]["reason"]
            print(reason)
            assert reason.startswith("node pod3 ") and "lost" in reason, reason
            assert re.search(r"failed: exit 1.*, [0-9.]+ s before node pod3 was lost: judged a "
                             r"consequence of the loss", reason), reason
        finally:
            etcd.stop()
