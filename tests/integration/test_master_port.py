"""Issue 14 (items 2, 8, part): --master-port on one node is the store's port on every
attempt, as torchrun's MASTER_PORT; a port in use is a set-up failure naming the flag; with
several nodes, where the agent store's port is not fixed, the flag is named as unused."""
import socket

from conftest import REPO, fake, muster_env, needs_torch, run_muster
from multinode import Agents, free_port

ALLREDUCE = REPO / "examples" / "allreduce.py"


def _ports_seen(ranks):
    """{(attempt, MASTER_PORT)} from fake_worker's ranks= lines."""
    seen = set()
    for line in ranks.read_text().splitlines():
        fields = line.split()
        seen.add((int(fields[5]), int(fields[6].rsplit(":", 1)[1])))
    return seen


def test_one_node_master_port_is_every_attempts_store_port(tmp_path):
    port, ranks = free_port(), tmp_path / "ranks"
    r = run_muster(["--nproc-per-node", "2", "--master-port", port, "--max-restarts", "1",
                    *fake(f"ranks={ranks}", "if-attempt=0", "if-rank=1", "exit=137")])
    assert r.returncode == 0, r.stderr[-2000:]
    assert _ports_seen(ranks) == {(0, port), (1, port)}, ranks.read_text()


@needs_torch
def test_torch_workers_meet_at_the_given_master_port():
    port = free_port()
    r = run_muster(["--nproc-per-node", "2", "--master-port", port, ALLREDUCE], timeout=120)
    assert r.returncode == 0, r.stderr[-3000:]


def test_master_port_in_use_is_a_transient_setup_failure_naming_the_flag():
    with socket.socket(socket.AF_INET6) as held:
        held.bind(("::", 0))
        held.listen()
        port = held.getsockname()[1]
        r = run_muster(["--nproc-per-node", "1", "--master-port", port, *fake("exit=0")])
    assert r.returncode == 138, r.stderr[-2000:]
    last = r.stderr.strip().splitlines()[-1]
    assert f"--master-port {port}: the store cannot listen there" in last, last
    assert "leave --master-port out" in last, last


def test_dry_run_shows_the_fixed_store_port():
    r = run_muster(["--dry-run", "--master-port", "29511", *fake()])
    assert r.returncode == 0, r.stderr
    assert ":29511 (--master-port), a fresh store per attempt" in r.stdout, r.stdout


def test_several_nodes_name_an_unused_master_port():
    agents = Agents(2, ["--nnodes", "2", "--nproc-per-node", "1", "--master-port", "29512",
                        *fake("exit=0")], env=muster_env())
    for rc, _, err in agents.wait(60):
        assert rc == 0, err[-2000:]
        assert "--master-port 29512 is not used: with several nodes" in err, err[-2000:]
