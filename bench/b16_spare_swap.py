#!/usr/bin/python3
"""B16 (issue 30 items 2 and 7): node loss -> the next round's workers running, with a hot
spare and without one. Agents on this machine, one worker each (/bin/sh noting its WORLD_SIZE
and the wall clock when it starts, then waiting). Node 1 of a running round is SIGKILLed (the
agent; its worker goes with its process group); the figure is the time from the kill to the
first worker of the next round that noted its start.

Variants, on muster's own rendezvous (gRPC, node 0 serves) and on etcd (1 member, tmpfs,
heartbeat_interval=1s,heartbeat_misses=2 as tests/integration/test_spares.py):
  spare          --nnodes 2 --spares 1, 3 agents: the spare takes node 1's place, WORLD_SIZE 2
  elastic shrink --nnodes 1:2, 2 agents: the survivor runs on alone, WORLD_SIZE 1
A fixed --nnodes 2 without a spare has no next round: the job ends with 138 and waits for
whatever restarts the agents (the table notes the time to that exit).
"""
import argparse
import os
import pathlib
import signal
import subprocess
import sys
import tempfile
import time

import common as c

sys.path.insert(0, str(c.REPO / "tests" / "integration"))
from etcd_cluster import ETCD, EtcdCluster  # noqa: E402
from multinode import free_port  # noqa: E402

ETCD_CONF = "heartbeat_interval=1s,heartbeat_misses=2,join_timeout=60s"


def worker(log):
    return ["--no-python", "/bin/sh", "-c",
            f'echo "$ROLE_NAME $WORLD_SIZE $(date +%s.%N)" >> {log}; exec sleep 600']


def lines(log):
    try:
        return [line.split() for line in log.read_text().splitlines()]
    except FileNotFoundError:
        return []


def wait_until(pred, timeout, what):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if pred():
            return
        time.sleep(0.002)
    raise RuntimeError(f"timed out after {timeout}s waiting for {what}")


def one_run(backend, variant, tmp):
    """Seconds from SIGKILL of node 1 to the next round's first worker (or to the job's exit
    for "fixed, no spare"), and that round's WORLD_SIZE."""
    log = tmp / "rounds"
    etcd = EtcdCluster(1) if backend == "etcd" else None
    if etcd:
        where = ["--rdzv-backend", "etcd", "--rdzv-endpoint", etcd.endpoints]
        conf = ETCD_CONF
    else:
        where, conf = ["--rdzv-endpoint", f"127.0.0.1:{free_port()}"], "join_timeout=60s"

    nnodes = {"spare": ["--nnodes", "2", "--spares", "1"], "elastic shrink":
              ["--nnodes", "1:2"],
              "fixed, no spare": ["--nnodes", "2"]}[variant]
    procs = {}

    def start(role, *extra):
        procs[role] = subprocess.Popen(
            [c.MUSTER, "run", *where, "--rdzv-conf", conf, "--rdzv-id", "b16", "--role", role,
             *nnodes,
             "--nproc-per-node", "1", "--max-restarts", "0", *extra, *worker(log)],
            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
            start_new_session=True)
    try:
        start("node0", *([] if etcd else ["--node-rank", "0"]))
        if etcd:
            time.sleep(1)  # node0 coordinates: its key is the oldest
        start("node1", *([] if etcd else ["--node-rank", "1"]))
        wait_until(lambda: len(lines(log)) == 2, 60, "round 1")
        if variant == "spare":
            start("spare")
            # The spare is in (status lists it) before the kill.
            wait_until(lambda: "Spare" in status_text(where), 60, "the spare listed")
        t_kill = time.time()
        os.killpg(procs["node1"].pid, signal.SIGKILL)
        if variant == "fixed, no spare":
            procs["node0"].wait(timeout=120)
            return time.time() - t_kill, procs["node0"].returncode
        wait_until(lambda: len(lines(log)) >= 3, 120, "the next round")
        role, world, started = lines(log)[2]
        return float(started) - t_kill, int(world)
    finally:
        for p in procs.values():
            if p.poll() is None:
                os.killpg(p.pid, signal.SIGKILL)
                p.wait()
        if etcd:
            etcd.stop()


def status_text(where):
    r = subprocess.run([c.MUSTER, "status", *where, "--rdzv-id", "b16"], capture_output=True,
                       text=True, timeout=30)
    return r.stdout if r.returncode == 0 else ""


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--backends", default="grpc,etcd")
    c.add_summary_arg(ap)
    args = ap.parse_args()
    c.check_binaries()
    c.print_header("B16 node loss -> next round running, with a spare and without")
    backends = [b for b in args.backends.split(",") if b != "etcd" or os.path.exists(ETCD)]
    variants = ["spare", "elastic shrink", "fixed, no spare"]
    results = {}
    for _ in range(args.runs):  # interleaved, so that the load hits every variant alike
        for backend in backends:
            for variant in variants:
                with tempfile.TemporaryDirectory() as tmp:
                    s, what = one_run(backend, variant, pathlib.Path(tmp))
                r = results.setdefault((backend, variant), {"ms": [], "what": set()})
                r["ms"].append(s * 1e3)
                r["what"].add(what)
    rows, board = [], []
    for backend in backends:
        for variant in variants:
            r = results[(backend, variant)]
            s = c.summary(r["ms"])
            what = ",".join(map(str, sorted(r["what"])))
            rows.append([backend, variant,
                         f"exit {what}" if variant == "fixed, no spare" else f"WORLD_SIZE {what}",
                         s["n"], c.fmt(s["p50"]), c.fmt(max(r["ms"]))])
    c.table("SIGKILL of node 1 -> the next round's first worker started (fixed, no spare: the "
            "surviving agent's exit)",
            ["backend", "variant", "next round", "runs", "p50", "max"], rows)
    figure = "; ".join(
        f"{b}: spare (WORLD_SIZE 2) p50 {c.fmt(c.pct(results[(b, 'spare')]['ms'], 50))} ms, "
        f"elastic shrink (WORLD_SIZE 1) {c.fmt(c.pct(results[(b, 'elastic shrink')]['ms'], 50))}"
        f" ms" for b in backends) + f" ({args.runs} runs each; fixed --nnodes 2 without a " \
        "spare: no next round, the job ends 138)"
    board.append(c.board_row("B16 node loss -> next round running (spare vs none)",
                             "- (issue 30 item 7 sets none: measured)", figure,
                             "- (torchrun has no spares: pytorch#114097)", "-"))
    c.write_summary(args.summary_json, board)
    return 0


if __name__ == "__main__":
    sys.exit(main())
