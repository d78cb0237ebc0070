#!/usr/bin/python3
"""B15 (issue 30 items 1 and 7): the health gate's cost per round. One node, N fake workers
that exit 1 at once, `--max-restarts R`: R + 1 rounds, each entered through the gate
(agent/health/health_gate.h). Variants: the gate with nothing to check
(`--health-min-free-space 0`), the default (the free-space check of the run directory),
and the default plus `--health-check true` (one /bin/sh through launch/captured_run.h).
Figures: each check's own duration (`took_s` of the `health_check` events in --event-log,
p50/p99 over every round of every run) and the job's wall time per round, whose
difference from the variant without checks is what a round pays in all.
"""
import argparse
import json
import os
import pathlib
import subprocess
import sys
import tempfile
import time

import common as c

VARIANTS = [("no checks", ["--health-min-free-space", "0"]),
            ("free space (default)", []),
            ("free space + --health-check true", ["--health-check", "true"])]


def one_run(flags, workers, restarts, tmp):
    """([took_s of every check], wall s per round) of one job."""
    log = tmp / "events.jsonl"
    argv = [c.MUSTER, "run", "--nproc-per-node", str(workers), "--max-restarts", str(restarts),
            "--event-log", str(log), *flags, "--no-python", c.FAKE, "exit=1"]
    t0 = time.monotonic()
    p = subprocess.run(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                       timeout=600, env=dict(os.environ))
    wall = time.monotonic() - t0
    assert p.returncode == 1, p.stderr[-2000:]
    checks = [json.loads(line) for line in log.read_text().splitlines()]
    took = [e["took_s"] for e in checks if e["event"] == "health_check"]
    # One per round, and one more after the last failure: the agent reports its workers
    # stopped before the job says it is over.
    assert len(took) >= restarts + 1, (len(took), restarts)
    return took, wall / (restarts + 1)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--restarts", type=int, default=20)
    ap.add_argument("--workers", type=int, default=8)
    c.add_summary_arg(ap)
    args = ap.parse_args()
    c.check_binaries()
    c.print_header("B15 health gate cost per round")
    results = {}
    for _ in range(args.runs):  # interleaved, so that the load hits every variant alike
        for name, flags in VARIANTS:
            with tempfile.TemporaryDirectory() as tmp:
                took, per_round = one_run(flags, args.workers, args.restarts, pathlib.Path(tmp))
            r = results.setdefault(name, {"took": [], "round": []})
            r["took"] += [t * 1e6 for t in took]  # us
            r["round"].append(per_round * 1e3)
    base = c.pct(results[VARIANTS[0][0]]["round"], 50)
    rows, board, deltas = [], [], []
    for name, _ in VARIANTS:
        took, rounds = c.summary(results[name]["took"]), c.pct(results[name]["round"], 50)
        rows.append([name, took["n"], f"{took['p50']:.1f}", f"{took['p99']:.1f}", c.fmt(rounds),
                     f"{rounds - base:+.2f}"])
        if name != VARIANTS[0][0]:
            deltas.append(f"{rounds - base:+.2f} ms")
    c.table(f"gate per round: {args.workers} workers, {args.restarts} restarts, {args.runs} runs",
            ["checks", "checks run", "check p50 us", "check p99 us", "wall per round p50 ms",
             "vs no checks ms"], rows)
    deltas = " / ".join(deltas)
    default = c.summary(results[VARIANTS[1][0]]["took"])
    command = c.summary(results[VARIANTS[2][0]]["took"])
    board.append(c.board_row(
        f"B15 health gate per round, 1 node x {args.workers} workers",
        "- (issue 30 item 7 sets none: measured)",
        f"free space: p50 {default['p50']:.1f} / p99 {default['p99']:.1f} us; "
        f"+ --health-check true: p50 {command['p50'] / 1e3:.2f} / p99 {command['p99'] / 1e3:.2f} ms "
        f"({command['n']} checks); wall per round vs no checks {deltas}",
        "- (torchrun has none)", "-"))
    c.write_summary(args.summary_json, board)
    return 0


if __name__ == "__main__":
    sys.exit(main())
