"""The etcd rendezvous backend (--rdzv-backend etcd) against a real 3-member etcd cluster
(Debian's etcd-server) with real torch workers: no agent serves the rendezvous, and killing
the agent that coordinates is a lost node like any other."""
import datetime
import json
import os
import pathlib
import signal
import socket
import subprocess
import time
import zlib

import pytest

from conftest import MUSTER, REPO, fake, muster_env, pid_alive, run_muster, wait_for
from etcd_cluster import ETCD, EtcdCluster
from pods import Pods, read_text

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
                 script=CHECK, **env_extra):
    env = muster_env(OUT=out, **({"HOLD_WORLD": hold_world} if hold_world else {}), **env_extra)
    procs = []
    for _ in range(n):
        procs.append(subprocess.Popen(
            [str(MUSTER), "run", "--rdzv-backend", "etcd", "--rdzv-endpoint", etcd.endpoints,
             "--rdzv-id", run_id, "--rdzv-conf", conf, "--nnodes", nnodes,
             "--nproc-per-node", "2", "--max-restarts", "0", *flags, str(script)],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env))
    return procs


def lines(path):
    try:
        with open(path) as f:
            return [json.loads(line) for line in f if line.strip()]
    except FileNotFoundError:
        return []


def finish(procs, timeout=60, tags=None):
    """(exit code, stdout, stderr) of each agent, waiting up to `timeout` for each. One that
    does not exit in time fails the test with every agent's stderr tail (`tags` name them),
    after killing those still running: a hang is read from all sides, not one."""
    results = []
    for i, p in enumerate(procs):
        try:
            out, err = p.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            for q in procs[i:]:
                q.kill()
            results += [(None, *q.communicate(timeout=30)) for q in procs[i:]]
            name = tags[i] if tags else i
            raise AssertionError(f"agent {name} did not exit within {timeout} s\n" +
                                 stderr_tails(results, tags)) from None
        results.append((p.returncode, out, err))
    return results


def stderr_tails(results, tags=None, chars=3000):
    """Each agent's exit code and the last `chars` of its stderr, one after another."""
    return "\n".join(f"--- agent {tags[i] if tags else i}: exit {code}\n{err[-chars:]}"
                     for i, (code, _, err) in enumerate(results))


def test_three_agents_all_reduce_through_etcd(etcd, tmp_path, any_torch):
    # torch 1.13 and 2.x workers; each parametrization a job of its own.
    out, run_id = tmp_path / "out.jsonl", f"allreduce-{zlib.crc32(any_torch.encode())}"
    results = finish(start_agents(etcd, run_id, 3, "3", out, PYTHON_EXEC=any_torch))
    for code, _, err in results:
        assert code == 0, err[-3000:]
    rows = lines(out)
    assert len(rows) == 6
    assert sorted(int(r["RANK"]) for r in rows) == list(range(6))
    assert {r["WORLD_SIZE"] for r in rows} == {"6"}
    assert {r["sum"] for r in rows} == {21.0}  # 1 + 2 + ... + 6
    assert len({(r["MASTER_ADDR"], r["MASTER_PORT"]) for r in rows}) == 1
    # Every agent's keys went with its lease when it exited; the job's state expires too.
    wait_for(lambda: not [k for k in etcd.keys(f"/muster/{run_id}/") if "/nodes/" in k],
             timeout=10, interval=0.2, what="the agents' node keys to go")


def start_one(etcd, run_id, nnodes, out, conf=FAST, flags=(), **env_extra):
    return start_agents(etcd, run_id, 1, nnodes, out, conf=conf, flags=flags, **env_extra)[0]


def node_keys(etcd, run_id):
    """{node id: create revision} of the job's node keys."""
    prefix = f"/muster/{run_id}/nodes/"
    return {k[len(prefix):]: rev for k, rev in etcd.keys(prefix).items()}


