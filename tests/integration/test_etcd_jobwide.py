"""Issue 17's job-wide features with the etcd backend (--rdzv-backend etcd), against a real
3-member etcd and real torch gloo workers: a preemption notice reaches every node before
anything stops (docs/guides/preemption.md), and --hang-timeout names the culprit
(docs/guides/hangs-and-stacks.md "Hangs"), as with the gRPC rendezvous. The reports travel to
the coordinator as keys, its Job's answers through the events key."""
import json
import os
import pathlib
import signal
import subprocess
import time

import pytest

from conftest import MUSTER, REPO, muster_env, needs_torch, wait_for
from etcd_cluster import ETCD, EtcdCluster
from test_etcd import FAST, node_keys
from test_hang import CULPRIT, TIMEOUT_S, job_env
from test_preempt import assert_elastic_sigterm_outcome, saved_steps, torch_env, wait_steps

pytestmark = [needs_torch,
              pytest.mark.skipif(not os.path.exists(ETCD),
                                 reason="etcd-server is not installed (scripts/setup.sh)")]

PREEMPT = REPO / "tests" / "integration" / "scripts" / "preempt_worker.py"
HANG = REPO / "tests" / "integration" / "scripts" / "hang_worker.py"


@pytest.fixture(scope="module")
def etcd():
    cluster = EtcdCluster(3)
    yield cluster
    cluster.stop()


def start_in_order(etcd, run_id, n, args, env, per_agent=lambda i: []):
    """n agents, one at a time (each waits for the previous one's node key), so that the
    first is the coordinator and the last is not."""
    procs = []
    for i in range(n):
        procs.append(subprocess.Popen(
            [str(MUSTER), "run", "--rdzv-backend", "etcd", "--rdzv-endpoint", etcd.endpoints,
             "--rdzv-id", run_id, "--rdzv-conf", FAST, "--nproc-per-node", "2",
             *map(str, per_agent(i)), *map(str, args)],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env))
        wait_for(lambda: len(node_keys(etcd, run_id)) == len(procs), timeout=20, interval=0.05,
                 what="the agent's node key")
    return procs


def etcd_status(etcd, run_id):
    """The job's status from etcd (--json), or None while it has none (not yet, or over)."""
    r = subprocess.run([str(MUSTER), "status", "--rdzv-backend", "etcd", "--rdzv-endpoint",
                        etcd.endpoints, "--rdzv-id", run_id, "--json"], capture_output=True,
                       text=True, timeout=30)
    return json.loads(r.stdout) if r.returncode == 0 else None


def finish(procs, timeout=60):
    results = []
    for p in procs:
        try:
            out, err = p.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            for q in procs:
                q.kill()
            raise
        results.append((p.returncode, out, err))
    return results


def test_sigterm_to_one_agent_every_rank_saves_and_the_elastic_job_continues(etcd, tmp_path):
    """Elastic 1:2 nodes x 2 ranks: SIGTERM to B (not the coordinator); all 4 ranks save the
    same step S, B exits 143, A re-forms alone (attempt 0: a membership change) at S+1."""
    ckpt, log, env = torch_env(tmp_path)
    procs = start_in_order(etcd, "preempt-elastic", 2,
                           ["--nnodes", "1:2", "--preempt-grace", "15s", PREEMPT], env)
    wait_steps(log, 4 * 3)
    procs[1].send_signal(signal.SIGTERM)
    assert_elastic_sigterm_outcome(finish(procs), log, ckpt)


def test_sigterm_to_the_coordinator_of_a_fixed_size_job_every_agent_exits_143(etcd, tmp_path):
    """2 x 2 ranks, fixed size, SIGTERM to A, the coordinator itself: while the ranks save
    (SAVE_DELAY) the status read from etcd says Preempting with A and the reason; A's Job
    removes A as preempted before A's key goes, so B too exits 143 (not a wait for a
    replacement under a next coordinator that never heard of the preemption)."""
    ckpt, log, env = torch_env(tmp_path, SAVE_DELAY="2")
    procs = start_in_order(etcd, "preempt-fixed", 2, ["--nnodes", "2", PREEMPT], env)
    wait_steps(log, 4 * 2)
    a = min(node_keys(etcd, "preempt-fixed").items(), key=lambda kv: kv[1])[0]
    assert int(a.split(":")[-2]) == procs[0].pid  # host:pid:random; the oldest coordinates
    procs[0].send_signal(signal.SIGTERM)
    doc = wait_for(lambda: (d := etcd_status(etcd, "preempt-fixed")) and
                   d["phase"] == "Preempting" and d, timeout=10, interval=0.1,
                   what="the status to say Preempting")
    assert doc["preempting"][0]["node_id"] == a, doc["preempting"]
    assert doc["preempting"][0]["reason"] == "agent received SIGTERM", doc["preempting"]
    for rc, _, err in finish(procs, timeout=30):
        assert rc == 143, err[-3000:]
    saved = saved_steps(ckpt)
    assert len(saved) == 4 and len(set(saved.values())) == 1, saved


