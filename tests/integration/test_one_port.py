"""Issue 14 item 2: one port per job. The rendezvous and the c10d store share the port
the job names (torchrun's static form --master-addr/--master-port, or --rdzv-endpoint):
workers see MASTER_PORT = that port in every round, each round still gets fresh store
state, and the serving agent listens on nothing else, so a firewall needs one rule."""
import json
import subprocess

from conftest import MUSTER, REPO, muster_env, needs_torch
from multinode import free_port
from pods import Pods, read_text

ONE_PORT = REPO / "tests" / "integration" / "scripts" / "one_port_check.py"
STORE_CHECK = REPO / "tests" / "integration" / "scripts" / "store_check.py"


def _rows(path):
    return [json.loads(line) for line in path.read_text().splitlines()]


def _wait_pods(procs, timeout=180):
    for p in procs:
        try:
            p.wait(timeout)
        except subprocess.TimeoutExpired:
            raise AssertionError(f"agent on {p.pod.name} still running after {timeout}s:\n"
                                 f"{read_text(p.err_path)[-3000:]}") from None
        assert p.returncode == 0, f"{p.pod.name}: {read_text(p.err_path)[-3000:]}"


@needs_torch
def test_static_form_with_torchrun_flags_on_two_pods(tmp_path):
    """(a) `--nnodes=2 --node_rank=R --master_addr=A --master_port=P` on two pods forms the
    job (node rank 0 serves); every worker sees MASTER_ADDR=A, MASTER_PORT=P; gloo works."""
    out, port = tmp_path / "out.jsonl", 29517
    with Pods(2, tmp_path) as pods:
        master = pods[0].ip
        env = muster_env(OUT=out)
        procs = [pod.run([MUSTER, "run", "--nnodes=2", f"--node_rank={pod.index}",
                          f"--master_addr={master}", f"--master_port={port}",
                          "--nproc_per_node=2", ONE_PORT], env=env)
                 for pod in reversed(list(pods))]  # the joiner first: it waits for rank 0
        _wait_pods(procs)
    rows = _rows(out)
    assert sorted(r["rank"] for r in rows) == [0, 1, 2, 3], rows
    for r in rows:
        assert (r["master_addr"], r["master_port"]) == (master, port), r
        assert r["sum"] == 4.0 and r["world"] == 4, r
    # Node rank 0's agent serves the rendezvous and the store, on P alone.
    assert {tuple(r["agent_listens"]) for r in rows if r["group_rank"] == 0} == {(port,)}, rows


def test_pods_serving_agent_listens_on_the_endpoint_port_alone(tmp_path):
    """(c) With --rdzv-endpoint pod0:P the serving agent's only listening socket is P (the
    rendezvous and the store), so a firewall that lets in P alone passes the job; the other
    node's workers reach the store there. (iptables/nft are not on the test machines: the
    proof is the agent's listening sockets, read in its own network namespace.)"""
    out, port = tmp_path / "out.jsonl", 29518
    with Pods(2, tmp_path) as pods:
        env = muster_env(OUT=out)
        procs = [pod.run([MUSTER, "run", "--nnodes", "2", "--nproc-per-node", "1",
                          "--rdzv-endpoint", f"{pods[0].ip}:{port}", "--rdzv-id", "fw",
                          ONE_PORT], env=env) for pod in pods]
        _wait_pods(procs)
    rows = _rows(out)
    assert len(rows) == 2, rows
    assert {r["master_port"] for r in rows} == {port}, rows
    served = [r for r in rows if r["group_rank"] == 0]
    assert served and served[0]["master_addr"] == pods[0].ip, rows
    assert served[0]["agent_listens"] == [port], rows


def test_endpoint_port_is_master_port_in_every_round_with_fresh_keys(any_torch, tmp_path):
    """(b) --rdzv-endpoint 127.0.0.1:P, two agents, one restart (a worker exits 143 once):
    MASTER_PORT == P in both rounds, the serving agent owns P, and a key set in round 0 is
    invisible in round 1. Torch 1.13 (legacy store protocol, an idle callback socket) and
    2.x (VALIDATE first)."""
    out, port = tmp_path / "out.jsonl", free_port()
    env = muster_env(PYTHON_EXEC=any_torch, OUT=out)
    agents = [subprocess.Popen([str(MUSTER), "run", "--rdzv-endpoint", f"127.0.0.1:{port}",
                                "--rdzv-id", "oneport", "--nnodes", "2", "--nproc-per-node", "2",
                                "--max-restarts", "1", str(STORE_CHECK)],
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
              for _ in range(2)]
    results = [a.communicate(timeout=240) for a in agents]
    for a, (_, err) in zip(agents, results):
        assert a.returncode == 0, err[-3000:]
    rows = _rows(out)
    assert sorted((r["attempt"], r["rank"]) for r in rows) == [(a, r) for a in (0, 1)
                                                              for r in range(4)], rows
    assert {(r["attempt"], r["port"]) for r in rows} == {(0, port), (1, port)}, rows
    assert {r["owner"] for r in rows} <= {a.pid for a in agents}, rows
    assert len({r["owner"] for r in rows}) == 1, rows  # one agent serves P in both rounds
    assert all(r["leaked"] is False for r in rows if r["attempt"] == 1), rows
    assert all(r["sum"] == 4.0 for r in rows), rows
