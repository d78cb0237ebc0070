#!/usr/bin/python3
"""B4: connection storm + store-based barrier (reference/perf.md §7 B4).

N clients spread over --procs epoll processes (bench/helpers/storeload.cc `storm`, default 4
as perf.md asks, so that one process's serial socket()+connect() calls are not the measured
cost; RLIMIT_NOFILE raised to the hard limit) connect at once: the processes are forked
first and every phase opens in all of them together (helpers/process_gang.h). "connect" =
earliest first connect() in any process -> every client has completed its first round trip
(legacy: ADD(init key, 1) as the 1.13 client does; modern: VALIDATE + PING as the >= 2.4
client does); "established" = the same up to the last client-side TCP handshake (the kernel's
part: the server need not have accepted yet). Then ROUNDS store-based barriers, back to back:
every client sends ADD(key_r, 1); the client that reads N SETs key_r/last_worker; every client
WAITs on it. Round time = earliest first ADD -> last STOP_WAITING, over all processes.
Resets = ECONNRESET/EPIPE/ECONNREFUSED seen by clients (each is retried); listen overflows =
TcpExtListenOverflows delta. Servers: torch 1.13 classic (legacy protocol), torch 2.x libuv
(modern), muster's c10d_store_server (both). Default scheduling only (the metric is a storm,
not a latency). "busy" = the box's CPU use (other people's builds) just before the row's
first run; the 2 vCPUs are shared, so compare servers within one run only.
"""
import argparse
import json
import subprocess
import time

import common as c
import storebench as sb

PL_CONN_S = 35e3      # perf.md §5: connection storm 35 k conn/s below somaxconn
PL_ROUND_US = 17.0    # perf.md B4: 1024 clients -> ~15-20 ms per add+wait round


def netstat(field):
    with open("/proc/net/netstat") as f:
        lines = f.read().splitlines()
    for h, v in zip(lines[::2], lines[1::2]):
        hs, vs = h.split(), v.split()
        if field in hs:
            return int(vs[hs.index(field)])
    return 0


def one(argv, proto, n, rounds, tag, timeout, procs):
    srv = sb.Server(argv)
    try:
        ov0 = netstat("ListenOverflows")
        cpu0 = srv.cpu_s()
        try:
            r = subprocess.run([sb.storeload(), "storm", "127.0.0.1", str(srv.port), proto,
                                str(n), str(rounds), tag, str(procs)], capture_output=True,
                               text=True, timeout=timeout)
        except subprocess.TimeoutExpired:
            return {"error": f"timeout > {timeout} s"}
        d = {}
        for line in r.stdout.splitlines():
            if line.startswith("{"):
                d = json.loads(line)
        if r.returncode != 0 or not d.get("round_ms"):
            d["error"] = f"rc {r.returncode}: {r.stderr.strip()[-200:]}"
        d["overflows"] = netstat("ListenOverflows") - ov0
        d["server_cpu_s"] = srv.cpu_s() - cpu0
        d["server_hwm_mb"] = srv.rss_kb() / 1024
        return d
    finally:
        srv.stop()


def parse_args():
    ap = argparse.ArgumentParser()
    ap.add_argument("--ns", default="64,256,1024,4096")
    ap.add_argument("--rounds", type=int, default=10)
    ap.add_argument("--procs", type=int, default=4,
                    help="client processes the N connections are spread over (perf.md: >= 4)")
    ap.add_argument("--runs", type=int, default=3, help="runs per (server, N); median shown")
    ap.add_argument("--servers", default="",
                    help="comma list: only servers whose name contains one of these")
    ap.add_argument("--timeout", type=int, default=90, help="seconds per run; longer = skipped")
    ap.add_argument("--max-wait", type=float, default=30,
                    help="seconds to wait for an idle machine per configuration")
    c.add_summary_arg(ap)
    return ap.parse_args()


def record_busy():
    """Makes c.wait_quiet append each result (how busy the box was) to the returned list."""
    busy = []
    waited = c.wait_quiet

    def wait_quiet_recorded(*args, **kw):
        busy.append(waited(*args, **kw))
        return busy[-1]
    c.wait_quiet = wait_quiet_recorded
    return busy


