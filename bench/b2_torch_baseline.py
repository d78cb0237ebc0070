#!/usr/bin/python3
"""B2 baselines (a)/(b): torch's c10d DynamicRendezvousHandler x M over one TCPStore.

reference/perf.md §7 B2: the round muster's `b2_rendezvous.py` measures, done by torch's
elastic rendezvous instead. Per (torch version, M): a fresh TCPStore server of that version
(1.13: the classic server; 2.x: libuv, its default), then M handlers
(`torch.distributed.elastic.rendezvous.dynamic_rendezvous.create_handler` with a
`C10dRendezvousBackend`, min = max nodes = M, run as threads of --procs processes of that
torch's Python, bench/helpers/rdzv_torch_load.py), each with its own TCPStore client
connected before the clock, as each torchrun agent has. All threads call next_rendezvous()
at once; metric = first call -> last return (CLOCK_MONOTONIC across processes). Store ops per
agent per round = calls the handler made through its store (counted by a Python dist.Store
wrapper: compare_set, get, set, ...; on the wire torch 1.13's get is two requests, WAIT + GET),
also failed compare_sets and the value bytes moved (the pickled state grows with M). A cell
still running after --cap seconds is reported as "> cap s" and larger M are skipped.
The torch protocol polls: a handler that waits for others sleeps 1 s between state reads, and
each sleeps a random 0-0.3 s before its first join, so ~1 s is its floor at any M.
"""
import argparse
import json
import select
import subprocess
import time

import common as c
import storebench as sb

LOAD = str(c.BENCH / "helpers" / "rdzv_torch_load.py")
_SERVER = ("import sys, time, torch.distributed as d\n"
           "kw = dict(use_libuv=True) if sys.argv[1] == '1' else {}\n"
           "s = d.TCPStore('127.0.0.1', 0, is_master=True, wait_for_workers=False, **kw)\n"
           "print('PORT', s.port, flush=True)\n"
           "time.sleep(1e9)\n")
SETUP_TIMEOUT_S = 300  # creating up to 1024 clients + handlers before the clock


def run_cell(python, libuv, m, procs, cap, run_id):
    """One rendezvous round of M handlers; returns a dict (see summarize)."""
    srv = sb.Server([python, "-c", _SERVER, "1" if libuv else "0"])
    workers = []
    try:
        procs = min(procs, m)
        for i in range(procs):
            h = m // procs + (1 if i < m % procs else 0)
            workers.append(subprocess.Popen([python, LOAD, str(srv.port), run_id, str(m), str(h),
                                             str(cap)], stdin=subprocess.PIPE,
                                            stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                            text=True, start_new_session=True))
        deadline = time.monotonic() + SETUP_TIMEOUT_S
        for w in workers:  # READY lines; a worker that dies prints none
            ready, _, _ = select.select([w.stdout], [], [], max(0, deadline - time.monotonic()))
            line = w.stdout.readline() if ready else "(no READY within the set-up timeout)"
            if line.strip() != "READY":
                return {"error": f"worker not ready: {line.strip()!r} "
                                 f"{w.stderr.read()[-300:] if w.poll() is not None else ''}"}
        cpu0 = srv.cpu_s()
        for w in workers:
            w.stdin.write("GO\n")
            w.stdin.flush()
        outs = []
        for w in workers:
            try:
                out, err = w.communicate(timeout=cap + 60)
            except subprocess.TimeoutExpired:
                return {"error": f"worker did not report within {cap + 60} s"}
            lines = [x for x in out.splitlines() if x.startswith("{")]
            if not lines:
                return {"error": f"worker rc {w.returncode}: {err[-300:]}"}
            outs.append(json.loads(lines[-1]))
        d = {"agents": [a for o in outs for a in o["agents"]],
             "client_cpu_s": sum(o["cpu_s"] for o in outs),
             "server_cpu_s": srv.cpu_s() - cpu0, "server_hwm_mb": srv.rss_kb() / 1024,
             "go": min(o["go"] for o in outs)}
        return summarize(d, m, cap)
    finally:
        for w in workers:
            c.kill_group(w)
        srv.stop()


def summarize(d, m, cap):
    ag = d["agents"]
    done = [a for a in ag if "t1" in a]
    errors = [a["error"] for a in ag if "error" in a]
    d["done"], d["errors"] = len(done), errors
    d["capped"] = len(done) < m and not errors
    if done:
        d["round_s"] = max(a["t1"] for a in done) - min(a["t0"] for a in ag if "t0" in a)
        tot = [sum(a["ops"].values()) for a in done]
        d["ops_mean"], d["ops_max"] = sum(tot) / len(tot), max(tot)
        keys = sorted({k for a in done for k in a["ops"]})
        d["ops_by"] = {k: sum(a["ops"].get(k, 0) for a in done) / len(done) for k in keys}
        d["cas_failed_mean"] = sum(a["cas_failed"] for a in done) / len(done)
        d["kb_mean"] = sum(a["bytes"] for a in done) / len(done) / 1024
        ranks = sorted(a["rank"] for a in done)
        d["ranks_ok"] = ranks == list(range(m)) and all(a["world"] == m for a in done)
    del d["agents"]
    return d


def parse_args():
    ap = argparse.ArgumentParser()
    ap.add_argument("--ms", default="1,4,16,64,256,1024")
    ap.add_argument("--procs", type=int, default=4,
                    help="processes the M handler threads are spread over")
    ap.add_argument("--runs", type=int, default=3,
                    help="runs per cell (one if a run took longer than 20 s); median shown")
    ap.add_argument("--cap", type=float, default=120, help="seconds per cell before giving up")
    ap.add_argument("--max-wait", type=float, default=30,
                    help="seconds to wait for an idle machine per cell")
    ap.add_argument("--torch", default="1,2", help="which torch versions: 1 (1.13), 2 (2.x)")
    c.add_summary_arg(ap)
    return ap.parse_args()


