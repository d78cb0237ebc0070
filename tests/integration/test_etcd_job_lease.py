"""The etcd backend's job lease (docs/guides/etcd.md "Keys and leases"): the job's own keys
(PREFIX/RUN_ID/job and .../status) live with a lease of 3 x the agents' TTL that the
coordinator keeps alive and a next coordinator continues, so a job whose agents were all
killed leaves nothing in etcd, and a job that just ended keeps its final status for
`muster status` until then."""
import json
import os
import signal
import subprocess
import time

import pytest

from conftest import MUSTER, wait_for
from etcd_cluster import ETCD, EtcdCluster
from test_etcd import FAST, finish, lines, node_keys, start_agents, start_one

pytestmark = pytest.mark.skipif(not os.path.exists(ETCD),
                                reason="etcd-server is not installed (scripts/setup.sh)")

TTL = 2  # FAST: heartbeat 1 s x 2
JOB_TTL = 3 * TTL


@pytest.fixture(scope="module")
def etcd1():
    cluster = EtcdCluster(1)
    yield cluster
    cluster.stop()


def lease_of(etcd, key):
    r = etcd.ctl("get", key, "-w", "json")
    assert r.returncode == 0, r.stderr
    kvs = json.loads(r.stdout).get("kvs", [])
    return kvs[0].get("lease", 0) if kvs else None


def status(etcd, run_id):
    r = subprocess.run([str(MUSTER), "status", "--rdzv-backend", "etcd", "--rdzv-endpoint",
                        etcd.endpoints, "--rdzv-id", run_id, "--json"],
                       capture_output=True, text=True, timeout=30)
    return r.returncode, (json.loads(r.stdout) if r.returncode == 0 else r.stderr)


def test_all_agents_killed_leaves_no_key_after_the_job_lease(etcd1, tmp_path):
    out, run_id = tmp_path / "out.jsonl", "leasekill"
    prefix = f"/muster/{run_id}/"
    procs = {}
    for tag in ("A", "B"):  # one at a time: A is the coordinator
        procs[tag] = start_one(etcd1, run_id, "1:2", out, TAG=tag, HOLD_WORLD="4,2")
        wait_for(lambda: len(node_keys(etcd1, run_id)) == len(procs), timeout=20,
                 interval=0.05, what=f"agent {tag}'s node key")
    # (A alone may start a round of 2 first, if B comes after the last call: then B joins.)
    rows = lambda world, tags: [r for r in lines(out)  # noqa: E731
                                if r["WORLD_SIZE"] == world and r["tag"] in tags]
    wait_for(lambda: len(rows("4", "AB")) == 4, timeout=60, interval=0.1,
             what="the 2-node round's workers")
    job_lease = lease_of(etcd1, prefix + "job")
    assert job_lease, "the job key has a lease while the job runs"
    # The coordinator dies: B takes over and keeps the same job lease alive.
    procs["A"].send_signal(signal.SIGKILL)
    procs["A"].wait()
    wait_for(lambda: len(rows("2", "B")) == 2, timeout=30, interval=0.1, what="B's round")
    assert lease_of(etcd1, prefix + "job") == job_lease
    assert lease_of(etcd1, prefix + "status") == job_lease
    # Every agent killed: nobody keeps a lease alive; every key of the job goes.
    procs["B"].send_signal(signal.SIGKILL)
    procs["B"].wait()
    killed = time.monotonic()
    wait_for(lambda: not etcd1.keys(prefix), timeout=JOB_TTL + 3, interval=0.2,
             what="every key of the killed job to expire")
    assert time.monotonic() - killed <= JOB_TTL + 2


def test_ended_jobs_keep_their_final_status_until_the_job_lease_ends(etcd1, tmp_path):
    good = start_agents(etcd1, "endok", 2, "2", tmp_path / "ok.jsonl")
    bad = start_agents(etcd1, "endfail", 2, "2", tmp_path / "fail.jsonl", FAIL_RANK=1)
    # On a failure, every agent of the job speaks: the one that failed first is often not
    # the one whose exit code is wrong (a CI run had node 1 wait 60 s for a lost node 0).
    both = lambda results: "\n".join(  # noqa: E731
        f"agent {i}: exit {code}\n{err[-2500:]}" for i, (code, _, err) in enumerate(results))
    ended_good, ended_bad = finish(good), finish(bad)
    assert [code for code, _, _ in ended_good] == [0, 0], both(ended_good)
    assert [code for code, _, _ in ended_bad] == [3, 3], both(ended_bad)
    ended = time.monotonic()
    # Every agent has exited (and revoked its lease): the status is still there.
    code, ok = status(etcd1, "endok")
    assert code == 0, ok
    assert ok["phase"] == "Succeeded", ok
    code, failed = status(etcd1, "endfail")
    assert code == 0, failed
    assert failed["phase"] == "Failed" and "3" in json.dumps(failed["root_cause"]), failed
    assert set(etcd1.keys("/muster/endok/")) == {"/muster/endok/job", "/muster/endok/status"}
    # Until the job lease ends: then nothing of either job is left.
    wait_for(lambda: not etcd1.keys("/muster/endok/") and not etcd1.keys("/muster/endfail/"),
             timeout=JOB_TTL + 3, interval=0.2, what="the ended jobs' keys to expire")
    assert time.monotonic() - ended <= JOB_TTL + 2
    code, err = status(etcd1, "endok")
    assert code == 1, err
