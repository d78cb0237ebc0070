"""Shared plumbing for the store benchmarks B3/B4 (reference/perf.md §7): compiles
bench/helpers/storeload.cc, starts the three TCPStore servers (torch 1.13 classic, torch 2.x
libuv, muster's c10d_store_server) and the raw echo server, each optionally pinned."""
import atexit
import os
import pathlib
import shutil
import signal
import subprocess
import tempfile
import time

import common as c

STORE_SERVER_BUILT = str(c.BUILD / "tests" / "c10d_store_server")
_BIN = {}


def storeload():
    if "storeload" not in _BIN:
        out = pathlib.Path(tempfile.mkdtemp(prefix="muster-bench-sl-"))
        atexit.register(shutil.rmtree, out, True)
        dst = out / "storeload"
        subprocess.run(["c++", "-O2", "-std=c++20", "-o", str(dst),
                        str(c.BENCH / "helpers" / "storeload.cc")], check=True)
        _BIN["storeload"] = str(dst)
        # private copy of the server under test (a concurrent rebuild must not swap it)
        for _ in range(60):
            if os.path.exists(STORE_SERVER_BUILT) and \
                    time.time() - os.path.getmtime(STORE_SERVER_BUILT) > 5:
                break
            time.sleep(2)
        srv = out / "c10d_store_server"
        shutil.copy2(STORE_SERVER_BUILT, srv)
        _BIN["server"] = str(srv)
        print(f"# store server under test: copy of {STORE_SERVER_BUILT} (built "
              f"{time.ctime(os.path.getmtime(STORE_SERVER_BUILT))})")
    return _BIN["storeload"]


def torch2_python():
    p = c.TORCH2_PYTHON
    if not p:
        try:
            r = subprocess.run([str(c.REPO / "scripts" / "torch2_venv.sh")], capture_output=True,
                               text=True, timeout=600)
            p = r.stdout.strip().splitlines()[-1] if r.returncode == 0 and r.stdout.strip() else None
        except (OSError, subprocess.TimeoutExpired):
            p = None
    if p and c._importable(p, "torch"):
        return p
    return None


_TORCH_SERVER = ("import sys, time, torch.distributed as d\n"
                 "kw = dict(use_libuv=True) if sys.argv[1] == '1' else {}\n"
                 "s = d.TCPStore('127.0.0.1', 0, is_master=True, wait_for_workers=False, **kw)\n"
                 "print('PORT', s.port, flush=True)\n"
                 "time.sleep(1e9)\n")


def servers():
    """[(name, protocol, argv)] of every target available here."""
    storeload()
    out = [("raw echo", "echo", [_BIN["storeload"], "echo-server"])]
    v = c._importable(c.TORCH_PYTHON, "torch")
    if v:
        out.append((f"torch {v} classic", "legacy", [c.TORCH_PYTHON, "-c", _TORCH_SERVER, "0"]))
    out.append(("muster", "legacy", [_BIN["server"]]))
    t2 = torch2_python()
    if t2:
        v2 = c._importable(t2, "torch")
        out.append((f"torch {v2} libuv", "modern", [t2, "-c", _TORCH_SERVER, "1"]))
        out.append(("muster", "modern", [_BIN["server"]]))
    else:
        print("# NOTE: no torch 2.x python: modern-protocol rows left out")
    return out


class Server:
    def __init__(self, argv, pinned=False):
        self.p = subprocess.Popen(c.pinned_prefix(pinned) + list(argv), stdout=subprocess.PIPE,
                                  stderr=subprocess.DEVNULL, text=True, start_new_session=True)
        line = self.p.stdout.readline()
        if not line.startswith("PORT"):
            self.stop()
            raise RuntimeError(f"server {argv[0]} did not print PORT: {line!r}")
        self.port = int(line.split()[1])

    def cpu_s(self):
        try:
            with open(f"/proc/{self.p.pid}/stat") as f:
                v = f.read().rsplit(")", 1)[1].split()
            return (int(v[11]) + int(v[12])) / os.sysconf("SC_CLK_TCK")
        except OSError:
            return float("nan")

    def rss_kb(self):
        try:
            with open(f"/proc/{self.p.pid}/status") as f:
                for line in f:
                    if line.startswith("VmHWM"):
                        return int(line.split()[1])
        except OSError:
            pass
        return 0

    def stop(self):
        try:
            os.killpg(self.p.pid, signal.SIGTERM)
            self.p.wait(timeout=10)
        except (ProcessLookupError, subprocess.TimeoutExpired):
            try:
                os.killpg(self.p.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            self.p.wait()


def bound_quiet_wait(max_wait):
    """The box is shared with builds that run for long stretches: cap common.wait_quiet's wait
    (default 180 s per configuration) so that a driver stays within a few minutes; rows measured
    while it was still busy are reported as such by common (WARNING lines) and marked."""
    orig = c.wait_quiet

    def wq(max_wait_=max_wait, threshold=0.15):
        return orig(max_wait=max_wait_, threshold=threshold)
    c.wait_quiet = wq
