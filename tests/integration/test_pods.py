"""Issue 4 on simulated pods (network namespaces on a bridge, see pods.py): agents find the
rendezvous by hostname, each agent is PID 1 of its pod, links are cut to partition a node."""
import datetime
import json
import re
import signal
import time

from conftest import FAKE, MUSTER, REPO, muster_env, pid_alive, wait_for
from pods import (Pods, agent_pid, outer_pid, pid_namespace, pids_in_pid_namespace, read_text,
                  signal_agent)

SCRIPT = REPO / "tests" / "integration" / "scripts" / "multinode_check.py"
ENDPOINT = "pod0:29400"


def agent_args(nnodes, nproc, *rest, conf=None):
    return [str(MUSTER), "run", "--nnodes", str(nnodes), "--nproc-per-node", str(nproc),
            "--rdzv-endpoint", ENDPOINT, "--rdzv-id", "pods",
            *(["--rdzv-conf", conf] if conf else []), *map(str, rest)]


def rank_rows(path):
    keys = ["rank", "local_rank", "group_rank", "world", "group_world", "restart", "master", "pid"]
    try:
        return [dict(zip(keys, line.split())) for line in path.read_text().splitlines()]
    except FileNotFoundError:
        return []


def wait_exit(proc, timeout, what):
    """Waits (bounded) for a pod process; returns (rc, stderr text)."""
    try:
        proc.wait(timeout)
    except Exception:
        raise AssertionError(f"{what} still running after {timeout}s; stderr:\n"
                             f"{read_text(proc.err_path)[-3000:]}") from None
    return proc.returncode, read_text(proc.err_path)


def exit_times(procs, timeout, since):
    """Waits (bounded) for every proc; returns {proc: seconds from `since` to its exit}."""
    took = {}
    deadline = time.monotonic() + timeout
    while len(took) < len(procs):
        for p in procs:
            if p not in took and p.poll() is not None:
                took[p] = time.time() - since
        if time.monotonic() > deadline:
            late = [p.pod.name for p in procs if p not in took]
            raise AssertionError(f"agents on {late} still running after {timeout}s; stderr:\n" +
                                 "\n".join(read_text(p.err_path)[-2000:] for p in procs
                                           if p not in took))
        time.sleep(0.02)
    return took


def last_line(text):
    lines = text.strip().splitlines()
    return lines[-1] if lines else ""


_STAMP = re.compile(r"^\[muster (\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d{3}) ")


def log_time(line):
    """Wall-clock time (epoch seconds) of an agent log line."""
    m = _STAMP.match(line)
    assert m, line
    return datetime.datetime.strptime(m.group(1), "%Y-%m-%d %H:%M:%S.%f").timestamp()


# -- a. three pods, real torch, hostnames --------------------------------------------------

def test_three_pods_real_torch_by_hostname(any_torch, tmp_path):
    out = tmp_path / "out.jsonl"
    with Pods(3, tmp_path) as pods:
        # No POD_IP, no --local-addr: each agent derives its address from the route to pod0.
        env = muster_env(PYTHON_EXEC=any_torch, OUT=out)
        # --node-rank pins pod0 to group rank 0, so its address must become MASTER_ADDR.
        procs = [pod.run(agent_args(3, 2, "--node-rank", pod.index, SCRIPT), env=env)
                 for pod in pods]
        for pod, p in zip(pods, procs):
            rc, err = wait_exit(p, 180, f"agent on {pod.name}")
            assert rc == 0, f"{pod.name}: {err[-3000:]}"
            assert "job succeeded: all 6 workers on 3 nodes exited 0" in last_line(err), err[-3000:]
        rows = [json.loads(line) for line in out.read_text().splitlines()]
        assert sorted(int(r["RANK"]) for r in rows) == list(range(6))
        for r in rows:
            assert r["WORLD_SIZE"] == "6" and r["GROUP_WORLD_SIZE"] == "3"
            assert r["LOCAL_WORLD_SIZE"] == "2" and r["sum"] == 21.0
            assert int(r["RANK"]) == 2 * int(r["GROUP_RANK"]) + int(r["LOCAL_RANK"])
        # Each node's two workers share one group rank; group ranks 0..2 each used once.
        by_group = {}
        for r in rows:
            by_group.setdefault(r["GROUP_RANK"], set()).add(r["LOCAL_RANK"])
        assert by_group == {"0": {"0", "1"}, "1": {"0", "1"}, "2": {"0", "1"}}
        # pod0 hosts the rendezvous and (as group rank 0) the store: MASTER_ADDR is its IP.
        assert {r["MASTER_ADDR"] for r in rows} == {pods[0].ip}, rows
        assert len({r["MASTER_PORT"] for r in rows}) == 1


