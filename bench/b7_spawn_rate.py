#!/usr/bin/python3
"""B7: spawn throughput for K local workers, and its (in)dependence on agent RSS
(reference/perf.md §7 B7).

Every launcher starts K fake_worker `stamp=FILE exit=0` processes. Spawn rate =
(K - 1) / (last worker start - first worker start), from the workers' own CLOCK_MONOTONIC
stamps, so agent start-up is excluded and every launcher is judged by the same clock.
Launchers:
  muster                  `muster run --nproc-per-node K` (clone(CLONE_VM|CLONE_VFORK) + exec)
  muster + 1 GiB ballast  same, with bench/helpers/ballast_preload.c LD_PRELOADed: before main()
                          it mallocs and touches 1 GiB in the agent (only in the process named
                          muster; it removes itself from the environment so workers stay small).
                          A fork()-based agent would slow down ~50x here.
  posix_spawn / vfork / fork+exec
                          bench/helpers/spawn_baseline.c: a C loop starting K children back to back,
                          then reaping them (the physical limit), with and without 1 GiB ballast.
  torchrun                Python subprocess.Popen per worker.
Also reported: exec -> all K started and exec -> agent exit (all reaped) for the agents, and
loop begin -> all reaped for the C baselines.
"""
import argparse
import os
import subprocess
import time

import common as c

BALLAST_MB = 1024


def stamps_rate(path, k):
    st = c.read_stamps(path)
    if len(st) != k:
        return None, None, st
    ts = sorted(s[3] for s in st)
    rate = (k - 1) / ((ts[-1] - ts[0]) / 1e9) if k > 1 else float("nan")
    return rate, ts, st


def run_agent(agent, k, ballast, pinned):
    d = c.tmpdir()
    f = os.path.join(d, "stamps")
    env = agent.environ() or dict(os.environ)
    if ballast:
        env["LD_PRELOAD"] = c.helpers()["ballast_preload"]
        env["BENCH_BALLAST_MB"] = str(BALLAST_MB)
    try:
        t0, rc, err, _ = c.run_timed(agent.argv(k, [c.FAKE, f"stamp={f}", "exit=0"]),
                                     pinned=pinned, env=env, cwd=d, timeout=300)
        t_exit = time.monotonic_ns()
        rate, ts, st = stamps_rate(f, k)
        if rc != 0 or rate is None:
            print(f"# WARNING {agent.name} K={k}: rc={rc}, {len(st)}/{k} stamps: {err[-300:]}")
            return None
        return {"rate": rate, "started_ms": (ts[-1] - t0) / 1e6, "done_ms": (t_exit - t0) / 1e6}
    finally:
        c.rmtree(d)