def test_coordinator_killed_survivors_continue_then_a_replacement_grows_the_job(etcd, tmp_path):
    out, release = tmp_path / "out.jsonl", tmp_path / "release"
    # Last call 2 s: the survivors' round waits for a third node that long.
    conf = FAST.replace("last_call_timeout=1s", "last_call_timeout=2s")
    common = dict(HOLD_WORLD="6,4", RELEASE=release, conf=conf)
    # One at a time, so that the keys' age (the coordinator order) and round 1's group
    # ranks are A, B, C. B (the next coordinator) stops its workers 1.5 s late, so C is
    # ready for B first: B must still come before C (the previous round's order).
    procs = {}
    for tag, extra in [("A", {}), ("B", {"SLOW_STOP": "1.5"}), ("C", {})]:
        procs[tag] = start_one(etcd, "coordkill", "2:3", out, TAG=tag, **common, **extra)
        wait_for(lambda: len(node_keys(etcd, "coordkill")) == len(procs), timeout=20,
                 interval=0.05, what=f"agent {tag}'s node key")
    wait_for(lambda: len(lines(out)) == 6, timeout=60, interval=0.1, what="round 1's workers")
    first = lines(out)
    assert {r["tag"]: r["GROUP_RANK"] for r in first} == {"A": "0", "B": "1", "C": "2"}, first
    keys = node_keys(etcd, "coordkill")
    oldest = min(keys, key=keys.get)
    assert int(oldest.split(":")[-2]) == procs["A"].pid  # host:pid:random
    procs["A"].send_signal(signal.SIGKILL)
    procs["A"].wait()
    wait_for(lambda: len(lines(out)) == 6 + 4, timeout=30, interval=0.1,
             what="the survivors' round")
    second = lines(out)[6:]
    assert {r["WORLD_SIZE"] for r in second} == {"4"}, second
    assert sorted(int(r["RANK"]) for r in second) == [0, 1, 2, 3]
    assert {r["sum"] for r in second} == {10.0}
    # Stable ranks across the coordinator change: B before C, as in round 1.
    assert {r["tag"]: r["GROUP_RANK"] for r in second} == {"B": "0", "C": "1"}, second
    # `muster status` reads the job from etcd: the new coordinator's round, its workers.
    status = lambda: etcd_status(etcd, "coordkill")  # noqa: E731
    wait_for(lambda: sorted(w["pid"] for w in status()["workers"]) ==
             sorted(r["pid"] for r in second), timeout=10, interval=0.2,
             what="the status to list round 2's workers")
    j = status()
    assert j["phase"] == "Running" and j["restarts_used"] == 0, j
    assert [n["state"] for n in j["nodes"]] == ["Running", "Running"], j
    assert any("node lost: the coordinator" in h["reason"] for h in j["history"]), j
    table = subprocess.run([str(MUSTER), "status", "--rdzv-backend", "etcd", "--rdzv-endpoint",
                            etcd.endpoints, "--rdzv-id", "coordkill"], capture_output=True,
                           text=True, timeout=30)
    assert table.returncode == 0 and "job coordkill: Running" in table.stdout, table
    # A replacement joins: the job grows back to 3 nodes, the newcomer last.
    procs["D"] = start_one(etcd, "coordkill", "2:3", out, TAG="D", **common)
    wait_for(lambda: len(lines(out)) == 10 + 6, timeout=30, interval=0.1,
             what="the grown round")
    third = lines(out)[10:]
    assert {r["WORLD_SIZE"] for r in third} == {"6"} and {r["sum"] for r in third} == {21.0}
    assert {r["tag"]: r["GROUP_RANK"] for r in third} == {"B": "0", "C": "1", "D": "2"}, third
    release.touch()
    tags = ["B", "C", "D"]
    ended = finish([procs[tag] for tag in tags], timeout=60, tags=tags)
    results = dict(zip(tags, ended))
    for tag, (code, _, err) in results.items():
        # Not 138: the coordinator's death is a lost node, not a lost rendezvous. Every
        # agent's log on a failure: the others' tell when and why one did not finish.
        assert code == 0, f"agent {tag} exited {code}\n" + stderr_tails(ended, tags)
    # --max-restarts 0 and still three rounds: membership changes used no budget, and
    # every node saw the same restart count.
    assert {r["TORCHELASTIC_RESTART_COUNT"] for r in lines(out)} == {"0"}
    # Each survivor stopped its round because the coordinator was gone, not for a failure.
    for tag in ("B", "C"):
        err = results[tag][2]
        assert "node lost: the coordinator" in err and "takes over" in err, err[-3000:]


