#!/usr/bin/python3
"""B5: worker failure -> detection -> whole group respawned (reference/perf.md §7 B5).

Workers are bench/helpers/bw.c. In every attempt but the last, local rank 0 waits DELAY ms
(so that every sibling has started; for torchrun plus a uniform random 0..mi jitter, so that
the failure is not phase-locked to its monitor loop), stamps t_fail and _exit(143) (a restartable code for
both agents); siblings block in pause() with a SIGTERM handler that stamps t_term. One agent
run with --max-restarts R yields R samples:

  stop signal seen  = first t_term of the failed attempt - t_fail. This is the detection
                      proxy: it is an UPPER BOUND on detection (exit -> agent notices), since it
                      also includes the agent's failure handling, kill() and the signal wakeup
                      of the sibling. With N=1 there are no siblings, so the failing rank forks
                      a probe child that stays in its process group: muster signals the whole
                      group (kill(-pgid)), so the probe sees the same stop signal. (torchrun
                      1.13 signals only the worker pid, so N=1 torchrun rows have no probe.)
  first respawned   = first t_start of the next attempt - t_fail
  all respawned     = last t_start of the next attempt - t_fail  (the issue's "respawn" metric)

Injection (b) external SIGKILL and (c) hang are not covered here.
"""
import argparse
import collections
import os

import common as c


