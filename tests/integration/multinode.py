"""Helpers for multi-agent tests: start several agents on one machine (loopback)."""
import collections
import contextlib
import random
import signal
import socket
import subprocess
import time

from conftest import MUSTER, muster_env, xdist_worker_index


# Ports handed out lately by this process: a port is free until its server binds it, so a
# test that draws several before starting anything (EtcdCluster: 6, client and peer ports)
# would otherwise get the same one twice about 1% of the time; the loser's bind fails.
_issued = collections.deque(maxlen=600)


def free_port():
    """A port free now on 127.0.0.1 for a server a test starts later. Under pytest-xdist each
    worker draws from its own block below the kernel's ephemeral range (32768+), so two
    workers never pick the same port and no connect() takes it in between. Never one of the
    last 600 this process handed out (a server of a test may not have bound it yet)."""
    index = xdist_worker_index() % 8
    block = range(20000 + 1500 * index, 20000 + 1500 * (index + 1))
    for port in random.sample(block, 400):
        if port in _issued:
            continue
        with socket.socket() as s:
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                continue
            _issued.append(port)
            return port
    raise AssertionError(f"no free port in {block} for xdist worker {index}")


class Agents:
    """N `muster run` agents sharing one rendezvous endpoint on 127.0.0.1."""

    def __init__(self, n, common, per_agent=None, env=None, rdzv=None):
        """`rdzv`: the rendezvous flags instead of muster's own on a free port (e.g.
        `--rdzv-backend etcd --rdzv-endpoint ...`)."""
        self.port = free_port()
        self.procs = []
        rdzv = rdzv or ["--rdzv-endpoint", f"127.0.0.1:{self.port}"]
        for i in range(n):
            extra = per_agent(i) if per_agent else []
            args = [str(MUSTER), "run", *map(str, rdzv),
                    "--rdzv-id", "test", *map(str, extra), *map(str, common)]
            self.procs.append(subprocess.Popen(args, stdout=subprocess.PIPE,
                                               stderr=subprocess.PIPE, text=True,
                                               env=env or muster_env()))

    def wait(self, timeout=120):
        """Waits for every agent; returns [(returncode, stdout, stderr)]."""
        results = []
        for p in self.procs:
            out, err = p.communicate(timeout=timeout)
            results.append((p.returncode, out, err))
        return results


def wait_job_exists(port, run_id, timeout=30):
    """Waits until the rendezvous at 127.0.0.1:port knows job `run_id` (a node has joined):
    `muster status` answers 0 then, and 138 before."""
    deadline = time.monotonic() + timeout
    while True:
        r = subprocess.run([str(MUSTER), "status", "--rdzv-endpoint", f"127.0.0.1:{port}",
                            "--rdzv-id", run_id, "--json"], capture_output=True, text=True,
                           timeout=timeout, env=muster_env())
        if r.returncode == 0:
            return
        assert time.monotonic() < deadline, \
            f"job {run_id} not at 127.0.0.1:{port} after {timeout}s: {r.stderr[-1000:]}"
        time.sleep(0.05)


@contextlib.contextmanager
def serve(*args):
    """A `muster serve` on a free port (yields the port); it must exit 0 on SIGTERM."""
    port = free_port()
    p = subprocess.Popen([str(MUSTER), "serve", "--port", str(port), *map(str, args)],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                         env=muster_env())
    assert p.stdout.readline().startswith("muster serve: listening"), p.stderr.read()
    try:
        yield port
    finally:
        p.send_signal(signal.SIGTERM)
        assert p.wait(20) == 0