def etcd_status(etcd, run_id, *extra, netns=None):
    """`muster status --json` of the job; `netns`: from that pod's namespace (an etcd in a
    pod is reached over the pods' bridge)."""
    wrap = ["ip", "netns", "exec", netns] if netns else []
    r = subprocess.run([*wrap, str(MUSTER), "status", "--rdzv-backend", "etcd",
                        "--rdzv-endpoint", etcd.endpoints, "--rdzv-id", run_id, "--json", *extra],
                       capture_output=True, text=True, timeout=30)
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)


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


# Serial: with a 4 s lease, an agent has about 3 s to move its keep-alive to another member
# after the leader it talks to is killed; in CI's parallel stage (load 10+) one agent took
# longer once and exited 138 (lease lost). The assertion stays; the timing needs an idle CPU.
@pytest.mark.serial
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


def test_etcd_stopped_for_2s_is_ridden_out_with_the_same_workers(tmp_path):
    etcd = EtcdCluster(3)
    try:
        out, release = tmp_path / "out.jsonl", tmp_path / "release"
        # Lease 5 s x 3 (the numbers); every member killed for 2 s, then started
        # again on its data (a new leader election on top: about 1 s more).
        conf = "heartbeat_interval=5s,heartbeat_misses=3,last_call_timeout=1s,join_timeout=60s"
        procs = start_agents(etcd, "blip", 2, "2", out, hold_world="4", conf=conf,
                             RELEASE=release)
        wait_for(lambda: len(lines(out)) == 4, timeout=60, interval=0.1, what="the workers")
        etcd.kill_all()
        time.sleep(2)
        etcd.restart_all()
        assert all(p.poll() is None for p in procs), [p.poll() for p in procs]
        # The workers end now: their success must reach the coordinator through the
        # restarted etcd (watch resumed, reports written), and the outcome every agent.
        release.touch()
        results = finish(procs, timeout=60)
        for code, _, err in results:
            assert code == 0, err[-3000:]
        rows = lines(out)
        # One round: the same workers (pids) ran the job to its end.
        assert len(rows) == 4 and len({r["pid"] for r in rows}) == 4, rows
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


def test_etcd_v2_is_an_alias_and_bad_conf_values_are_refused(etcd, tmp_path):
    r = run_muster(["--rdzv-backend", "etcd-v2", "--rdzv-endpoint", etcd.endpoints,
                    "--nnodes", "2", "--dry-run", str(CHECK)])
    assert r.returncode == 0, r.stderr
    assert "etcd-v2 uses etcd's v3 API" in r.stderr
    # (TLS and user keys: test_etcd_security.py)
    for conf, needle in [("protocol=ftp", "protocol: 'ftp' must be http or https"),
                         ("etcd_prefix=x", "etcd_prefix: 'x' must start with /")]:
        r = run_muster(["--rdzv-backend", "etcd", "--rdzv-endpoint", etcd.endpoints,
                        "--rdzv-conf", conf, "--nnodes", "2", "--dry-run", str(CHECK)])
        assert r.returncode == 2 and needle in r.stderr, (conf, r.stderr)
    # A key nothing reads is named once and ignored, torchrun's rule (issue 28).
    r = run_muster(["--rdzv-backend", "etcd", "--rdzv-endpoint", etcd.endpoints,
                    "--rdzv-conf", "secret=x", "--nnodes", "2", "--dry-run", str(CHECK)])
    assert r.returncode == 0 and "ignoring key 'secret'" in r.stderr, r.stderr
    # `muster status` through etcd: the job is required; an unknown one is exit 1.
    r = subprocess.run([str(MUSTER), "status", "--rdzv-backend", "etcd", "--rdzv-endpoint",
                        etcd.endpoints], capture_output=True, text=True, timeout=30)
    assert r.returncode == 2 and "--rdzv-id: missing" in r.stderr, r.stderr
    r = subprocess.run([str(MUSTER), "status", "--rdzv-backend", "etcd", "--rdzv-endpoint",
                        etcd.endpoints, "--rdzv-id", "nosuchjob"], capture_output=True,
                       text=True, timeout=30)
    assert r.returncode == 1 and "no such job" in r.stderr, r.stderr
    r = run_muster(["--rdzv-endpoint", "h1:1,h2:2", "--nnodes", "2", "--dry-run", str(CHECK)])
    assert r.returncode == 2 and "several endpoints are for --rdzv-backend etcd" in r.stderr


