"""Helpers for multi-agent tests: start several agents on one machine (loopback)."""
import contextlib
import signal
import socket
import subprocess

from conftest import MUSTER, muster_env


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Agents:
    """N `muster run` agents sharing one rendezvous endpoint on 127.0.0.1."""

    def __init__(self, n, common, per_agent=None, env=None):
        self.port = free_port()
        self.procs = []
        for i in range(n):
            extra = per_agent(i) if per_agent else []
            args = [str(MUSTER), "run", "--rdzv-endpoint", f"127.0.0.1:{self.port}",
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
