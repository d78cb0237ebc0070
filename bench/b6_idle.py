#!/usr/bin/python3
"""B6: agent resource cost with 8 sleeping workers (reference/perf.md §7 B6).

The agent runs 8 fake_worker `sleep=-1` workers. Once all have started and a 2 s settle time
has passed, /proc/<agent>/{status,schedstat,smaps_rollup,fd} is sampled once a second for
DURATION seconds (default 30). CPU time comes from /proc/<pid>/task/*/schedstat (ns, exact, all threads; not the
10 ms utime/stime ticks). Wake-ups = voluntary context switches per second, all threads. muster's
watchdog (a forked helper process) is reported on its own row. Then the agent gets SIGTERM.
"""
import argparse
import os
import signal
import time

import common as c


def proc_sample(pid):
    s = {}
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            k, _, v = line.partition(":")
            s[k] = v.strip()
    # per-thread counters: /proc/<pid>/{schedstat,status} only cover the main thread
    cpu_ns = vcsw = nvcsw = 0
    for tid in os.listdir(f"/proc/{pid}/task"):
        try:
            with open(f"/proc/{pid}/task/{tid}/schedstat") as f:
                cpu_ns += int(f.read().split()[0])
            with open(f"/proc/{pid}/task/{tid}/status") as f:
                for line in f:
                    if line.startswith("voluntary_ctxt_switches"):
                        vcsw += int(line.split()[1])
                    elif line.startswith("nonvoluntary_ctxt_switches"):
                        nvcsw += int(line.split()[1])
        except OSError:
            pass  # thread exited between listdir and open
    pss = None
    try:
        with open(f"/proc/{pid}/smaps_rollup") as f:
            for line in f:
                if line.startswith("Pss:"):
                    pss = int(line.split()[1])
    except OSError:
        pass
    return {
        "rss_kb": int(s["VmRSS"].split()[0]),
        "hwm_kb": int(s["VmHWM"].split()[0]),
        "pss_kb": pss,
        "threads": int(s["Threads"]),
        "vcsw": vcsw,
        "nvcsw": nvcsw,
        "cpu_ns": cpu_ns,
        "fds": len(os.listdir(f"/proc/{pid}/fd")),
        "t": time.monotonic(),
    }


def children(pid):
    out = []
    try:
        for tid in os.listdir(f"/proc/{pid}/task"):
            with open(f"/proc/{pid}/task/{tid}/children") as f:
                out += [int(x) for x in f.read().split()]
    except OSError:
        pass
    return out


def comm(pid):
    try:
        with open(f"/proc/{pid}/comm") as f:
            return f.read().strip()
    except OSError:
        return "?"


