#!/usr/bin/python3
"""B8: SIGTERM to the agent -> all workers reaped -> agent exit (reference/perf.md §7 B8).

The agent runs N=8 fake_worker workers; once all have stamped and 100 ms have passed, the
driver takes t0 = CLOCK_MONOTONIC, sends SIGTERM to the agent and blocks in waitpid(agent);
metrics: "all dead" = the last worker's pidfd (opened by the driver) turns readable - t0,
and "agent exit" = waitpid(agent) returns - t0. Both agents reap all workers before exiting,
so "agent exit" is an upper bound for "all reaped" (it also includes the agent's own
teardown, e.g. removing its temporary log directory, and the driver's wake-up).
  exit-at-once  workers `stamp=F sleep=-1`: default SIGTERM action, they die immediately.
  ignore-term   workers `stamp=F ignore-term sleep=-1`: the agent must wait its grace period
                and SIGKILL them. muster: --shutdown-timeout 1s, overshoot = exit - t0 - 1 s.
                torchrun 1.13 has no such flag: its grace period is a hard-coded 30 s
                (SubprocessContext._close(timeout=30)), so it gets 2 runs, overshoot vs 30 s.
"""
import argparse
import os
import select
import signal
import time

import common as c


def one_run(agent, n, ignore_term, pinned, extra=()):
    d = c.tmpdir()
    stamps = os.path.join(d, "stamps")
    cmd = [c.FAKE, f"stamp={stamps}"] + (["ignore-term"] if ignore_term else []) + ["sleep=-1"]
    box = {}

    def during(p):
        if not c.wait_lines(stamps, n, 120):
            box["error"] = "workers did not start"
            c.kill_group(p)
            return
        time.sleep(0.1)
        fds = [os.pidfd_open(s[2]) for s in c.read_stamps(stamps)]
        poller = select.poll()
        for fd in fds:
            poller.register(fd, select.POLLIN)
        left = len(fds)
        box["t0"] = time.monotonic_ns()
        os.kill(p.pid, signal.SIGTERM)
        while left:  # pidfds turn readable when the worker dies (before the agent reaps it)
            for fd, _ in poller.poll():
                poller.unregister(fd)
                left -= 1
        box["t_dead"] = time.monotonic_ns()
        os.waitpid(p.pid, 0)
        box["t1"] = time.monotonic_ns()
        for fd in fds:
            os.close(fd)

    try:
        c.run_timed(agent.argv(n, cmd, extra=extra), pinned=pinned, cwd=d, on_started=during,
                    env=agent.environ(),
                    timeout=120)
    except ChildProcessError:
        pass  # Popen.communicate after our own waitpid
    finally:
        c.rmtree(d)
    if "error" in box:
        print(f"# WARNING {agent.name}: {box['error']}")
        return None
    return (box["t1"] - box["t0"]) / 1e6, (box["t_dead"] - box["t0"]) / 1e6


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=200, help="muster runs, exit-at-once")
    ap.add_argument("--grace-runs", type=int, default=20, help="muster runs, ignore-term")
    ap.add_argument("--torch-runs", type=int, default=15, help="torchrun mi=0.1 exit-at-once")
    ap.add_argument("--slow-runs", type=int, default=3, help="torchrun mi=5 exit-at-once")
    ap.add_argument("--torch-grace-runs", type=int, default=2, help="torchrun ignore-term (30 s)")
    ap.add_argument("-n", type=int, default=8)
    c.add_summary_arg(ap)
    a = ap.parse_args()
    c.print_header(f"B8 SIGTERM -> all {a.n} workers reaped -> agent exit")
    c.check_binaries()
    agents = c.agents(tmpfs_variant=True)
    n = a.n
    stats = {}  # (pinned, agent, "exit" | "dead" | "overshoot") -> summary
    for pinned in (False, True):
        rows = []
        base = {}
        for ag in agents:
            runs = a.runs if ag.kind == "muster" else (a.slow_runs if ag.mi == 5 else a.torch_runs)
            if ag.env:
                runs = max(10, runs // 2)
            if pinned and ag.is_torchrun and ag.mi == 5:
                continue
            xs, dist = c.quiet_measure(
                lambda: [x for x in (one_run(ag, n, False, pinned) for _ in range(runs))
                         if x is not None], f"{ag.name} exit-at-once")
            for idx, label in ((1, "all workers dead"), (0, "agent exit (all reaped)")):
                s = c.summary([x[idx] for x in xs])
                stats[(pinned, ag, "exit" if idx == 0 else "dead")] = s
                if ag.kind == "muster" and label not in base:
                    base[label] = s["p50"]
                target = ("< 1 ms: " + ("MET" if s["p99"] < 1 else "MISSED") + " (p99)"
                          if ag.kind == "muster" and not ag.env and idx == 0 else "")
                rows.append(["exit at once", ag.name + (" *" if dist else ""), s["n"],
                             c.fmt(s["p50"]), c.fmt(s["p99"]), c.fmt(s["max"]), label,
                             c.ratio(s["p50"], base.get(label)), target])
        for ag in agents:
            if ag.kind == "muster":
                grace, runs, extra = 1000.0, a.grace_runs, ("--shutdown-timeout", "1s")
                if ag.env:
                    runs = max(3, runs // 2)
            elif ag.mi == 5 or pinned:
                continue  # the grace path does not depend on the monitor interval
            else:
                grace, runs, extra = 30000.0, a.torch_grace_runs, ()
            xs, dist = c.quiet_measure(
                lambda: [x for x in (one_run(ag, n, True, pinned, extra) for _ in range(runs))
                         if x is not None], f"{ag.name} ignore-term")
            over = [x[0] - grace for x in xs]
            s = c.summary(over)
            stats[(pinned, ag, "overshoot")] = s
            target = ("overshoot < 5 ms: " + ("MET" if s["max"] < 5 else "MISSED") + " (max)"
                      if ag.kind == "muster" and not ag.env else "")
            rows.append([f"ignore SIGTERM, grace {grace / 1000:.0f} s",
                         ag.name + (" *" if dist else ""), s["n"], c.fmt(s["p50"]),
                         c.fmt(s["p99"]), c.fmt(s["max"]), "overshoot = agent exit - t0 - grace", "",
                         target])
        c.table(f"B8 shutdown, N={n}, {'pinned: taskset -c 0' if pinned else 'default scheduling'}",
                ["workers", "agent", "runs", "p50 ms", "p99 ms", "max ms", "metric (from SIGTERM)",
                 "p50 / muster p50", "target"], rows,
                note="* = a foreign build ran during the measurement. torchrun mi=5: few runs; "
                     "torchrun ignore-term: 2 runs of 30 s (its grace is not configurable).")
    c.write_summary(a.summary_json, board_rows(stats, agents, n))


def board_rows(stats, agents, n):
    """Scoreboard rows: SIGTERM -> agent exit (exit-at-once workers), grace overshoot."""
    def get(pinned, ag, what):
        s = stats.get((pinned, ag, what)) if ag else None
        return s if s and s["n"] else None
    muster = agents[0]
    torch = next((ag for ag in agents if ag.is_torchrun and ag.mi != 5), None)
    rows = []
    s, dead = get(False, muster, "exit"), get(False, muster, "dead")
    if s:
        fig = f"p50 {c.fmt(s['p50'])} ms, p99 {c.fmt(s['p99'])} ms"
        if dead:
            fig += f" (all workers dead p50 {c.fmt(dead['p50'])} ms)"
        sp = get(True, muster, "exit")
        if sp:
            fig += f"; pinned p50 {c.fmt(sp['p50'])} / p99 {c.fmt(sp['p99'])} ms"
        st = get(False, torch, "exit")
        vs = (f"{c.ratio(st['p50'], s['p50'])} ({torch.name} p50 {c.fmt(st['p50'])} ms)"
              if st else "- (no torchrun in this run)")
        rows.append(c.board_row(f"B8 SIGTERM to agent exit, N={n} (workers exit at once)",
                                "< 1 ms (p99)", fig, vs, c.verdict(s["p99"] < 1)))
    s = get(False, muster, "overshoot")
    if s:
        fig = f"p50 {c.fmt(s['p50'])} ms, max {c.fmt(s['max'])} ms"
        sp = get(True, muster, "overshoot")
        if sp:
            fig += f"; pinned p50 {c.fmt(sp['p50'])} / max {c.fmt(sp['max'])} ms"
        st = get(False, torch, "overshoot")
        vs = (f"{torch.name}: p50 {c.fmt(st['p50'])} ms over its fixed 30 s grace" if st
              else "- (torchrun's grace is a fixed 30 s; not run)")
        rows.append(c.board_row(f"B8 grace overshoot, N={n} (grace 1 s)", "< 5 ms (max)", fig,
                                vs, c.verdict(s["max"] < 5)))
    return rows


if __name__ == "__main__":
    main()
