"""Issue 15 item 3: every socket an agent listens on binds the one address it advertises
(agent/config/listen_address.h), never a wildcard (0.0.0.0, ::), in every mode; an agent that can
never be group rank 0 opens no store socket at all.

Each case runs a real torch job (one worker per node, tests/integration/scripts/
hold_check.py) and, while every worker is connected through the store, reads the agents'
listening sockets: the LISTEN rows of /proc/PID/net/tcp and tcp6 (the agent's own network
namespace; for pods, the pod's) whose inode is one of /proc/PID/fd's sockets.
"""
import json
import os
import signal
import socket
import subprocess

from conftest import MUSTER, REPO, muster_env, wait_for
from multinode import free_port, serve
from pods import Pods, agent_pid, name_pods, read_text
from test_tls import pki  # noqa: F401  (the TLS test's certificates: a pytest fixture)

SCRIPT = REPO / "tests" / "integration" / "scripts" / "hold_check.py"
WILDCARDS = {"0.0.0.0", "::"}


def _v4(hexaddr):
    return socket.inet_ntop(socket.AF_INET, bytes.fromhex(hexaddr)[::-1])


def _v6(hexaddr):
    raw = bytes.fromhex(hexaddr)  # four 32-bit words, each in host (little-endian) order
    addr = socket.inet_ntop(socket.AF_INET6, b"".join(raw[i:i + 4][::-1] for i in range(0, 16, 4)))
    # gRPC binds an IPv4 address on an IPv6 socket, as its v4-mapped form: the same address.
    return addr[len("::ffff:"):] if addr.startswith("::ffff:") and "." in addr else addr


def listening(pid):
    """{(address, port)} of the TCP sockets process `pid` itself listens on."""
    inodes = set()
    for fd in os.listdir(f"/proc/{pid}/fd"):
        try:
            link = os.readlink(f"/proc/{pid}/fd/{fd}")
        except OSError:
            continue  # closed meanwhile
        if link.startswith("socket:["):
            inodes.add(link[len("socket:["):-1])
    found = set()
    for table, decode in (("tcp", _v4), ("tcp6", _v6)):
        with open(f"/proc/{pid}/net/{table}") as f:
            next(f)
            for line in f:
                fields = line.split()
                local, state, inode = fields[1], fields[3], fields[9]
                if state == "0A" and inode in inodes:  # 0A: TCP_LISTEN
                    addr, port = local.split(":")
                    found.add((decode(addr), int(port, 16)))
    return found


def assert_no_wildcard(name, sockets):
    wild = {s for s in sockets if s[0] in WILDCARDS}
    assert not wild, f"{name} listens on every address: {sorted(wild)} (all: {sorted(sockets)})"


class Held:
    """A job whose workers wait for `go` (hold_check.py): `rows()` their JSON lines."""

    def __init__(self, tmp_path, workers):
        self.out, self.go, self.workers = tmp_path / "out.jsonl", tmp_path / "go", workers

    def env(self, **extra):
        return muster_env(OUT=self.out, GO=self.go, **extra)

    def rows(self):
        text = read_text(self.out)
        return [json.loads(line) for line in text.splitlines()]

    def wait_connected(self, procs, errs):
        def ready():
            for p, err in zip(procs, errs):
                assert p.poll() is None, f"an agent exited {p.returncode}: {err()[-3000:]}"
            return len(self.rows()) == self.workers
        wait_for(ready, 60, interval=0.05, what=f"{self.workers} workers through the store")

    def release(self):
        self.go.write_text("go\n")


def wait_joining(proc, log, what):
    """Waits until an agent set up and tries to reach its rendezvous (which is not there
    yet): whatever it listens on before the round is open by then."""
    def joining():
        assert proc.poll() is None, f"{what} exited {proc.returncode}: {read_text(log)[-3000:]}"
        return "waiting for rendezvous at" in read_text(log)
    wait_for(joining, 30, interval=0.05, what=f"{what} waiting for its rendezvous")


def run_held(tmp_path, commands, early=None):
    """Starts one agent per command on this host, agent `early` first, alone; returns
    ({i: sockets while the job runs}, rows, sockets of agent `early` before the others
    started)."""
    job = Held(tmp_path, len(commands))
    logs = [tmp_path / f"agent{i}.err" for i in range(len(commands))]
    order = ([early] if early is not None else []) + [i for i in range(len(commands))
                                                      if i != early]
    procs, before = {}, None
    try:
        for i in order:
            with open(logs[i], "w") as err:
                procs[i] = subprocess.Popen([str(MUSTER), "run", *map(str, commands[i])],
                                            stdout=subprocess.DEVNULL, stderr=err, env=job.env())
            if i == early:
                wait_joining(procs[i], logs[i], f"agent {i}")
                before = listening(procs[i].pid)
        job.wait_connected(list(procs.values()), [lambda p=p: read_text(p) for p in logs])
        sockets = {i: listening(p.pid) for i, p in procs.items()}
    finally:
        job.release()
    for i, p in procs.items():
        assert p.wait(60) == 0, read_text(logs[i])[-3000:]
    return sockets, job.rows(), before