def steps_settled(log, quiet=0.5):
    n = len(log.read_text().splitlines())
    time.sleep(quiet)
    return len(log.read_text().splitlines()) == n


def test_coordinator_killed_during_a_preemption_grace_the_next_one_continues_it(etcd, tmp_path):
    """Elastic 2:3 nodes x 2 ranks, A coordinates: SIGTERM to C, and while its ranks wait to
    save (SAVE_GATE) A is SIGKILLed. B takes over from the job's state in etcd, which holds
    C's preemption: once C has left, B alone is below MIN and the job ends with 143 on B as
    on C, as with muster's own rendezvous (the next coordinator used to forget the
    preemption: C's leaving was a lost node, and B waited for the join timeout)."""
    gate = tmp_path / "gate"
    ckpt, log, env = torch_env(tmp_path, SAVE_GATE=gate)
    run = "preempt-carried"
    procs = start_in_order(etcd, run, 3, ["--nnodes", "2:3", "--preempt-grace", "20s", PREEMPT],
                           env)
    try:
        wait_steps(log, 6 * 2)
        keys = sorted(node_keys(etcd, run).items(), key=lambda kv: kv[1])
        a, c = keys[0][0], keys[2][0]
        procs[2].send_signal(signal.SIGTERM)
        wait_for(lambda: (d := etcd_status(etcd, run)) and d["phase"] == "Preempting" and
                 d["preempting"][0]["node_id"] == c, timeout=10, interval=0.1,
                 what="the status to say Preempting C")
        # Every rank past the stop all_reduce, waiting at the gate: no step for 0.5 s.
        wait_for(lambda: steps_settled(log), timeout=10, interval=0.1,
                 what="every rank at the save gate")
        procs[0].kill()
        # A's lease ends (TTL 2 s): B coordinates, C's ranks still wait to save.
        wait_for(lambda: a not in node_keys(etcd, run), timeout=10, interval=0.05,
                 what="A's node key to go")
        gate.touch()
        results = finish(procs[1:], timeout=30)
    except BaseException:
        for p in procs:
            p.kill()
        raise
    procs[0].wait()
    (b_rc, _, b_err), (c_rc, _, c_err) = results
    assert c_rc == 143, c_err[-3000:]
    assert b_rc == 143, b_err[-3000:]
    assert f"node {c.split(':')[0]} preempted: agent received SIGTERM" in b_err, b_err[-3000:]
    saved = saved_steps(ckpt)
    assert len(saved) == 4 and len(set(saved.values())) == 1, saved  # B's and C's ranks


def test_a_rank_sleeping_before_all_reduce_is_named_and_the_job_restarts(etcd, tmp_path):
    """2 nodes x 2 ranks, --hang-timeout 3s: rank 3 sleeps before its all_reduce; every node
    reports its stall to the coordinator, whose Job names rank 3; the job restarts (1 of 1)
    and completes."""
    marks = tmp_path / "marks"
    procs = start_in_order(etcd, "hang", 2,
                           ["--nnodes", "2", "--max-restarts", "1", "--hang-timeout",
                            f"{TIMEOUT_S}s", HANG],
                           job_env(marks, "sleep"),
                           per_agent=lambda i: ["--log-dir", tmp_path / f"logs{i}"])
    seen = wait_for(lambda: (s := etcd_status(etcd, "hang")) and s["history"] and s, 40, 0.2,
                    "a restart in the job's history")
    results = finish(procs)
    for rc, _, err in results:
        assert rc == 0, err[-3000:]
    reason = seen["history"][0]["reason"]
    assert "failed: hung: " + CULPRIT in reason, reason
    assert seen["history"][0]["failure"]["rank"] == 3
    assert CULPRIT in "".join(e for _, _, e in results)
    files = sorted(tmp_path.glob("logs*/**/hang-round1.txt"))
    assert len(files) == 2, files
    text = "".join(f.read_text() for f in files)
    assert all(f"--- rank {r} " in text for r in range(4)), text