# -- b. partition: a pod's link goes down --------------------------------------------------

HB = "heartbeat_interval=1s,heartbeat_misses=3,last_call_timeout=1s"


def test_partition_elastic_job_reforms_without_the_lost_pod(tmp_path):
    ranks = tmp_path / "ranks"
    with Pods(3, tmp_path) as pods:
        procs = [pod.run(agent_args("2:3", 1, "--no-python", FAKE, f"ranks={ranks}", "sleep=120",
                                    conf=HB)) for pod in pods]
        wait_for(lambda: sum(r["world"] == "3" for r in rank_rows(ranks)) == 3, 30,
                 what="a round of 3 pods")
        before = len(rank_rows(ranks))
        pods[2].link_down()
        t_down = time.time()
        wait_for(lambda: sum(r["world"] == "2" for r in rank_rows(ranks)[before:]) == 2, 20,
                 what="a round of 2 after pod2's link went down")
        reformed = time.time() - t_down
        new = rank_rows(ranks)[before:]
        assert {r["group_world"] for r in new} == {"2"} and sorted(r["rank"] for r in new) == \
            ["0", "1"], new
        assert {r["restart"] for r in rank_rows(ranks)} == {"0"}  # no restart consumed
        # The host noticed pod2 by missed heartbeats: ~3 s (3 misses x 1 s) after the cut.
        err0 = read_text(procs[0].err_path)
        lost = [l for l in err0.splitlines() if re.search(r"node pod2\b.*\blost\b", l)]
        assert lost, err0[-3000:]
        detected = log_time(lost[0]) - t_down
        print(f"\npartition: node loss detected {detected:.2f} s after link down "
              f"(heartbeat 1 s x 3 misses); job re-formed with 2 nodes after {reformed:.2f} s")
        assert detected < 3 + 1.5, lost[0]
        # The two others go on with the re-formed job.
        for p in procs[:2]:
            assert p.poll() is None, read_text(p.err_path)[-3000:]
        # pod2's agent cannot reach the server any more: it must give up with 138 (the
        # server's heartbeat timeout is 3 s; allow that plus reconnect slack).
        pod2 = exit_within(procs[2], PARTITIONED_EXIT_S, t_down)
        for p in procs[:2]:
            signal_agent(p, signal.SIGTERM)
        for p in procs[:2]:
            rc, err = wait_exit(p, 30, "agent after SIGTERM")
            assert rc in (143, 138), err[-3000:]
        assert_partitioned_exit(pod2)


# A cut-off agent hears nothing from the server; with heartbeats every 1 s and 3 misses
# allowed it should give up well within this.
PARTITIONED_EXIT_S = 15


def exit_within(proc, timeout, t_down):
    """(rc or None, seconds since t_down, stderr) once proc exits or `timeout` passes."""
    try:
        proc.wait(timeout)
    except Exception:
        pass
    return proc.poll(), time.time() - t_down, read_text(proc.err_path)


def assert_partitioned_exit(result):
    rc, took, err = result
    print(f"cut-off pod2's agent: exit {rc} after {took:.1f} s: {last_line(err)}")
    assert rc is not None, (
        f"the agent on the cut-off pod2 did not notice it lost the rendezvous server within "
        f"{PARTITIONED_EXIT_S} s of its link going down (still running its workers); "
        f"stderr:\n{err[-3000:]}")
    assert rc == 138, err[-3000:]


def test_partition_fixed_size_job_fails_with_138_naming_the_lost_pod(tmp_path):
    ranks = tmp_path / "ranks"
    with Pods(3, tmp_path) as pods:
        procs = [pod.run(agent_args(3, 1, "--no-python", FAKE, f"ranks={ranks}", "sleep=120",
                                    conf=HB)) for pod in pods]
        wait_for(lambda: len(rank_rows(ranks)) == 3, 30, what="3 workers")
        pods[2].link_down()
        t_down = time.time()
        took = exit_times(procs[:2], 25, t_down)
        for pod, p in zip(pods[:2], procs[:2]):
            err = read_text(p.err_path)
            last = last_line(err)
            print(f"\n{pod.name} exited {p.returncode} {took[p]:.2f} s after link down: {last}")
            assert p.returncode == 138, err[-3000:]
            assert "lost" in last and "pod2" in last, last
        assert_partitioned_exit(exit_within(procs[2], PARTITIONED_EXIT_S, t_down))