def pod_agent(pod, etcd, run_id, nnodes, out, conf=FAST, flags=(), script=CHECK, **env):
    """An agent in `pod` (PID 1 of its own PID namespace), its stderr in proc.err_path."""
    return pod.run([MUSTER, "run", "--rdzv-backend", "etcd", "--rdzv-endpoint", etcd.endpoints,
                    "--rdzv-id", run_id, "--rdzv-conf", conf, "--nnodes", nnodes,
                    "--nproc-per-node", "2", "--max-restarts", "0", *flags, script],
                   env=muster_env(OUT=out, TAG=pod.name, **env))


def test_agents_without_local_addr_advertise_their_route_to_etcd(tmp_path):
    # No --local-addr, no POD_IP: each agent's address is the local end of its route to
    # the first etcd member (as with muster's own rendezvous), which the others reach.
    with Pods(3, tmp_path) as pods:
        etcd = EtcdCluster(1, host=pods[0].ip, netns=pods[0].ns)
        try:
            out = tmp_path / "out.jsonl"
            procs = [pod_agent(pods[i], etcd, "routed", "2", out) for i in (1, 2)]
            for p in procs:
                assert p.wait(60) == 0, read_text(p.err_path)[-3000:]
            rows = lines(out)
            assert len(rows) == 4 and {r["sum"] for r in rows} == {10.0}, rows
            group0 = next(r["tag"] for r in rows if r["GROUP_RANK"] == "0")
            assert {r["MASTER_ADDR"] for r in rows} == {pods[int(group0[3:])].ip}, rows
        finally:
            etcd.stop()


def overlaps(intervals):
    """Pairs of worker intervals of different rounds (stores) that share a rank and ran at
    the same time: a split brain."""
    bad = []
    for i, a in enumerate(intervals):
        for b in intervals[i + 1:]:
            if a["rank"] == b["rank"] and a["master"] != b["master"] and \
                    a["start"] < b["end"] and b["start"] < a["end"]:
                bad.append((a, b))
    return bad


def fence_kills(events_path, master):
    """The workers the agent SIGKILLed at its lease's end, as intervals, from its event log
    (they die before they can write their own): each ends when the fence_kill record says
    SIGKILL was sent (no code of theirs runs after it; the agent reaped them up to 70 ms
    later on a loaded machine). Also the fence_kill records."""
    rows = [json.loads(line) for line in read_text(events_path).splitlines() if line.strip()]
    fence = [r for r in rows if r["event"] == "fence_kill"]
    at = [datetime.datetime.fromisoformat(r["time"].replace("Z", "+00:00")).timestamp()
          for r in fence]
    kills = [r for r in rows if r["event"] == "worker_exited" and r["signal"] == 9]
    return [{"rank": r["rank"], "master": master, "start": 0.0, "killed": True,
             "end": min(at, default=float("inf"))} for r in kills], fence