def muster_cli(etcd, command, run_id, *args):
    return subprocess.run([str(MUSTER), command, "--rdzv-backend", "etcd", "--rdzv-endpoint",
                           etcd.endpoints, "--rdzv-id", run_id, *map(str, args)],
                          capture_output=True, text=True, timeout=30, env=muster_env())


def test_job_wide_stacks_then_drain_through_etcd(etcd, tmp_path):
    """2 x 2 ranks, fixed size: `muster stacks --rdzv-backend etcd` lists all 4 ranks of both
    nodes (each agent answers its request key); `muster drain --rdzv-backend etcd --node B`
    reaches the coordinator: every rank saves the same step and every agent exits 143. An
    unknown node is the coordinator's refusal (1), an unknown job etcd's (1), and every
    request's keys go with the command's lease."""
    ckpt, log, env = torch_env(tmp_path, SAVE_DELAY="1")
    procs = start_in_order(etcd, "drain", 2, ["--nnodes", "2", PREEMPT], env)
    try:
        wait_steps(log, 4 * 2)
        keys = node_keys(etcd, "drain")
        r = muster_cli(etcd, "stacks", "drain", "--json")
        assert r.returncode == 0, r.stderr
        doc = json.loads(r.stdout)
        print(f"job-wide stacks through etcd in {doc['elapsed_s']:.2f}s")
        assert doc["elapsed_s"] < 2.5, doc["elapsed_s"]  # every node answered: no timeout
        assert sorted(n["node_id"] for n in doc["nodes"]) == sorted(keys), doc["nodes"]
        assert all("unavailable" not in n for n in doc["nodes"]), doc["nodes"]
        assert sorted(r for g in doc["groups"] for r in g["ranks"]) == [0, 1, 2, 3], doc
        assert [n["group_rank"] for n in doc["nodes"]] == [0, 1], doc["nodes"]
        frames = {pathlib.Path(f["file"]).name for g in doc["groups"] for f in g["frames"]}
        assert "preempt_worker.py" in frames, frames
        text = muster_cli(etcd, "stacks", "drain")
        assert text.returncode == 0 and "4 ranks on 2 nodes" in text.stdout, text

        r = muster_cli(etcd, "drain", "drain", "--node", "nope")
        assert r.returncode == 1 and "has no live node nope" in r.stderr, r.stderr
        r = muster_cli(etcd, "drain", "no-such-job", "--node", "nope")
        assert r.returncode == 1 and "no such job" in r.stderr, r.stderr
        b = max(keys.items(), key=lambda kv: kv[1])[0]
        r = muster_cli(etcd, "drain", "drain", "--node", b, "--reason", "maintenance")
        assert r.returncode == 0, r.stderr
        assert f"node {b}" in r.stdout and "maintenance" in r.stdout, r.stdout
    except BaseException:
        for p in procs:
            p.kill()
        raise
    for rc, _, err in finish(procs):
        assert rc == 143, err[-3000:]
        assert "is being preempted (maintenance)" in err, err[-3000:]
    saved = saved_steps(ckpt)
    assert len(saved) == 4 and len(set(saved.values())) == 1, saved
    assert not [k for k in etcd.keys("/muster/drain/") if "/requests/" in k or "/answers/" in k]


def test_drain_and_stacks_through_etcd_bad_input_exit_2(etcd):
    r = muster_cli(etcd, "drain", "x")
    assert r.returncode == 2 and "--node/--host" in r.stderr, r.stderr
    r = subprocess.run([str(MUSTER), "drain", "--rdzv-backend", "etcd", "--rdzv-endpoint",
                        etcd.endpoints, "--node", "n"], capture_output=True, text=True,
                       timeout=30)
    assert r.returncode == 2 and "--rdzv-id" in r.stderr, r.stderr
    r = muster_cli(etcd, "stacks", "x", "--rdzv-conf", "nonsense=1")
    assert r.returncode == 2 and "etcd_prefix" in r.stderr, r.stderr
    r = subprocess.run([str(MUSTER), "stacks", "--rdzv-backend", "zookeeper", "--rdzv-endpoint",
                        etcd.endpoints, "--rdzv-id", "x"], capture_output=True, text=True,
                       timeout=30)
    assert r.returncode == 2 and "--rdzv-backend" in r.stderr, r.stderr