def measure(agent, n, duration):
    d = c.tmpdir()
    stamps = os.path.join(d, "stamps")
    cmd = [c.FAKE, f"stamp={stamps}", "sleep=-1"]
    result = {}

    def during(p):
        if not c.wait_lines(stamps, n, 120):
            result["error"] = "workers did not start"
            os.kill(p.pid, signal.SIGTERM)
            return
        time.sleep(2)
        procs = {"agent": p.pid}
        for ch in children(p.pid):
            if comm(ch) == "muster-watchdog":
                procs["watchdog"] = ch
        first = {k: proc_sample(v) for k, v in procs.items()}
        peak = {k: dict(v) for k, v in first.items()}
        end = time.monotonic() + duration
        last = first
        while time.monotonic() < end:
            time.sleep(1)
            last = {k: proc_sample(v) for k, v in procs.items()}
            for k in procs:
                for key in ("rss_kb", "pss_kb", "fds", "threads"):
                    if last[k][key] is not None and last[k][key] > (peak[k][key] or 0):
                        peak[k][key] = last[k][key]
        for k in procs:
            dt = last[k]["t"] - first[k]["t"]
            result[k] = {
                "rss_mb": peak[k]["rss_kb"] / 1024, "hwm_mb": last[k]["hwm_kb"] / 1024,
                "pss_mb": (peak[k]["pss_kb"] or 0) / 1024, "threads": peak[k]["threads"],
                "fds": peak[k]["fds"],
                "cpu_pct": 100.0 * (last[k]["cpu_ns"] - first[k]["cpu_ns"]) / 1e9 / dt,
                "cpu_ms": (last[k]["cpu_ns"] - first[k]["cpu_ns"]) / 1e6,
                "wakeups_s": (last[k]["vcsw"] - first[k]["vcsw"]) / dt,
                "nvcsw_s": (last[k]["nvcsw"] - first[k]["nvcsw"]) / dt,
                "secs": dt,
            }
        os.kill(p.pid, signal.SIGTERM)

    try:
        c.run_timed(agent.argv(n, cmd), cwd=d, on_started=during, timeout=duration + 120)
    finally:
        c.rmtree(d)
    return result


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--duration", type=float, default=30.0)
    ap.add_argument("--workers", type=int, default=8)
    c.add_summary_arg(ap)
    a = ap.parse_args()
    c.print_header(f"B6 agent resource cost, {a.workers} sleeping workers, {a.duration:.0f} s")
    c.check_binaries()
    rows = []
    base = None
    measured = {}  # agent -> result
    for ag in c.agents():
        r, dist = c.quiet_measure(lambda: measure(ag, a.workers, a.duration), ag.name)
        if "error" in r:
            print(f"# WARNING {ag.name}: {r['error']}")
            continue
        measured[ag] = r
        for who in ("agent", "watchdog"):
            if who not in r:
                continue
            m = r[who]
            if ag.kind == "muster" and who == "agent":
                base = m
            target = ""
            if ag.kind == "muster" and who == "agent":
                ok_rss = m["rss_mb"] < 20
                ok_cpu = m["cpu_pct"] < 0.1
                target = (f"RSS < 20 MB: {'MET' if ok_rss else 'MISSED'}; "
                          f"CPU < 0.1 %: {'MET' if ok_cpu else 'MISSED'}")
            rows.append([ag.name + (" *" if dist else ""), who, f"{m['rss_mb']:.1f}", f"{m['pss_mb']:.1f}",
                         m["threads"], m["fds"], f"{m['cpu_ms']:.2f}", f"{m['cpu_pct']:.4f}",
                         f"{m['wakeups_s']:.2f}", f"{m['nvcsw_s']:.2f}",
                         c.ratio(m["rss_mb"], base["rss_mb"]) if base and who == "agent" else "-",
                         target])
    c.table("B6 idle agent cost (peak RSS/PSS over the window; CPU from schedstat)",
            ["agent", "process", "RSS MB", "PSS MB", "threads", "fds",
             f"CPU ms in {a.duration:.0f} s", "CPU % of a core", "vol. ctx sw/s",
             "invol. ctx sw/s", "RSS / muster", "target"], rows,
            note="single run per agent (a 30 s idle window has no meaningful percentiles)")
    c.write_summary(a.summary_json, board_rows(measured, a))


def board_rows(measured, a):
    muster = next((r for ag, r in measured.items() if ag.kind == "muster"), None)
    if not muster:
        return []
    m = muster["agent"]
    fig = f"RSS {m['rss_mb']:.1f} MB (PSS {m['pss_mb']:.1f})"
    if "watchdog" in muster:
        fig += f" + watchdog {muster['watchdog']['rss_mb']:.1f} MB"
    fig += (f"; CPU {m['cpu_pct']:.4f} % of a core, {m['wakeups_s']:.2f} wake-ups/s over "
            f"{a.duration:.0f} s")
    torch = next(((ag, r) for ag, r in measured.items() if ag.is_torchrun and ag.mi != 5), None)
    vs = "- (no torchrun in this run)"
    if torch:
        t = torch[1]["agent"]
        vs = (f"{c.ratio(t['rss_mb'], m['rss_mb'])} RSS ({torch[0].name}: {t['rss_mb']:.1f} MB "
              f"RSS, {t['cpu_pct']:.4f} % CPU)")
    ok_rss, ok_cpu = m["rss_mb"] < 20, m["cpu_pct"] < 0.1
    verdict = c.verdict(True) if ok_rss and ok_cpu else \
        f"RSS {c.verdict(ok_rss)}, CPU {c.verdict(ok_cpu)}"
    return [c.board_row(f"B6 idle agent, {a.workers} sleeping workers",
                        "RSS < 20 MB; CPU < 0.1 % of a core", fig, vs, verdict)]


if __name__ == "__main__":
    main()