# -- on one host --------------------------------------------------------------------------

def test_one_node_store_health_and_metrics_on_loopback(tmp_path):
    health, metrics = free_port(), free_port()
    sockets, rows, _ = run_held(tmp_path, [["--nproc-per-node", 1, "--health-port", health,
                                         "--metrics-port", metrics, SCRIPT]])
    store = int(rows[0]["MASTER_PORT"])
    assert rows[0]["MASTER_ADDR"] == "127.0.0.1"
    assert sockets[0] == {("127.0.0.1", store), ("127.0.0.1", health),
                          ("127.0.0.1", metrics)}, sockets


def test_rdzv_endpoint_serving_agent_and_joiner_bind_the_advertised_address(tmp_path):
    port = free_port()
    common = ["--nnodes", 2, "--nproc-per-node", 1, "--rdzv-endpoint", f"127.0.0.1:{port}",
              "--rdzv-id", "bind", SCRIPT]
    sockets, rows, _ = run_held(tmp_path, [common, common])
    assert {r["MASTER_ADDR"] for r in rows} == {"127.0.0.1"}
    assert {int(r["MASTER_PORT"]) for r in rows} == {port}
    for i, s in sockets.items():
        assert_no_wildcard(f"agent {i}", s)
        assert {a for a, _ in s} <= {"127.0.0.1"}, s
    # One of them serves the one port; the other keeps at most its own store (it has no node
    # rank: with another server it could have become group rank 0).
    assert sorted(len(s) for s in sockets.values()) in ([1, 1], [0, 1]), sockets
    assert any(("127.0.0.1", port) in s for s in sockets.values()), sockets


def test_static_form_node_rank_1_opens_no_store(tmp_path):
    port = free_port()
    common = ["--nnodes", 2, "--nproc-per-node", 1, "--master_addr", "127.0.0.1",
              "--master_port", port, SCRIPT]
    sockets, rows, before = run_held(tmp_path, [["--node_rank", 0, *common],
                                                ["--node_rank", 1, *common]], early=1)
    assert before == set(), f"node rank 1 never serves the store, yet listens: {before}"
    assert {(r["MASTER_ADDR"], int(r["MASTER_PORT"])) for r in rows} == {("127.0.0.1", port)}
    assert sockets[0] == {("127.0.0.1", port)}, sockets
    assert sockets[1] == set(), sockets


def test_muster_serve_agents_stores_on_the_route_address(tmp_path):
    with serve() as port:
        common = ["--nnodes", 2, "--nproc-per-node", 1, "--rdzv-endpoint", f"127.0.0.1:{port}",
                  "--rdzv-id", "bind", "--rdzv-host", "false", SCRIPT]
        sockets, rows, _ = run_held(tmp_path, [common, common])
    master = {(r["MASTER_ADDR"], int(r["MASTER_PORT"])) for r in rows}
    assert len(master) == 1 and next(iter(master))[0] == "127.0.0.1", master
    for i, s in sockets.items():
        assert_no_wildcard(f"agent {i}", s)
    # Both opened a store on 127.0.0.1 (either could be group rank 0); the other agent
    # closed its own once the round said it was not.
    assert sockets[0] | sockets[1] == master, sockets


def test_tls_rendezvous_and_store_bind_the_advertised_address(pki, tmp_path):
    port = free_port()
    common = ["--nnodes", 2, "--nproc-per-node", 1, "--rdzv-endpoint", f"127.0.0.1:{port}",
              "--rdzv-id", "bind", "--tls-ca", pki / "ca.pem", SCRIPT]
    serving = ["--rdzv-host", "true", "--node-rank", 0, "--tls-cert", pki / "server.pem",
               "--tls-key", pki / "server.key"]
    sockets, rows, _ = run_held(tmp_path, [[*serving, *common], ["--rdzv-host", "false", *common]])
    store = {(r["MASTER_ADDR"], int(r["MASTER_PORT"])) for r in rows}
    assert len(store) == 1 and next(iter(store))[0] == "127.0.0.1", store
    # Two ports on the serving agent (TLS cannot share one): the rendezvous and the store.
    assert sockets[0] == {("127.0.0.1", port)} | store, sockets
    assert_no_wildcard("agent 1", sockets[1])


def test_debug_mode_store_and_health_on_loopback(tmp_path):
    health, debug_dir = free_port(), tmp_path / "debug"
    p = subprocess.Popen([str(MUSTER), "run", "--debug", "--debug-dir", str(debug_dir),
                          "--debug-command", "sleep 60", "--nproc-per-node", "1",
                          "--health-port", str(health), str(SCRIPT)], stdout=subprocess.DEVNULL,
                         stderr=subprocess.PIPE, text=True, env=muster_env())
    try:
        wait_for(lambda: (debug_dir / "rank-0.env").exists(), 30, what="debug env files")
        env = (debug_dir / "rank-0.env").read_text()
        store = int(env.split("export MASTER_PORT='")[1].split("'")[0])
        assert listening(p.pid) == {("127.0.0.1", store), ("127.0.0.1", health)}
    finally:
        p.send_signal(signal.SIGTERM)
        p.wait(30)


