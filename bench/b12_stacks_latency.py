#!/usr/bin/python3
"""B12 (issue 17 item 5): `muster stacks` latency for 4 nodes x 8 ranks. Four `muster run`
agents on this machine share one rendezvous endpoint (the first hosts it), each with 8 real
Python workers (each waits in a function of its own, as a training step would), so the
server relays the request to 4 agents that each signal 8 workers and read 8 dumps. Times
`muster stacks --rdzv-endpoint` end to end (process start to exit) and the call itself
(--json's elapsed_s), N times; then the same through this host's local sockets (no
--rdzv-endpoint: the CLI asks the 4 agents itself). Target: < 2 s (issue 17 item 1).
"""
import argparse
import json
import os
import pathlib
import socket
import statistics
import subprocess
import sys
import tempfile
import time

import common as c

WORKER = """import os, time
open(os.path.join(os.environ["READY"], os.environ["RANK"]), "w").close()
def training_step():
    while not os.path.exists(os.environ["RELEASE"]):
        time.sleep(0.05)
training_step()
"""


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def timed(argv):
    t = time.perf_counter()
    r = subprocess.run(argv, capture_output=True, text=True, timeout=60)
    wall = time.perf_counter() - t
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    ranks = sum(len(n["ranks"]) for n in doc["nodes"])
    assert doc["groups"][0]["ranks"] == list(range(ranks)), doc["groups"][0]
    return wall, doc["elapsed_s"], ranks


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--nodes", type=int, default=4)
    ap.add_argument("--ranks", type=int, default=8)
    ap.add_argument("--runs", type=int, default=10)
    args = ap.parse_args()
    muster = c.MUSTER_BUILT
    with tempfile.TemporaryDirectory() as tmp:
        tmp = pathlib.Path(tmp)
        ready, release = tmp / "ready", tmp / "release"
        ready.mkdir()
        script = tmp / "worker.py"
        script.write_text(WORKER)
        port, run_id = free_port(), f"b12-{os.getpid()}"
        env = dict(os.environ, READY=str(ready), RELEASE=str(release))
        agents = [subprocess.Popen(
            [muster, "run", "--rdzv-endpoint", f"127.0.0.1:{port}", "--rdzv-id", run_id,
             "--nnodes", str(args.nodes), "--nproc-per-node", str(args.ranks),
             "--no-python", "/usr/bin/python3", str(script)],
            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, env=env)
            for _ in range(args.nodes)]
        try:
            deadline = time.monotonic() + 120
            while len(list(ready.iterdir())) < args.nodes * args.ranks:
                assert time.monotonic() < deadline, "workers did not start"
                time.sleep(0.1)
            time.sleep(0.5)
            for name, argv in (
                    ("rendezvous", [muster, "stacks", "--rdzv-endpoint", f"127.0.0.1:{port}",
                                    "--rdzv-id", run_id, "--json"]),
                    ("local", [muster, "stacks", "--rdzv-id", run_id, "--json"])):
                timed(argv)  # warm
                runs = [timed(argv) for _ in range(args.runs)]
                wall = [r[0] for r in runs]
                call = [r[1] for r in runs]
                print(f"{name}: {args.nodes} nodes x {args.ranks} ranks ({runs[0][2]} ranks), "
                      f"{args.runs} runs: end to end p50 {statistics.median(wall):.3f} s "
                      f"(min {min(wall):.3f}, max {max(wall):.3f}); in the call p50 "
                      f"{statistics.median(call):.3f} s (max {max(call):.3f})")
        finally:
            release.touch()
            for a in agents:
                try:
                    a.wait(timeout=60)
                except subprocess.TimeoutExpired:
                    a.kill()
    return 0


if __name__ == "__main__":
    sys.exit(main())