# Serial: the fence SIGKILLs the cut-off node's workers at the earliest moment etcd may drop
# its key (docs/operations/liveness-and-partitions.md "etcd backend: the lease and the fence");
# on a machine at load 15 (the parallel stage) the agent's timers and the reaping ran late,
# and the overlap check failed once. The assertion stays strict; the timing it measures needs
# an idle CPU.
@pytest.mark.serial
def test_partitioned_agent_is_dropped_then_rejoins_without_split_brain(tmp_path):
    """The node cut off has workers that take 5 s to stop on SIGTERM (a checkpoint): they
    are SIGKILLed at the lease's end, whatever --shutdown-timeout (30 s) says, and never
    overlap the survivors' round on their ranks."""
    # Last call 100 ms: the survivors' round forms as soon as they can, so that an agent cut
    # off that stopped its workers late would overlap with it.
    conf = FAST.replace("last_call_timeout=1s", "last_call_timeout=100ms")
    with Pods(4, tmp_path) as pods:
        etcd = EtcdCluster(1, host=pods[0].ip, netns=pods[0].ns)
        try:
            out, release, spans = tmp_path / "out.jsonl", tmp_path / "release", tmp_path / "spans"
            # The round of three's group rank 0 (the node cut off below) stops slowly.
            env = dict(HOLD_WORLD="6,4", RELEASE=release, INTERVALS=spans, SLOW_STOP="5",
                       SLOW_STOP_IF="WORLD_SIZE=6 GROUP_RANK=0")

            def rows_of(world, since):
                rows = [r for r in lines(out)[since:] if r["WORLD_SIZE"] == world]
                masters = {(r["MASTER_ADDR"], r["MASTER_PORT"]) for r in rows}
                return rows if len(masters) == 1 else []  # one round's

            events = {i: tmp_path / f"events{i}.jsonl" for i in (1, 2, 3)}
            agents = {i: pod_agent(pods[i], etcd, "split", "2:3", out, conf=conf,
                                   flags=("--event-log", events[i]), POD_IP=pods[i].ip, **env)
                      for i in (1, 2, 3)}
            # (With this short last call, round 1 may form with two nodes and re-form with
            # the third: wait for the round of three.)
            wait_for(lambda: len(lines(out)) >= 6 and
                     [r["WORLD_SIZE"] for r in lines(out)[-6:]] == ["6"] * 6, timeout=60,
                     interval=0.1, what="the workers of a round of three nodes")
            first = lines(out)[-6:]
            # Cut off the node that is group rank 0 (its ranks 0 and 1 come back in the
            # survivors' round, and it serves the round's store).
            victim = int(next(r["tag"] for r in first if r["GROUP_RANK"] == "0")[3:])
            cut = len(lines(out))
            pods[victim].link_down()
            # Dropped after its lease (TTL 2 s): it kills its workers and exits 138 ...
            assert agents[victim].wait(20) == 138, read_text(agents[victim].err_path)[-3000:]
            err = read_text(agents[victim].err_path)
            assert "etcd lease lost" in err
            # ... and the others go on without it.
            wait_for(lambda: len(rows_of("4", cut)) == 4, timeout=30, interval=0.1,
                     what="the survivors' round")
            assert len(lines(out)) == cut + 4, lines(out)[cut:]
            # The link returns: the node rejoins as a new node and the job grows back.
            pods[victim].link_up()
            again = pod_agent(pods[victim], etcd, "split", "2:3", out, conf=conf,
                              POD_IP=pods[victim].ip, **env)
            wait_for(lambda: len(rows_of("6", cut + 4)) == 6, timeout=30, interval=0.1,
                     what="the grown round")
            release.touch()
            for p in [*(p for i, p in agents.items() if i != victim), again]:
                assert p.wait(60) == 0, read_text(p.err_path)[-3000:]
            # Every worker told when it ran (the node cut off: its agent, when it killed
            # them); no two rounds ran at once on the same rank.
            master = f"{first[0]['MASTER_ADDR']}:{first[0]['MASTER_PORT']}"
            killed, fence = fence_kills(events[victim], master)
            intervals = lines(spans) + killed
            assert len(intervals) == len(lines(out)), (intervals, lines(out))
            assert not overlaps(intervals), overlaps(intervals)
            assert len(killed) == 2 and len(fence) == 1, (killed, fence)
            assert "at the lease's end: the survivors may start without this node" in err, err
            survivors = min(i["start"] for i in intervals if i.get("world") == "4")
            print(f"slack: the survivors' round of 4 started {survivors - max(k['end'] for k in killed):.3f} s after the fence's SIGKILL")
            # The node cut off stopped its workers before etcd dropped its key and the
            # others acted on that (stopping theirs).
            ends = {}
            for i in intervals:
                if i["master"] == master:
                    ends.setdefault(i.get("killed", False), []).append(i["end"])
            assert max(ends[True]) < min(ends[False]), intervals
        finally:
            etcd.stop()