def test_bad_local_addr_is_refused_naming_the_flag(tmp_path):
    port = free_port()
    two = ["--nnodes", "2", "--rdzv-endpoint", f"127.0.0.1:{port}"]
    for args, env, where in (
            ([*two, "--local-addr", "192.0.2.77"], {}, "--local-addr"),
            # An agent that opens no store, and a one-node job: checked all the same.
            ([*two, "--local-addr", "192.0.2.77", "--node-rank", "1"], {}, "--local-addr"),
            (["--local-addr", "192.0.2.77"], {}, "--local-addr"),
            (two, {"POD_IP": "192.0.2.77"}, "POD_IP")):
        r = subprocess.run([str(MUSTER), "run", *args, "--no-python", "/bin/true"],
                           capture_output=True, text=True, timeout=30, env=muster_env(**env))
        last = r.stderr.strip().splitlines()[-1] if r.stderr.strip() else ""
        assert r.returncode == 2, r.stderr[-2000:]
        assert where in last and "not an address of this host" in last, r.stderr[-2000:]
    # The serving agent listens on --local-addr; its endpoint must name that address.
    r = subprocess.run([str(MUSTER), "run", "--nnodes", "2", "--rdzv-endpoint",
                        f"127.0.0.1:{port}", "--local-addr", "127.0.0.2", "--no-python",
                        "/bin/true"], capture_output=True, text=True, timeout=30,
                       env=muster_env())
    assert r.returncode == 2, r.stderr[-2000:]
    assert "resolves on this host to 127.0.0.1, but this node listens on 127.0.0.2" in r.stderr


# -- pods (network namespaces, pods.py) ---------------------------------------------------

def run_in_pods(pods, tmp_path, argv_of, env_of, early=None):
    """One agent per pod, pod `early` first, alone; returns ({pod index: sockets}, rows,
    sockets of pod `early`'s agent before the others started)."""
    job = Held(tmp_path, len(pods))
    order = ([pods[early]] if early is not None else []) + [p for p in pods if p.index != early]
    procs, before = {}, None
    try:
        for pod in order:
            procs[pod.index] = pod.run(argv_of(pod), env=job.env(**env_of(pod)))
            if pod.index == early:
                wait_joining(procs[early], procs[early].err_path, pod.name)
                before = listening(agent_pid(procs[early]))
        job.wait_connected(list(procs.values()),
                           [lambda p=p: read_text(p.err_path) for p in procs.values()])
        sockets = {i: listening(agent_pid(p)) for i, p in procs.items()}
    finally:
        job.release()
    for i, p in procs.items():
        assert p.wait(60) == 0, f"{pods[i].name}: {read_text(p.err_path)[-3000:]}"
    return sockets, job.rows(), before


def test_pods_operator_env_master_serves_on_pod_ip_workers_open_no_store(tmp_path):
    """T9k/Kubeflow-style: MASTER_ADDR names the master Pod, RANK and WORLD_SIZE per pod,
    POD_IP from the Downward API, probes on --health-port."""
    with Pods(2, tmp_path) as pods:
        name_pods(pods, ["job-master-0", "job-worker-0"])
        pods[1].add_host("job-master-0", pods[0].ip)
        argv = [str(MUSTER), "run", "--nproc-per-node", 1, "--health-port", 8081, SCRIPT]
        sockets, rows, before = run_in_pods(
            pods, tmp_path, lambda pod: argv,
            lambda pod: dict(MASTER_ADDR="job-master-0", MASTER_PORT="23456", WORLD_SIZE="2",
                             RANK=str(pod.index), POD_IP=pod.ip), early=1)
        assert before == {(pods[1].ip, 8081)}, f"a worker Pod opens no store: {before}"
        assert {(r["MASTER_ADDR"], r["MASTER_PORT"]) for r in rows} == {(pods[0].ip, "23456")}
        assert sockets[0] == {(pods[0].ip, 23456), (pods[0].ip, 8081)}, sockets
        assert sockets[1] == {(pods[1].ip, 8081)}, sockets


def test_pods_no_pod_ip_bind_the_route_address(tmp_path):
    """No POD_IP, no --local-addr: each agent binds the local address of its route to the
    endpoint (pod0 by hostname), which is what it advertises."""
    with Pods(2, tmp_path) as pods:
        argv = [str(MUSTER), "run", "--nnodes", 2, "--nproc-per-node", 1, "--rdzv-endpoint",
                "pod0:29400", "--rdzv-id", "bind", "--health-port", 8081, SCRIPT]
        sockets, rows, _ = run_in_pods(pods, tmp_path, lambda pod: argv, lambda pod: {})
        assert {(r["MASTER_ADDR"], r["MASTER_PORT"]) for r in rows} == {(pods[0].ip, "29400")}
        assert sockets[0] == {(pods[0].ip, 29400), (pods[0].ip, 8081)}, sockets
        assert_no_wildcard("pod1", sockets[1])
        assert {a for a, _ in sockets[1]} == {pods[1].ip}, sockets