def torch_versions(a):
    """[(row name, python, libuv store?)] for the versions --torch asks for and the box has."""
    versions = []
    if "1" in a.torch.split(","):
        v = c._importable(c.TORCH_PYTHON, "torch")
        if v:
            versions.append((f"torch {v} (classic store)", c.TORCH_PYTHON, False))
        else:
            print(f"# WARNING: no torch importable by {c.TORCH_PYTHON}: 1.13 rows left out")
    if "2" in a.torch.split(","):
        t2 = sb.torch2_python()
        if t2:
            versions.append((f"torch {c._importable(t2, 'torch')} (libuv store)", t2, True))
        else:
            print("# WARNING: no torch 2.x python (TORCH2_PYTHON): 2.x rows left out")
    return versions


def measure_cell(a, name, py, libuv, m):
    """Up to --runs rounds of M handlers; returns (outs, busy before, foreign build mark)."""
    busy = c.wait_quiet(max_wait=a.max_wait)
    foreign = c.foreign_build_running()
    outs = []
    for i in range(a.runs):
        t = time.monotonic()
        outs.append(run_cell(py, libuv, m, a.procs, a.cap, f"b2t{m}r{i}"))
        o = outs[-1]
        print(f"# {name} M={m} run {i}: " + json.dumps(
            {k: v for k, v in o.items() if k != "errors"} | {"errors": o.get(
                "errors", [])[:2]}), flush=True)
        if "error" in o or o["errors"] or o["capped"] or time.monotonic() - t > 20:
            break
    foreign = foreign or c.foreign_build_running()
    return outs, busy, " *" if foreign else ""


def cell_row(a, label, m, outs, busy):
    """(table row, scoreboard figure, whether larger M are skipped) of one cell's runs."""
    o = outs[-1]
    if "error" in o or o["errors"]:
        err = o.get("error") or f"{len(o['errors'])} agents failed: {o['errors'][0]}"
        return [label, m, err] + [""] * 9 + [f"{busy:.0%}"], f"M={m} failed", True
    if o["capped"]:
        return ([label, m, f"> {a.cap:.0f} s ({o['done']}/{m} returned)",
                 "", "", "", "", "", f"{o['server_cpu_s']:.2f}",
                 f"{o['client_cpu_s']:.2f}", f"{o['server_hwm_mb']:.0f}", "",
                 f"{busy:.0%}"], f"M={m} > {a.cap:.0f} s", True)
    outs.sort(key=lambda x: x["round_s"])
    o = outs[len(outs) // 2]
    rng = f"{outs[0]['round_s']:.2f}-{outs[-1]['round_s']:.2f}"
    by = ", ".join(f"{k} {v:.1f}" for k, v in o["ops_by"].items())
    figure = f"M={m} {o['round_s']:.2f} s ({o['ops_mean']:.1f} store ops/agent)"
    return ([label, m, f"{o['round_s']:.2f}", rng, len(outs),
             f"{o['ops_mean']:.1f} / {o['ops_max']}", by,
             f"{o['cas_failed_mean']:.2f}", f"{o['kb_mean']:.1f}",
             f"{o['server_cpu_s']:.2f}", f"{o['client_cpu_s']:.2f}",
             f"{o['server_hwm_mb']:.0f}" + ("" if o["ranks_ok"] else " RANKS WRONG"),
             f"{busy:.0%}"], figure, False)


def run_version(a, name, py, libuv, rows, figures):
    """Every M of one torch version; a cell that fails or hits the cap skips larger M."""
    capped_at = None
    for m in [int(x) for x in a.ms.split(",")]:
        if capped_at:
            rows.append([name, m, f"skipped: M={capped_at} already hit the cap"] + [""] * 10)
            continue
        outs, busy, mark = measure_cell(a, name, py, libuv, m)
        row, figure, capped = cell_row(a, name + mark, m, outs, busy)
        rows.append(row)
        figures.setdefault(name, []).append(figure)
        if capped:
            capped_at = m


def main():
    a = parse_args()
    c.print_header("B2 baseline: torch DynamicRendezvousHandler x M over one TCPStore")
    versions = torch_versions(a)
    rows = []
    figures = {}  # torch name -> ["M=256 1.23 s (n store ops/agent)", ...] for the scoreboard
    for name, py, libuv in versions:
        run_version(a, name, py, libuv, rows, figures)
    c.table(f"B2 baseline: torch DynamicRendezvousHandler x M (threads in {a.procs} processes), "
            "first next_rendezvous() -> last return",
            ["torch", "M", "round s (median)", "range s", "runs", "store ops/agent mean / max",
             "ops/agent by kind", "failed compare_set/agent", "value KB/agent", "server CPU s",
             "client CPU s", "server peak RSS MB", "box busy before"], rows,
            note="* = a foreign build ran during the cell. Store ops are API calls through the "
                 "handler's store (torch 1.13's get = WAIT + GET on the wire). Client CPU = all "
                 "handler processes from GO to their report (Python; competes with the server "
                 "on 2 vCPUs). Ranks checked: 0..M-1 once each, world size M.")
    if figures:  # the two largest M of each version: where the protocol's cost shows
        c.write_summary(a.summary_json, [c.board_row(
            "B2 baseline: torch c10d rendezvous", "- (the baseline for B2)",
            "; ".join(f"{n}: " + ", ".join(f[-2:]) for n, f in figures.items()),
            "- (this row is torch)", "-")])


if __name__ == "__main__":
    main()