# -- c. the endpoint's name resolves late, or never -----------------------------------------

def test_late_dns_agents_wait_then_job_succeeds(tmp_path):
    ranks = tmp_path / "ranks"
    with Pods(3, tmp_path, withhold={1: ["pod0"], 2: ["pod0"]}) as pods:
        t0 = time.monotonic()
        procs = [pod.run(agent_args(3, 1, "--no-python", FAKE, f"ranks={ranks}", "sleep=0.5"))
                 for pod in pods]
        # pods 1 and 2 cannot resolve pod0 yet: they say so and keep trying.
        for p in procs[1:]:
            wait_for(lambda: re.search(r"waiting for rendezvous at pod0:29400 .*resolve",
                                       read_text(p.err_path)), 5, interval=0.1,
                     what="a 'waiting' line naming the endpoint")
        time.sleep(max(0.0, t0 + 5 - time.monotonic()))
        assert rank_rows(ranks) == []
        for pod in pods[1:]:
            pod.add_host("pod0", pods[0].ip)
        for pod, p in zip(pods, procs):
            rc, err = wait_exit(p, 30, f"agent on {pod.name}")
            assert rc == 0, f"{pod.name}: {err[-3000:]}"
        assert sorted(r["rank"] for r in rank_rows(ranks)) == ["0", "1", "2"]
        # The wait ends in the agent's own lookup of its address (the store binds it) or,
        # for an agent that needs none, in the rendezvous client.
        for p in procs[1:]:
            assert re.search(r"rendezvous at pod0:29400 (reached|resolved) after",
                             read_text(p.err_path))


def test_never_resolvable_endpoint_exits_138_naming_it(tmp_path):
    with Pods(2, tmp_path, withhold={1: ["pod0"]}) as pods:
        t0 = time.monotonic()
        p = pods[1].run(agent_args(2, 1, "--no-python", FAKE, conf="join_timeout=4s"))
        rc, err = wait_exit(p, 30, "agent that cannot resolve pod0")
        took = time.monotonic() - t0
        assert rc == 138, err[-3000:]
        assert "pod0:29400" in last_line(err) and "resolve" in last_line(err), err[-3000:]
        assert "waiting for rendezvous at pod0:29400" in err
        assert 3.5 < took < 15, took


# -- d. the agent is PID 1 of its pod: nothing is left after the job --------------------------

def test_pid1_agent_leaves_nothing_in_the_pod(tmp_path):
    ranks, children, daemons = tmp_path / "ranks", tmp_path / "children", tmp_path / "daemons"
    with Pods(2, tmp_path) as pods:
        procs = [pod.run(agent_args(2, 2, "--no-python", FAKE, f"ranks={ranks}",
                                    f"child={children}", f"daemon={daemons}", "sleep=1.5"))
                 for pod in pods]
        wait_for(lambda: len(rank_rows(ranks)) == 4 and len(read_text(daemons).split()) == 4,
                 20, what="4 workers with a child and a daemon each")
        namespaces = {}
        for pod, p in zip(pods, procs):
            agent = agent_pid(p)
            ns = pid_namespace(agent)
            assert ns and ns != pid_namespace(1), "the agent is not in a PID namespace of its own"
            with open(f"/proc/{agent}/status") as f:
                nspid = [l for l in f if l.startswith("NSpid:")][0].split()
            assert nspid[-1] == "1", f"agent on {pod.name} is not PID 1 of its pod: {nspid}"
            namespaces[pod.name] = ns
        assert len(set(namespaces.values())) == 2
        # Outer pids of every worker, worker child and daemon (the files hold inner pids; the
        # namespaces overlap in inner pids, so map each within every pod namespace).
        inner = [int(r["pid"]) for r in rank_rows(ranks)] + \
            [int(x) for x in read_text(children).split() + read_text(daemons).split()]
        outer = {outer_pid(i, ns) for i in inner for ns in namespaces.values()} - {None}
        assert len(outer) >= len(inner), (inner, outer)
        assert sum(map(pid_alive, outer)) >= 8, "children and daemons should be running now"
        for pod, p in zip(pods, procs):
            rc, err = wait_exit(p, 30, f"agent on {pod.name}")
            assert rc == 0, err[-3000:]
        for name, ns in namespaces.items():
            assert pids_in_pid_namespace(ns) == [], f"{name}: processes left in the pod"
        for pid in outer:
            assert not pid_alive(pid), f"{pid} outlived its pod's agent"
