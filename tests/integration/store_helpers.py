"""Helpers for the c10d store integration tests.

Importable by pytest (server fixtures) and runnable as a script by Debian's
/usr/bin/python3 (which has torch 1.13):
    store_helpers.py runs HOST               # runs a JSON list of {port, program} in order
    store_helpers.py torch-master [N]        # N (1) torch 1.13 servers; prints PORT n...
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
        self.ports = [int(p) for p in line.split()[1:]]
        self.port = self.ports[0]

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


def start_torch_server(n=1):
    """torch 1.13's own servers, n in one process (one torch import): .ports."""
    return Server([TORCH_PYTHON, __file__, "torch-master", str(n)])


def run_client_runs(runs_per_client, timeout=120):
    """One torch 1.13 client process per entry, in parallel; each runs its list of
    {port, program} in order (one torch import for all). Their results, per client per run."""
    procs = [subprocess.Popen([TORCH_PYTHON, __file__, "runs", "127.0.0.1"],
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True) for _ in runs_per_client]
    for p, runs in zip(procs, runs_per_client):
        p.stdin.write(json.dumps(runs))
        p.stdin.close()
    results = []
    deadline = time.monotonic() + timeout
    try:
        for p in procs:
            try:
                rc = p.wait(timeout=max(1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                raise AssertionError(f"store client processes did not finish in {timeout} s")
            assert rc == 0, f"client exited {rc}: {p.stderr.read()[-3000:]}"
            results.append(json.loads(p.stdout.read()))
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()
    return results


# ---- executed under /usr/bin/python3 with torch 1.13 ----

def _runs_main(host, runs):
    print(json.dumps([_run_program(host, r["port"], r["program"]) for r in runs]))


def _run_program(host, port, program):
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
    return results


def _torch_master_main(n):
    import torch.distributed as dist
    stores = [dist.TCPStore("127.0.0.1", 0, None, True, datetime.timedelta(seconds=300))
              for _ in range(n)]
    print("PORT " + " ".join(str(s.port) for s in stores), flush=True)
    sys.stdin.read()  # until the test closes stdin or terminates us


if __name__ == "__main__":
    if sys.argv[1] == "runs":
        _runs_main(sys.argv[2], json.loads(sys.stdin.read()))
    elif sys.argv[1] == "torch-master":
        _torch_master_main(int(sys.argv[2]) if len(sys.argv) > 2 else 1)
