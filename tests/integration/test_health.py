"""Health reported upward by the agent: grpc.health.v1 on --health-port, --status-file
(valid JSON at every moment), --termination-log with the root cause."""
import json
import subprocess
import threading
import time

import pytest

from conftest import FAKE, MUSTER, muster_env, wait_for
from multinode import free_port

grpc = pytest.importorskip("grpc", reason="SKIPPED LOUDLY: python3-grpcio not installed")

SERVING, NOT_SERVING = b"\x08\x01", b"\x08\x02"


def health(port, service=b""):
    """grpc.health.v1.Health/Check with a hand-encoded request (field 1: service)."""
    with grpc.insecure_channel(f"127.0.0.1:{port}") as channel:
        check = channel.unary_unary("/grpc.health.v1.Health/Check",
                                    request_serializer=lambda b: b,
                                    response_deserializer=lambda b: b)
        request = b"\x0a" + bytes([len(service)]) + service if service else b""
        return check(request, timeout=5)


def test_ready_at_once_on_the_host_after_the_first_round_elsewhere(tmp_path):
    """Readiness ("", muster.v1.Ready) never waits for the workers: the agent serving the
    rendezvous is ready at once, another agent once its first round completed (so that no
    headless Service can keep the host's name from the others: examples/k8s/README.md).
    muster.v1.Workers (old name muster.v1.Agent) is SERVING exactly while the workers run."""
    hport, hport2, rport = free_port(), free_port(), free_port()
    common = ["--nnodes", "2", "--rdzv-endpoint", f"127.0.0.1:{rport}", "--rdzv-id", "h",
              "--no-python", str(FAKE), "sleep=3"]
    first = subprocess.Popen([str(MUSTER), "run", "--health-port", str(hport), *common],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                             env=muster_env())
    wait_for(lambda: _try(lambda: health(hport)), 10, what="the health port")
    wait_for(lambda: health(hport) == SERVING, 10, what="the host ready before any round")
    assert health(hport, b"muster.v1.Ready") == SERVING
    assert health(hport, b"muster.v1.Workers") == NOT_SERVING  # waiting for the second node
    assert health(hport, b"muster.v1.Agent") == NOT_SERVING
    # The second agent does not host: it is not ready before its first round.
    second = subprocess.Popen([str(MUSTER), "run", "--health-port", str(hport2),
                               "--rdzv-host", "false", *common], stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True, env=muster_env())
    wait_for(lambda: health(hport, b"muster.v1.Workers") == SERVING, 10,
             what="Workers SERVING once the workers run")
    assert health(hport, b"muster.v1.Agent") == SERVING
    wait_for(lambda: health(hport2) == SERVING, 10, what="the second agent ready")
    assert first.wait(30) == 0 and second.wait(30) == 0


def test_not_ready_before_the_first_round_where_another_agent_hosts(tmp_path):
    hport, rport = free_port(), free_port()
    agent = subprocess.Popen([str(MUSTER), "run", "--health-port", str(hport), "--nnodes", "2",
                              "--rdzv-endpoint", f"127.0.0.1:{rport}", "--rdzv-host", "false",
                              "--rdzv-conf", "join_timeout=3s", "--no-python", str(FAKE)],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                             env=muster_env())
    wait_for(lambda: _try(lambda: health(hport)), 10, what="the health port")
    assert health(hport) == NOT_SERVING                      # nobody serves the rendezvous
    assert health(hport, b"muster.v1.Liveness") == SERVING
    assert agent.wait(30) == 138


def _try(fn):
    try:
        return fn()
    except grpc.RpcError:
        return None


def test_status_file_is_always_valid_json_and_termination_log_has_root_cause(tmp_path):
    status, term = tmp_path / "status.json", tmp_path / "termination-log"
    seen, bad, stop = [], [], threading.Event()

    def poll():
        last = False
        while not last:
            last = stop.is_set()  # one more read after the agent exited: its final phase
            try:
                text = status.read_text()
            except FileNotFoundError:
                continue
            try:
                doc = json.loads(text)
                if not seen or seen[-1] != doc["phase"]:
                    seen.append(doc["phase"])
            except json.JSONDecodeError:
                bad.append(text)

    poller = threading.Thread(target=poll)
    poller.start()
    # Rank 0 ignores SIGTERM, so each stop lasts the 1 s grace: a reader polling the file
    # (a thread of a loaded machine's Python) cannot miss the Stopping phase, which a worker
    # that dies at once would keep for a few milliseconds.
    r = subprocess.run([str(MUSTER), "run", "--status-file", str(status), "--termination-log",
                        str(term), "--nproc-per-node", "3", "--max-restarts", "1",
                        "--restart-policy", "ExitCode", "--shutdown-timeout", "1s",
                        "--no-python", str(FAKE), "if-rank=0", "ignore-term", "sleep=0.3",
                        "if-attempt=0", "if-rank=1", "exit=137", "if-attempt=1", "if-rank=2",
                        "exit=7", "sleep=3"],
                       capture_output=True, text=True, timeout=60, env=muster_env())
    stop.set()
    poller.join()
    assert r.returncode == 7, r.stderr[-2000:]
    assert not bad, f"a reader saw a partial status file: {bad[0][:200]!r}"
    final = json.loads(status.read_text())
    assert final["phase"] == "Failed" and final["restart_count"] == 1
    assert final["root_cause"]["rank"] == 2 and final["root_cause"]["code"] == 7
    assert "Running" in seen and "Stopping" in seen and seen[-1] == "Failed", seen
    line = term.read_text().strip()
    assert line.startswith("job failed: rank 2") and "exit 7" in line, line


def test_liveness_serving_while_the_workers_wait(tmp_path):
    hport, rport = free_port(), free_port()
    agent = subprocess.Popen([str(MUSTER), "run", "--health-port", str(hport), "--nnodes", "2",
                              "--rdzv-endpoint", f"127.0.0.1:{rport}", "--rdzv-conf",
                              "join_timeout=5s", "--no-python", str(FAKE)],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                             env=muster_env())
    wait_for(lambda: _try(lambda: health(hport)), 10, what="the health port")
    assert health(hport, b"muster.v1.Workers") == NOT_SERVING
    assert health(hport, b"muster.v1.Liveness") == SERVING
    assert agent.wait(30) == 138  # nobody else joined: rendezvous timed out