def run_baseline(mode, k, ballast, pinned):
    d = c.tmpdir()
    f = os.path.join(d, "stamps")
    try:
        out = subprocess.run(c.pinned_prefix(pinned) + [
            c.helpers()["spawn_baseline"], mode, str(k), str(BALLAST_MB if ballast else 0),
            c.FAKE, f"stamp={f}", "exit=0"], capture_output=True, text=True, check=True,
            timeout=600).stdout.split()
        t_begin, _t_spawned, t_reaped = (int(x) for x in out)
        rate, ts, st = stamps_rate(f, k)
        if rate is None:
            print(f"# WARNING {mode} K={k}: {len(st)}/{k} stamps")
            return None
        return {"rate": rate, "started_ms": (ts[-1] - t_begin) / 1e6,
                "done_ms": (t_reaped - t_begin) / 1e6}
    finally:
        c.rmtree(d)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=20, help="runs per muster/C configuration")
    ap.add_argument("--torch-runs", type=int, default=3)
    ap.add_argument("--ks", default="8,64,256")
    c.add_summary_arg(ap)
    a = ap.parse_args()
    c.print_header("B7 spawn throughput")
    c.check_binaries()
    agents = c.agents(tmpfs_variant=True)
    muster = agents[0]
    muster_shm = [ag for ag in agents if ag.kind == "muster" and ag.env]
    torch01 = [ag for ag in agents if ag.is_torchrun and ag.mi != 5]
    rates = {}  # (pinned, k, launcher) -> p50 rate
    for pinned in (False, True):
        rows = []
        for k in [int(x) for x in a.ks.split(",")]:
            configs = [("muster", lambda k=k: run_agent(muster, k, False, pinned), a.runs),
                       ("muster + 1 GiB ballast",
                        lambda k=k: run_agent(muster, k, True, pinned), max(5, a.runs // 2)),
                       ("posix_spawn loop (C)",
                        lambda k=k: run_baseline("posix_spawn", k, False, pinned), a.runs),
                       ] + [(ag.name, lambda k=k, ag=ag: run_agent(ag, k, False, pinned), a.runs)
                            for ag in muster_shm] + [
                       ("posix_spawn loop (C) + 1 GiB",
                        lambda k=k: run_baseline("posix_spawn", k, True, pinned),
                        max(5, a.runs // 2)),
                       ("vfork+exec loop (C)",
                        lambda k=k: run_baseline("vfork", k, False, pinned), a.runs),
                       ("fork+exec loop (C)",
                        lambda k=k: run_baseline("fork", k, False, pinned), a.runs),
                       ("fork+exec loop (C) + 1 GiB",
                        lambda k=k: run_baseline("fork", k, True, pinned), 3 if k >= 256 else 5)]
            if not pinned:
                for ag in torch01:
                    configs.append((ag.name, lambda k=k, ag=ag: run_agent(ag, k, False, False),
                                    a.torch_runs))
            res, disturbed = {}, {}
            for name, fn, runs in configs:
                xs, dist = c.quiet_measure(
                    lambda: [x for x in (fn() for _ in range(runs)) if x is not None],
                    f"{name} K={k}")
                res[name] = xs
                disturbed[name] = dist
            ref = c.pct([x["rate"] for x in res["posix_spawn loop (C)"]], 50)
            for name, _, _ in configs:
                xs = res[name]
                if not xs:
                    continue
                rs = [x["rate"] for x in xs]
                r50 = c.pct(rs, 50)
                rates[(pinned, k, name)] = r50
                target = ""
                if name.startswith("muster"):
                    target = "≥ 80 %: " + ("MET" if r50 >= 0.8 * ref else "MISSED")
                rows.append([k, name + (" *" if disturbed[name] else ""), len(xs), f"{r50:,.0f}", f"{c.pct(rs, 1):,.0f}",
                             f"{100 * r50 / ref:.0f} %",
                             c.fmt(c.pct([x["started_ms"] for x in xs], 50)),
                             c.fmt(c.pct([x["done_ms"] for x in xs], 50)), target])
        c.table(f"B7 spawn rate, {'pinned: taskset -c 0' if pinned else 'default scheduling'}",
                ["K", "launcher", "runs", "rate p50 /s", "rate p1 (worst) /s",
                 "p50 rate vs posix_spawn", "start -> all started p50 ms",
                 "start -> all reaped p50 ms", "target (muster rate ≥ 80 % of posix_spawn)"],
                rows,
                note="* = a foreign build ran during the measurement. rate = (K-1)/(last - first worker start stamp). 'start' = exec of the agent "
                     "(agents) or the first spawn call (C loops); the agents' times include "
                     "their own start-up (and, with ballast, touching 1 GiB).")
    c.write_summary(a.summary_json, board_rows(rates, [ag.name for ag in torch01]))


def board_rows(rates, torch_names):
    """Scoreboard rows: pinned rate at K=64 and K=256, and the ballast's effect."""
    rows = []
    ref = "posix_spawn loop (C)"
    for k in (64, 256):
        r, base = rates.get((True, k, "muster")), rates.get((True, k, ref))
        if not r or not base:
            continue
        vs = "- (no torchrun in this run)"
        for t in torch_names:
            tr, tb = rates.get((False, k, t)), rates.get((False, k, ref))
            if tr and tb:  # the first torchrun (1.13) when both versions ran
                vs = f"{t}: {tr:,.0f}/s = {100 * tr / tb:.0f} % of posix_spawn (default sched.)"
                break
        rows.append(c.board_row(
            f"B7 spawn rate, K={k}, pinned", ">= 80 % of a posix_spawn loop",
            f"{r:,.0f}/s = {100 * r / base:.0f} % of posix_spawn loop ({base:,.0f}/s)", vs,
            c.verdict(r >= 0.8 * base)))
    drops, ok = [], True
    for pinned, label in ((True, "pinned"), (False, "default")):
        part = []
        for k in sorted({k for (_, k, _) in rates}):
            plain, heavy = rates.get((pinned, k, "muster")), \
                rates.get((pinned, k, "muster + 1 GiB ballast"))
            if plain and heavy:
                part.append(f"K={k} {100 * (heavy / plain - 1):+.0f} %")
                ok = ok and heavy >= 0.8 * plain
        if part:
            drops.append(f"{label} " + ", ".join(part))
    fork = [100 * (rates[(True, k, "fork+exec loop (C) + 1 GiB")] /
                   rates[(True, k, "fork+exec loop (C)")] - 1)
            for (p, k, n) in rates if p and n == "fork+exec loop (C) + 1 GiB"
            and rates.get((True, k, "fork+exec loop (C)"))]
    if drops:
        fig = "rate with 1 GiB in the agent: " + "; ".join(drops)
        if fork:
            fig += f"; fork+exec loop (pinned) {min(fork):+.0f} %" + \
                (f" to {max(fork):+.0f} %" if round(max(fork)) != round(min(fork)) else "")
        rows.append(c.board_row("B7 RSS independence (1 GiB ballast)",
                                "no dependence on agent RSS (ballast rate >= 80 % of plain)",
                                fig, "-", c.verdict(ok)))
    return rows


if __name__ == "__main__":
    main()
