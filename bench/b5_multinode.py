#!/usr/bin/python3
"""B5 multi-node: 4 agents x 2 workers on loopback; one worker exits 137 -> time until every
node's workers are respawned (reference/perf.md §7 B5, multi-agent variant).

Workers are bench/helpers/bw.c with BW_RANK_VAR=RANK (global rank 0 fails, once, DELAY ms +
uniform 0..JITTER ms after its start) and BW_FAIL_CODE=137. Every worker stamps its start
(CLOCK_MONOTONIC) into one shared file. Per run: start 4 agents at once, wait for the 8 first
starts, rank 0 stamps t_fail and exits 137, wait for 8 further starts (the new incarnation on
all 4 nodes), then kill every agent. Metric: last new start - t_fail (and first new start -
t_fail). A run counts only if all 8 first-incarnation workers started before t_fail.

muster: `muster run --nnodes 4 --nproc-per-node 2 --rdzv-endpoint 127.0.0.1:P --rdzv-id ID
--max-restarts 3` (the agent that binds P first hosts the gRPC rendezvous).
torchrun 1.13: `--nnodes 4 --nproc_per_node 2 --rdzv_backend c10d --rdzv_endpoint 127.0.0.1:P
--max_restarts 3 --monitor_interval 0.1` (the failing node's agent restarts; the other three
see num_nodes_waiting > 0 at their next monitor tick and re-rendezvous).
"""
import argparse
import os
import socket
import subprocess
import time

import common as c
import storebench as sb

NODES, NPROC = 4, 2


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    p = s.getsockname()[1]
    s.close()
    return p


def agent_argv(kind, port, rid, cmd):
    if kind == "muster":
        return [c.MUSTER, "run", "--nnodes", str(NODES), "--nproc-per-node", str(NPROC),
                "--rdzv-endpoint", f"127.0.0.1:{port}", "--rdzv-id", rid, "--max-restarts", "3",
                "--no-python", *cmd]
    return [c.TORCH_PYTHON, c.TORCHRUN113, "--nnodes", str(NODES), "--nproc_per_node", str(NPROC),
            "--rdzv_backend", "c10d", "--rdzv_endpoint", f"127.0.0.1:{port}", "--rdzv_id", rid,
            "--max_restarts", "3", "--monitor_interval", "0.1", "--no_python", *cmd]


def read(f):
    ev = []
    try:
        with open(f) as fh:
            for line in fh:
                p = line.split()
                if len(p) == 5:
                    ev.append((p[0], int(p[1]), int(p[2]), int(p[3]), int(p[4])))
    except FileNotFoundError:
        pass
    return ev


def one_run(kind, i, delay_ms, jitter_ms, timeout):
    d = c.tmpdir()
    f = os.path.join(d, "stamps")
    port = free_port()
    cmd = [c.helpers()["bw"], f, "0", str(delay_ms), "1", "0", str(jitter_ms)]
    env = dict(os.environ, BW_RANK_VAR="RANK", BW_FAIL_CODE="137")
    env.pop("MUSTER_TOKEN", None)
    procs = []
    try:
        for _ in range(NODES):
            procs.append(subprocess.Popen(agent_argv(kind, port, f"b5mn{i}", cmd), cwd=d, env=env,
                                          stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                          start_new_session=True))
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            ev = read(f)
            fails = [e for e in ev if e[0] == "fail"]
            if fails:
                tf = fails[0][4]
                after = [e[4] for e in ev if e[0] == "start" and e[4] > tf]
                if len(after) >= NODES * NPROC:
                    break
            time.sleep(0.01)
        ev = read(f)
        fails = [e for e in ev if e[0] == "fail"]
        if not fails:
            return {"error": "no failure stamp (agents did not start workers?)"}
        tf = fails[0][4]
        before = [e[4] for e in ev if e[0] == "start" and e[4] < tf]
        after = sorted(e[4] for e in ev if e[0] == "start" and e[4] > tf)
        if len(before) < NODES * NPROC:
            return {"error": f"only {len(before)} workers started before t_fail"}
        if len(after) < NODES * NPROC:
            return {"error": f"only {len(after)} workers respawned within {timeout} s"}
        return {"first": (after[0] - tf) / 1e6, "all": (after[NODES * NPROC - 1] - tf) / 1e6}
    finally:
        for p in procs:
            c.kill_group(p)
        c.rmtree(d)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=30, help="muster runs (1 failure each)")
    ap.add_argument("--torch-runs", type=int, default=5)
    ap.add_argument("--max-wait", type=float, default=30)
    c.add_summary_arg(ap)
    a = ap.parse_args()
    sb.bound_quiet_wait(a.max_wait)
    c.print_header("B5 multi-node: 4 agents x 2 workers, one worker exits 137 -> all 8 respawned")
    c.check_binaries()
    rows = []
    configs = [("muster", "muster", a.runs, 300, 0, 20)]
    if c._importable(c.TORCH_PYTHON, "torch"):
        configs.append(("torchrun 1.13 c10d mi=0.1", "torchrun113", a.torch_runs, 3000, 100, 60))
    base = None
    alls = {}  # kind -> summary of "all 8 respawned"
    for name, kind, runs, delay, jit, timeout in configs:
        def measure():
            return [one_run(kind, i, delay, jit, timeout) for i in range(runs)]
        outs, dist = c.quiet_measure(measure, name)
        ok = [o for o in outs if "error" not in o]
        errs = [o["error"] for o in outs if "error" in o]
        for metric, label in (("first", "first worker respawned"), ("all", "all 8 respawned")):
            s = c.summary([o[metric] for o in ok])
            if metric == "all" and s["n"]:
                alls[kind] = (name, s)
            if kind == "muster" and metric == "all":
                base = s["p50"]
            tgt = ""
            if kind == "muster" and metric == "all":
                tgt = "< 50 ms: " + ("MET" if s["p99"] < 50 else "MISSED") + " (p99)"
            rows.append([name + (" *" if dist else ""), label, s["n"], c.fmt(s["p50"]),
                         c.fmt(s["p99"]), c.fmt(s["max"]),
                         c.ratio(s["p50"], base) if metric == "all" and base else "-", tgt])
        if errs:
            rows.append([name, f"failed runs: {len(errs)} ({errs[0]})", "", "", "", "", "", ""])
    c.table("B5 multi-node respawn (t_start of the new incarnation on all 8 - t_fail)",
            ["agent", "metric (from t_fail)", "runs", "p50 ms", "p99 ms", "max ms",
             "p50 / muster", "target"], rows,
            note="* = a foreign build ran during the measurement. One failure per run (fresh "
                 "agents per run); default scheduling (4 agents + 8 workers cannot share one "
                 "pinned CPU meaningfully).")
    c.write_summary(a.summary_json, board_rows(alls))


def board_rows(alls):
    if "muster" not in alls:
        return []
    s = alls["muster"][1]
    vs = "- (no torchrun in this run)"
    if "torchrun113" in alls:
        name, t = alls["torchrun113"]
        vs = f"{c.ratio(t['p50'], s['p50'])} ({name} p50 {c.fmt(t['p50'])} ms)"
    return [c.board_row(f"B5 multi-node respawn, {NODES} agents x {NPROC} workers",
                        "< 50 ms (p99)",
                        f"all {NODES * NPROC} respawned: p50 {c.fmt(s['p50'])} ms, p99 "
                        f"{c.fmt(s['p99'])} ms ({s['n']} runs)", vs, c.verdict(s["p99"] < 50))]


if __name__ == "__main__":
    main()
