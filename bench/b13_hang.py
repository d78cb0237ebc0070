#!/usr/bin/python3
"""B13 (issue 17 items 2 and 5): hang detection latency. A real torch gloo job
(tests/integration/scripts/hang_worker.py) in which, in attempt 0, the last rank sleeps before
its second all_reduce while the others wait in it; `muster run --hang-timeout T
--hang-action fail`. Latency = from the moment the rank begins to sleep (its
CLOCK_MONOTONIC, written by the worker) to the first agent's `hang_detected` event-log record
(same clock). Configurations: one node x 2 workers (the in-process rendezvous) and 2 nodes x 2
workers (the embedded gRPC server), each at --hang-timeout T. Expected: T + T/4 + ~0.1 s (the
last sample before the stall, then two stack samples); acceptance: < T + 5 s.
"""
import argparse
import json
import os
import pathlib
import socket
import subprocess
import sys
import tempfile
import time

import common as c

SCRIPT = c.REPO / "tests" / "integration" / "scripts" / "hang_worker.py"


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def one_run(nodes, timeout_s, tmp):
    """(latency s, wall s until every agent exited) of one hung job."""
    marks = tmp / "marks"
    marks.mkdir()
    env = dict(os.environ, PYTHON_EXEC=c.TORCH_PYTHON, MARKS=str(marks), MODE="sleep",
               STALL_RANK=str(2 * nodes - 1))
    common = ["--nproc-per-node", "2", "--hang-timeout", f"{timeout_s}s", "--hang-action",
              "fail"]
    if nodes > 1:
        common = ["--nnodes", str(nodes), "--rdzv-endpoint", f"127.0.0.1:{free_port()}",
                  "--rdzv-id", "b12", *common]
    logs = [tmp / f"events{i}.jsonl" for i in range(nodes)]
    t0 = time.monotonic()
    procs = [subprocess.Popen([c.MUSTER, "run", "--event-log", str(logs[i]), *common,
                               str(SCRIPT)], env=env, stdout=subprocess.DEVNULL,
                              stderr=subprocess.PIPE, text=True) for i in range(nodes)]
    for p in procs:
        _, err = p.communicate(timeout=120)
        assert p.returncode == 1, err[-2000:]
    wall = time.monotonic() - t0
    start_ns = int((marks / "stall-0").read_text())
    found = [json.loads(line)["mono_ns"] for log in logs for line in log.read_text().splitlines()
             if json.loads(line)["event"] == "hang_detected"]
    assert len(found) == nodes, found
    return (min(found) - start_ns) / 1e9, wall


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--timeouts", default="2,5", help="--hang-timeout values, seconds")
    ap.add_argument("--nodes", default="1,2")
    c.add_summary_arg(ap)
    args = ap.parse_args()
    c.check_binaries()
    c.print_header("B13 hang detection latency")
    rows, board = [], []
    for nodes in map(int, args.nodes.split(",")):
        for timeout_s in map(float, args.timeouts.split(",")):
            lat, walls = [], []
            for _ in range(args.runs):
                with tempfile.TemporaryDirectory() as tmp:
                    latency, wall = one_run(nodes, timeout_s, pathlib.Path(tmp))
                lat.append(latency)
                walls.append(wall)
            s = c.summary(lat)
            rows.append([f"{nodes} x 2", f"{timeout_s:g} s", len(lat), f"{s['min']:.2f} s",
                         f"{s['p50']:.2f} s", f"{s['max']:.2f} s",
                         f"{s['p50'] - timeout_s:+.2f} s", f"{c.pct(walls, 50):.1f} s"])
            board.append(c.board_row(
                f"B13 hang detection latency, {nodes} node{'s' if nodes > 1 else ''} x 2 ranks, "
                f"--hang-timeout {timeout_s:g}s", "< timeout + 5 s (issue 17)",
                f"p50 {s['p50']:.2f} s, max {s['max']:.2f} s ({len(lat)} runs)",
                "- (torchrun has none; gloo's own timeout is 30 min)",
                c.verdict(s["max"] < timeout_s + 5)))
    c.table("hang begins -> hang_detected (first agent)",
            ["nodes", "--hang-timeout", "runs", "min", "p50", "max", "p50 - timeout",
             "job wall p50"], rows)
    c.write_summary(args.summary_json, board)
    return 0


if __name__ == "__main__":
    sys.exit(main())