def storm_row(a, name, proto, argv, n, busy, medians):
    """Measures one (server, N); returns (table row, whether larger N are skipped)."""
    def measure():
        out = []
        for i in range(a.runs):
            t = time.monotonic()
            out.append(one(argv, proto, n, a.rounds, f"{proto}{n}r{i}", a.timeout,
                           min(a.procs, n)))
            if time.monotonic() - t > 30 or "error" in out[-1]:
                break  # too slow (or broken) to repeat
        return out
    outs, dist = c.quiet_measure(measure, f"{name} {proto} N={n}")
    ok = [o for o in outs if "error" not in o]
    if not ok:
        medians[(name, proto, n)] = outs[-1]
        return [proto, name, n, outs[-1]["error"], "", "", "", "", "", "", "",
                f"{busy[-1]:.0%}", ""], True
    ok.sort(key=lambda o: o["connect_ms"] + sum(o["round_ms"]))
    o = medians[(name, proto, n)] = ok[len(ok) // 2]
    rm = o["round_ms"]
    mean_round = sum(rm) / len(rm)
    pl_conn = n / PL_CONN_S * 1e3
    pl_round = n * PL_ROUND_US / 1e3
    tgt = ""
    if name == "muster":
        okc = o["connect_ms"] <= 2 * pl_conn
        okr = mean_round <= 2 * pl_round
        tgt = (f"connect {'MET' if okc else 'MISSED'}, round {'MET' if okr else 'MISSED'}"
               f", resets {'MET' if o['resets'] == 0 else 'MISSED'}")
    row = [proto, name + (" *" if dist else ""), n,
           f"{o['connect_ms']:.1f} (PL {pl_conn:.1f})",
           f"{o.get('established_ms', float('nan')):.1f}",
           f"{mean_round:.2f} (PL {pl_round:.1f})",
           f"{min(rm):.2f} / {max(rm):.2f}", o["resets"], o["overflows"],
           f"{o['server_cpu_s']:.2f}", f"{o['server_hwm_mb']:.1f}",
           f"{busy[-1]:.0%}", f"{len(ok)} run(s); " + tgt]
    return row, sum(rm) / 1e3 + o["connect_ms"] / 1e3 > 30


def main():
    a = parse_args()
    sb.bound_quiet_wait(a.max_wait)
    busy = record_busy()
    c.print_header("B4 connection storm + store-based barrier")
    targets = [t for t in sb.servers() if t[1] != "echo" and
               (not a.servers or any(x in t[0] for x in a.servers.split(",")))]
    rows = []
    skip = set()
    medians = {}  # (server, proto, N) -> the median run, or {"error": ...}
    for name, proto, argv in targets:
        for n in [int(x) for x in a.ns.split(",")]:
            if (name, proto) in skip:
                rows.append([proto, name, n, "skipped: a smaller N already took > 30 s", "", "",
                             "", "", "", "", "", "", ""])
                continue
            row, too_slow = storm_row(a, name, proto, argv, n, busy, medians)
            rows.append(row)
            if too_slow:
                skip.add((name, proto))
    c.table(f"B4 connection storm + barrier ({a.procs} epoll client processes, default "
            "scheduling)",
            ["proto", "server", "N", "connect ms (to first reply)", "established ms",
             f"mean round ms ({a.rounds} rounds)", "min / max round", "resets",
             "listen overflows", "server CPU s", "server peak RSS MB", "box busy before",
             "notes / target"],
            rows, note="* = a foreign build ran during the measurement. PL from perf.md: connect "
                       "N / 35 k conn/s; round N x 17 us (1024 -> 17 ms). Target <= 2x PL, zero "
                       "resets up to somaxconn (4096). Median of the runs by total time.")
    c.write_summary(a.summary_json, board_rows(medians))


def board_rows(medians):
    """Scoreboard rows at N = 1024 and 4096: connect and mean round, per protocol."""
    def text(o):
        if "error" in o:
            return o["error"]
        rm = o["round_ms"]
        return f"connect {o['connect_ms']:.1f} ms, round {sum(rm) / len(rm):.2f} ms"
    rows = []
    for n in (1024, 4096):
        pl_conn, pl_round = 2 * n / PL_CONN_S * 1e3, 2 * n * PL_ROUND_US / 1e3
        fig, vs, conn, rnd, resets = [], [], [], [], 0
        for (name, proto, m), o in medians.items():
            if m != n:
                continue
            if name != "muster":
                vs.append(f"{name} ({proto}): {text(o)}")
                continue
            fig.append(f"{proto}: {text(o)}")
            if "error" in o:
                conn.append(f"{proto} MISSED")
                continue
            rm = o["round_ms"]
            conn.append(f"{proto} {c.verdict(o['connect_ms'] <= pl_conn)}")
            rnd.append(f"{proto} {c.verdict(sum(rm) / len(rm) <= pl_round)}")
            resets += o["resets"]
        if fig:
            rows.append(c.board_row(
                f"B4 storm + barrier, N={n}",
                f"<= 2x PL: connect {pl_conn:.1f} ms, round {pl_round:.1f} ms; 0 resets",
                "; ".join(fig) + f"; {resets} resets", "; ".join(vs) or "-",
                f"connect: {', '.join(conn)}; round: {', '.join(rnd)}; "
                f"resets {c.verdict(resets == 0)}"))
    return rows


if __name__ == "__main__":
    main()