def test_stacks_of_an_etcd_job_node_by_node(etcd, tmp_path):
    """Issue 17: an etcd endpoint without --rdzv-backend etcd serves no muster rendezvous:
    the endpoint form says to name the backend (exit 2); without --rdzv-endpoint each
    node's agents answer for their ranks (test_etcd_jobwide.py asks the whole job)."""
    out, release = tmp_path / "out.jsonl", tmp_path / "release"
    procs = start_agents(etcd, "stacks", 1, "1", out, hold_world="2", RELEASE=release)
    try:
        wait_for(lambda: len(lines(out)) == 2, 60, 0.05, "2 ranks holding")
        r = subprocess.run([str(MUSTER), "stacks", "--rdzv-endpoint", etcd.endpoints.split(",")[0],
                            "--rdzv-id", "stacks"], capture_output=True, text=True, timeout=30,
                           env=muster_env())
        assert r.returncode == 2, (r.returncode, r.stderr)
        assert "give --rdzv-backend etcd and etcd's members" in r.stderr, r.stderr
        r = subprocess.run([str(MUSTER), "stacks", "--rdzv-id", "stacks", "--json"],
                           capture_output=True, text=True, timeout=30, env=muster_env())
        assert r.returncode == 0, r.stderr
        doc = json.loads(r.stdout)
        assert doc["groups"][0]["ranks"] == [0, 1]
        assert "etcd_check.py" in {pathlib.Path(f["file"]).name for f in doc["groups"][0]["frames"]}
    finally:
        release.touch()
    for code, _, err in finish(procs):
        assert code == 0, err[-3000:]


def test_flight_recorder_dumps_are_listed_where_they_stay(etcd, tmp_path, torch2_python):
    """docs/guides/collective-traces.md: etcd carries no dump data; every agent's last line lists
    each node's files as HOST:PATH (real torch 2.x gloo dumps, rank 3 fails)."""
    worker = REPO / "tests" / "integration" / "scripts" / "fr_dump_worker.py"
    env = muster_env(PYTHON_EXEC=torch2_python, FAIL_RANK="3")
    procs = [subprocess.Popen(
        [str(MUSTER), "run", "--rdzv-backend", "etcd", "--rdzv-endpoint", etcd.endpoints,
         "--rdzv-id", "frdump", "--rdzv-conf", FAST, "--nnodes", "2", "--nproc-per-node", "2",
         "--log-dir", str(tmp_path / f"logs{i}"), str(worker)],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env) for i in range(2)]
    for code, _, err in finish(procs):
        assert code == 1, err[-3000:]
        last = err.strip().splitlines()[-1]
        assert "flight recorder traces of 2 nodes (4 files) left on their nodes: " in last, last
        listed = last.split("left on their nodes: ", 1)[1].split(", ")
        assert sorted(p.rsplit("/", 1)[1] for p in listed) == \
            [f"flight_recorder_rank_{r}" for r in range(4)], listed
        for p in listed:
            host, path = p.split(":", 1)
            assert host == socket.gethostname() and os.path.exists(path), p


def test_keys_no_agent_put_are_passed_over_and_named_once(etcd, tmp_path):
    """Issue 31 item 5: a key without a lease under PREFIX/RUN_ID/nodes/ (the oldest, so
    the coordinator by age) and a coordinator key naming no node were taken as the
    coordinator, and every agent waited past join_timeout with no error. The backend checks
    what it reads: the job forms, and each such key is named once in the log."""
    run_id = f"garbage-{os.getpid()}-{time.monotonic_ns()}"
    junk = f"/muster/{run_id}/nodes/0-junk"
    for key, value in ((junk, "junk"), (f"/muster/{run_id}/coordinator", "ghost")):
        r = etcd.ctl("put", key, value)
        assert r.returncode == 0, r.stderr
    conf = FAST.replace("join_timeout=60s", "join_timeout=20s")
    started = time.monotonic()
    procs = [subprocess.Popen(
        [str(MUSTER), "run", "--rdzv-backend", "etcd", "--rdzv-endpoint", etcd.endpoints,
         "--rdzv-id", run_id, "--rdzv-conf", conf, "--nnodes", "2", "--nproc-per-node", "1",
         "--max-restarts", "0", *fake("exit=0")],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=muster_env())
        for _ in range(2)]
    results = finish(procs, timeout=40)
    took = time.monotonic() - started
    for code, _, err in results:
        assert code == 0, err[-3000:]
    assert took < 15, f"the job took {took:.1f}s to form and finish"
    # Named once by an agent that read it (the second may find the coordinator named by
    # then and read neither).
    errs = [err for _, _, err in results]
    assert all(err.count(f"ignoring the key {junk} ") <= 1 for err in errs), errs
    assert any(f"ignoring the key {junk} (create revision" in err and "it has no lease" in err
               and f"etcdctl del {junk}" in err for err in errs), errs
    assert any(f"ignoring the key /muster/{run_id}/coordinator " in err for err in errs), errs
    etcd.ctl("del", "--prefix", f"/muster/{run_id}/")
