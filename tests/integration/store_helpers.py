"""Helpers for the c10d store integration tests.

Importable by pytest (server fixtures) and runnable as a script by Debian's
/usr/bin/python3 (which has torch 1.13):
    store_helpers.py client HOST PORT        # runs the JSON program on stdin, prints results
    store_helpers.py torch-master            # torch 1.13's own server; prints PORT n
"""
import datetime
import json
import os
import pathlib
import subprocess
import sys
import time

REPO = pathlib.Path(__file__).resolve().parents[2]
TORCH_PYTHON = "/usr/bin/python3"  # Debian python3-torch 1.13; `python3` may lack torch


def build_dir():
    return pathlib.Path(os.environ.get("MUSTER_BUILD_DIR", REPO / "build"))


def server_binary():
    return build_dir() / "tests" / "c10d_store_server"


def torch_available():
    r = subprocess.run([TORCH_PYTHON, "-c", "import torch.distributed"],
                       capture_output=True, timeout=120)
    return r.returncode == 0


class Server:
    """A server process that prints `PORT n` on stdout; stopped with SIGTERM."""

    def __init__(self, argv, env=None):
        self.proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stdin=subprocess.PIPE,
                                     stderr=subprocess.PIPE, text=True, env=env)
        line = self._read_line(deadline=time.monotonic() + 60)
        if not line.startswith("PORT "):
            self.proc.kill()
            raise RuntimeError(f"server did not report its port: {line!r} "
                               f"stderr={self.proc.stderr.read()!r}")
        self.port = int(line.split()[1])

    def _read_line(self, deadline):
        import selectors
        sel = selectors.DefaultSelector()
        sel.register(self.proc.stdout, selectors.EVENT_READ)
        if not sel.select(timeout=max(0.0, deadline - time.monotonic())):
            return ""
        return self.proc.stdout.readline()

    def alive(self):
        return self.proc.poll() is None

    def stop(self, timeout=10):
        """SIGTERM, then the exit code (SIGKILL and -9 after `timeout`)."""
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=timeout)
        self.stderr = self.proc.stderr.read()
        return self.proc.returncode


def start_muster_server():
    binary = server_binary()
    if not binary.exists():
        raise FileNotFoundError(f"{binary} not built (set MUSTER_BUILD_DIR)")
    return Server([str(binary), "0"])


def start_torch_server():
    return Server([TORCH_PYTHON, __file__, "torch-master"])


def run_clients(port, programs, timeout=120):
    """Runs one torch 1.13 client process per program in parallel; returns their results."""
    procs = [subprocess.Popen([TORCH_PYTHON, __file__, "client", "127.0.0.1", str(port)],
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True) for _ in programs]
    for p, prog in zip(procs, programs):
        p.stdin.write(json.dumps(prog))
        p.stdin.close()
    results = []
    deadline = time.monotonic() + timeout
    for p in procs:
        try:
            out = p.stdout.read() if p.wait(timeout=max(1, deadline - time.monotonic())) == 0 else None
        except subprocess.TimeoutExpired:
            for q in procs:
                q.kill()
            raise AssertionError("store client processes did not finish in time")
        if out is None:
            raise AssertionError(f"client failed: {p.stderr.read()}")
        results.append(json.loads(out))
    return results


# ---- executed under /usr/bin/python3 with torch 1.13 ----

def _client_main(host, port, program):
    import torch.distributed as dist
    default = datetime.timedelta(seconds=30)
    store = dist.TCPStore(host, port, None, False, default)
    results = []
    for op in program:
        kind = op[0]
        try:
            if kind == "set":
                store.set(op[1], op[2])
                r = None
            elif kind == "get":
                r = store.get(op[1]).decode("latin-1")
            elif kind == "add":
                r = store.add(op[1], op[2])
            elif kind == "compare_set":
                r = store.compare_set(op[1], op[2], op[3]).decode("latin-1")
            elif kind == "delete_key":
                r = store.delete_key(op[1])
            elif kind == "num_keys":
                r = store.num_keys()
            elif kind == "wait":
                store.wait(op[1])
                r = "ok"
            elif kind == "wait_timeout":  # keys that are never set: must time out
                store.set_timeout(datetime.timedelta(milliseconds=op[2]))
                try:
                    store.wait(op[1])
                    r = "no timeout"
                finally:
                    store.set_timeout(default)
            else:
                raise ValueError(kind)
        except Exception as e:  # the outcome is part of the compared result
            r = ["error", type(e).__name__, str(e).splitlines()[0] if str(e) else ""]
        results.append([kind, r])
    print(json.dumps(results))


def _torch_master_main():
    import torch.distributed as dist
    store = dist.TCPStore("127.0.0.1", 0, None, True, datetime.timedelta(seconds=300))
    print(f"PORT {store.port}", flush=True)
    sys.stdin.read()  # until the test closes stdin or terminates us


if __name__ == "__main__":
    if sys.argv[1] == "client":
        _client_main(sys.argv[2], int(sys.argv[3]), json.loads(sys.stdin.read()))
    elif sys.argv[1] == "torch-master":
        _torch_master_main()