def one_run(agent, n, pinned, restarts, delay_ms, probe, jitter_ms=0):
    d = c.tmpdir()
    f = os.path.join(d, "stamps")
    cmd = [c.helpers()["bw"], f, "0", str(delay_ms), str(restarts), "1" if probe else "0",
           str(jitter_ms)]
    try:
        t0, rc, err, _ = c.run_timed(agent.argv(n, cmd, max_restarts=restarts), pinned=pinned,
                                     cwd=d, timeout=900, env=agent.environ())
        if rc != 0:
            print(f"# WARNING {agent.name} N={n}: exit {rc}: {err[-400:]}")
        ev = collections.defaultdict(list)  # (kind, attempt) -> [ns]
        with open(f) as fh:
            for line in fh:
                kind, _rank, att, _pid, ns = line.split()
                ev[(kind, int(att))].append(int(ns))
        out = {"detect": [], "first": [], "all": [], "dropped": 0}
        for a in range(restarts):
            fail = ev.get(("fail", a))
            starts_a = ev.get(("start", a), [])
            nxt = ev.get(("start", a + 1), [])
            if not fail or len(nxt) != n or len(starts_a) != n or max(starts_a) > fail[0]:
                # a sibling had not started when rank 0 failed, or stamps are missing
                out["dropped"] += 1
                continue
            tf = fail[0]
            sig = ev.get(("term", a), []) + ev.get(("probe", a), [])
            if sig:
                out["detect"].append((min(sig) - tf) / 1e6)
            out["first"].append((min(nxt) - tf) / 1e6)
            out["all"].append((max(nxt) - tf) / 1e6)
        return out
    finally:
        c.rmtree(d)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=5, help="muster agent runs per config")
    ap.add_argument("--restarts", type=int, default=200, help="muster restarts (samples) per run")
    ap.add_argument("--torch-restarts", type=int, default=30, help="torchrun mi=0.1 samples")
    ap.add_argument("--slow-restarts", type=int, default=3, help="torchrun mi=5 samples")
    ap.add_argument("--ns", default="1,8")
    c.add_summary_arg(ap)
    a = ap.parse_args()
    c.print_header("B5 failure -> detection -> all workers respawned")
    c.check_binaries()
    agents = c.agents(tmpfs_variant=True)
    stats = {}  # (pinned, n, agent) -> {metric: [ms]} of the run shown
    for pinned in (False, True):
        rows = []
        for n in [int(x) for x in a.ns.split(",")]:
            base = {}
            for ag in agents:
                if ag.kind == "muster":
                    runs, restarts, delay, jit = (a.runs if not ag.env else min(a.runs, 3)), \
                        a.restarts, 30, 0
                elif ag.mi == 5:
                    runs, restarts, delay, jit = (0 if pinned else 1), a.slow_restarts, 200, 5000
                else:
                    runs, restarts, delay, jit = (1 if (not pinned or n == 8) else 0), \
                        a.torch_restarts, 200, 100
                if runs == 0:
                    continue
                probe = n == 1 and not ag.is_torchrun

                def measure():
                    return [one_run(ag, n, pinned, restarts, delay, probe, jit)
                            for _ in range(runs)]
                outs, dist = c.quiet_measure(measure, f"{ag.name} N={n}")
                pooled = {k: sum((o[k] for o in outs), []) for k in ("detect", "first", "all")}
                dropped = sum(o["dropped"] for o in outs)
                run_p50 = [c.pct(o["all"], 50) for o in outs if o["all"]]
                # perf.md §7: run each configuration 5x, report the median run (robust to a
                # run disturbed by other load on this shared 2-core box)
                if len(outs) >= 3:
                    ranked = sorted((o for o in outs if o["all"]),
                                    key=lambda o: c.pct(o["all"], 50))
                    acc = ranked[len(ranked) // 2]
                    which = f"median run of {len(outs)}"
                else:
                    acc = pooled
                    which = f"{len(outs)} run(s) pooled"
                stats[(pinned, n, ag)] = acc
                name = ag.name + (" *" if dist else "")
                for metric, label in (("detect", "stop signal seen (detect bound)"),
                                      ("first", "first worker respawned"),
                                      ("all", "all N respawned")):
                    s = c.summary(acc[metric])
                    if ag.kind == "muster" and metric not in base:
                        base[metric] = s["p50"]
                    target = ""
                    if ag.kind == "muster" and not ag.env and metric == "detect":
                        target = "p99 < 1 ms: " + ("MET" if s["p99"] < 1 else "MISSED") + \
                            " (bound)"
                    if ag.kind == "muster" and not ag.env and metric == "all" and n == 8:
                        target = "< 10 ms: " + ("MET" if s["p99"] < 10 else "MISSED") + " (p99)"
                    rows.append([n, name, label, s["n"], c.fmt(s["p50"]), c.fmt(s["p99"]),
                                 c.fmt(s["max"]),
                                 c.ratio(s["p50"], base.get(metric)) if base.get(metric) else "-",
                                 target])
                spread = (f"{min(run_p50):.3f}-{max(run_p50):.3f}" if len(run_p50) > 1 else "-")
                ps = c.summary(pooled["all"])
                rows.append([n, name, f"({which}; dropped {dropped}; per-run p50 of 'all' "
                             f"{spread} ms; all runs pooled: n={ps['n']} p50 {c.fmt(ps['p50'])} "
                             f"p99 {c.fmt(ps['p99'])} max {c.fmt(ps['max'])})",
                             "", "", "", "", "", ""])
        c.table(f"B5 failure -> respawn, {'pinned: taskset -c 0' if pinned else 'default scheduling'}",
                ["N", "agent", "metric (from t_fail)", "samples", "p50 ms", "p99 ms", "max ms",
                 "p50 / muster p50", "target"], rows,
                note="* = a foreign build ran during the measurement. muster: 5 runs x R restarts, the "
                     "median run (by p50 of 'all N respawned') is shown, pooled numbers in the "
                     "info row; torchrun: 1 run; mi=5: few samples (~5 s each).")
    c.write_summary(a.summary_json, board_rows(stats, agents))


def p50_p99(stats, key, metric):
    s = c.summary(stats[key][metric]) if key in stats else {"n": 0}
    return s if s["n"] else None


def board_rows(stats, agents):
    """Scoreboard rows: respawn of all N=8 and the detection bound at N=8 and N=1."""
    muster = agents[0]
    torch = next((ag for ag in agents if ag.is_torchrun and ag.mi != 5), None)
    rows = []
    for n, metric, name, limit, target in (
            (8, "all", "B5 respawn, N=8 (all 8 running again)", 10, "< 10 ms (p99)"),
            (8, "detect", "B5 detection bound, N=8 (stop signal seen)", 1, "< 1 ms (p99)"),
            (1, "detect", "B5 detection bound, N=1 (stop signal seen)", 1, "< 1 ms (p99)")):
        s = p50_p99(stats, (False, n, muster), metric)
        if not s:
            continue
        fig = f"p50 {c.fmt(s['p50'])} ms, p99 {c.fmt(s['p99'])} ms"
        sp = p50_p99(stats, (True, n, muster), metric)
        if sp:
            fig += f"; pinned p50 {c.fmt(sp['p50'])} / p99 {c.fmt(sp['p99'])} ms"
        st = p50_p99(stats, (False, n, torch), metric) if torch else None
        vs = (f"{c.ratio(st['p50'], s['p50'])} ({torch.name} p50 {c.fmt(st['p50'])} ms)"
              if st else "- (no torchrun sample in this run)")
        rows.append(c.board_row(name, target, fig, vs, c.verdict(s["p99"] < limit)))
    return rows


if __name__ == "__main__":
    main()
