#!/usr/bin/python3
"""B3: TCPStore op latency and throughput (reference/perf.md §7 B3).

Client: bench/helpers/storeload.cc (C++, one epoll thread, closed loop, 1 request outstanding
per connection), speaking the wire protocol directly (reference/torch_contract.md §1.3):
legacy numbering against torch 1.13's classic server and muster's c10d_store_server, modern
(VALIDATE first) against torch 2.x's libuv server and muster's. Baseline: the same client
against a raw epoll echo server in the same helper (32 B request/response = the PL).

Ops: set (SET + CHECK in one send: SET has no reply), get (raw GET, 1 round trip), add, wait
(existing key), cas (compare_set, expected == current), mget (MULTI_GET of 8 keys; modern
only: 1.13 has no MULTI_GET). Value sizes 16 B and 4 KiB. Clients C = 1, 16, 256, 1024, each
with its own keys. Single-client rows are also run with server and client pinned to CPU 0.
"""
import argparse
import json
import subprocess

import common as c
import storebench as sb


def run_load(port, proto, clients, ops, sizes, warm, meas, pinned):
    argv = c.pinned_prefix(pinned) + [sb.storeload(), "load", "127.0.0.1", str(port), proto,
                                      str(clients), ops, sizes, str(warm), str(meas)]
    r = subprocess.run(argv, capture_output=True, text=True, timeout=600)
    out = {}
    for line in r.stdout.splitlines():
        if line.startswith("{"):
            d = json.loads(line)
            out[(d["op"], d["size"] if d["op"] in ("set", "get", "cas", "mget") else 0)] = d
    if r.returncode != 0:
        print(f"# WARNING storeload {proto} C={clients}: rc {r.returncode}: {r.stderr[-300:]}")
    return out


def parse_args():
    ap = argparse.ArgumentParser()
    ap.add_argument("--clients", default="1,16,256,1024")
    ap.add_argument("--sizes", default="16,4096")
    ap.add_argument("--warmup", type=float, default=0.2)
    ap.add_argument("--measure", type=float, default=1.0, help="seconds per (op, size, C)")
    ap.add_argument("--max-wait", type=float, default=30,
                    help="seconds to wait for an idle machine per configuration")
    c.add_summary_arg(ap)
    return ap.parse_args()


def measure_all(a, targets, clients):
    """Every server at every C (default scheduling) and at C=1 pinned.

    Returns (res, dist): res[(name, proto, pinned, C)] = {(op, size): d}; dist[(name, proto,
    pinned)] = whether a foreign build disturbed that server's measurement."""
    res = {}  # (name, proto, pinned, C) -> {(op,size): d}
    dist = {}
    for pinned in (False, True):
        for name, proto, argv in targets:
            ops = "echo" if proto == "echo" else \
                ("set,get,add,wait,cas,mget" if proto == "modern" else "set,get,add,wait,cas")
            cs = clients if not pinned else [1]

            def measure():
                srv = sb.Server(argv, pinned)
                try:
                    return {C: run_load(srv.port, proto, C, ops, a.sizes, a.warmup, a.measure,
                                        pinned) for C in cs}
                finally:
                    srv.stop()
            r, d = c.quiet_measure(measure, f"{name} {proto}{' pinned' if pinned else ''}")
            for C, v in r.items():
                res[(name, proto, pinned, C)] = v
                dist[(name, proto, pinned)] = d
    return res, dist


def latency_table(res, targets, dist, echo):
    """Single-client round-trip latency of every server and op, against the raw echo's."""
    rows = []
    for name, proto, _ in targets:
        if proto == "echo":
            continue
        for pinned in (False, True):
            e = echo[pinned]
            for (op, size), d in sorted(res.get((name, proto, pinned, 1), {}).items()):
                ratio = d["p50_us"] / e["p50_us"] if e else float("nan")
                tgt = ""
                if name == "muster" and op in ("add", "wait", "get") and size in (0, 16):
                    tgt = "<= 1.2x: " + ("MET" if ratio <= 1.2 else "MISSED")
                star = " *" if dist.get((name, proto, pinned)) else ""
                rows.append([proto, name + star, "pinned" if pinned else "default",
                             f"{op} {size or ''}".strip(), d["ops"], f"{d['p50_us']:.1f}",
                             f"{d['p99_us']:.1f}", f"{d['ops_per_s'] / 1e3:.1f}",
                             f"{ratio:.2f}x", tgt])
    for pinned in (False, True):
        e = echo[pinned]
        if e:
            rows.append(["echo", "raw echo (PL)", "pinned" if pinned else "default", "echo 32 B",
                         e["ops"], f"{e['p50_us']:.1f}", f"{e['p99_us']:.1f}",
                         f"{e['ops_per_s'] / 1e3:.1f}", "1.00x", ""])
    c.table("B3 single client (C=1): round-trip latency", ["proto", "server", "sched", "op",
            "samples", "p50 us", "p99 us", "k ops/s", "p50 / echo p50", "target"], rows,
            note="* = a foreign build ran during the measurement. set = SET+CHECK, get = raw GET.")


def throughput_targets(res, proto, C, key, o, r):
    """The target column of one throughput row: muster's op `key` at C clients."""
    tgt = []
    if proto == "legacy" and r == r:
        tgt.append(">=2x 1.13: " + ("MET" if r >= 2 else "MISSED"))
    if proto == "modern" and r == r:
        tgt.append(">=1x 2.x: " + ("MET" if r >= 1 else "MISSED"))
    if C == 256 and key[0] in ("add", "wait", "get") and key[1] in (0, 16):
        tgt.append(">=110k: " + ("MET" if o["ops_per_s"] >= 110e3 else "MISSED"))
    if C == 1024 and ("muster", proto, False, 256) in res:
        o256 = res[("muster", proto, False, 256)].get(key)
        if o256:
            drop = o["ops_per_s"] / o256["ops_per_s"]
            tgt.append(f"1024/256 {drop:.2f}" + ("" if drop >= 0.95 else " DROP"))
    return "; ".join(tgt)


def throughput_table(a, res, targets, clients, dist):
    """Throughput vs C, muster vs torch per protocol (default scheduling)."""
    rows = []
    for proto in ("legacy", "modern"):
        torch_name = next((n for n, p, _ in targets if p == proto and n != "muster"), None)
        for C in clients:
            ours = res.get(("muster", proto, False, C), {})
            theirs = res.get((torch_name, proto, False, C), {}) if torch_name else {}
            for key in sorted(ours):
                o, t = ours[key], theirs.get(key)
                r = o["ops_per_s"] / t["ops_per_s"] if t and t["ops_per_s"] else float("nan")
                rows.append([proto, C, f"{key[0]} {key[1] or ''}".strip(),
                             f"{t['ops_per_s'] / 1e3:.1f}" if t else "-",
                             f"{t['p50_us']:.0f} / {t['p99_us']:.0f}" if t else "-",
                             f"{o['ops_per_s'] / 1e3:.1f}",
                             f"{o['p50_us']:.0f} / {o['p99_us']:.0f}",
                             f"{r:.2f}x" if r == r else "-",
                             throughput_targets(res, proto, C, key, o, r)])
    e = {C: res.get(("raw echo", "echo", False, C), {}).get(("echo", 0)) for C in clients}
    erow = ", ".join(f"C={C}: {e[C]['ops_per_s'] / 1e3:.1f} k/s" for C in clients if e.get(C))
    c.table("B3 throughput, closed loop, default scheduling",
            ["proto", "C", "op", "torch k ops/s", "torch p50/p99 us", "muster k ops/s",
             "muster p50/p99 us", "muster / torch", "target"], rows,
            note=f"torch = 1.13 classic for legacy, 2.x libuv for modern. Raw echo (PL): {erow}. "
                 f"{a.measure:.1f} s per cell after {a.warmup:.1f} s warm-up; "
                 "disturbed targets: " + (", ".join(f"{n} {p}" for (n, p, pin), d in dist.items()
                                                   if d and not pin) or "none"))


def main():
    a = parse_args()
    sb.bound_quiet_wait(a.max_wait)
    c.print_header("B3 store op latency / throughput")
    targets = sb.servers()
    clients = [int(x) for x in a.clients.split(",")]
    res, dist = measure_all(a, targets, clients)
    echo = {p: res.get(("raw echo", "echo", p, 1), {}).get(("echo", 0)) for p in (False, True)}
    latency_table(res, targets, dist, echo)
    throughput_table(a, res, targets, clients, dist)
    c.write_summary(a.summary_json, board_rows(res, targets, echo))


def small(cellres):
    """The 16 B (and value-less) ops of one cell: what the scoreboard judges."""
    return {k: v for k, v in cellres.items() if k[1] in (0, 16)}


def span(xs, f="{:.1f}"):
    return f.format(min(xs)) + ("-" + f.format(max(xs)) if max(xs) != min(xs) else "")


def board_rows(res, targets, echo):
    rows = [rtt_row(res, targets, echo[True])]
    rows += [throughput_row(res, targets, C) for C in (256, 1024)]
    return [r for r in rows if r]


def rtt_row(res, targets, e):
    """Pinned single-client latency of every 16 B op, as multiples of the raw echo's."""
    cells = {(n, p): small(res.get((n, p, True, 1), {})) for n, p, _ in targets if p != "echo"}
    ours = [d for (n, _), v in cells.items() if n == "muster" for d in v.values()]
    if not e or not ours:
        return None

    def x_echo(ds):
        return span([d["p50_us"] / e["p50_us"] for d in ds], "{:.2f}") + "x echo"
    judged = [d["p50_us"] / e["p50_us"] for (n, _), v in cells.items() if n == "muster"
              for (op, _), d in v.items() if op in ("add", "get", "wait")]
    vs = "; ".join(f"{n} {x_echo(v.values())}" for (n, _), v in cells.items()
                   if n != "muster" and v)
    return c.board_row(
        "B3 single-client RTT, pinned", "<= 1.2x raw echo RTT (p50; add/get/wait)",
        f"p50 {span([d['p50_us'] for d in ours])} us, p99 {span([d['p99_us'] for d in ours])} us"
        f" over the 16 B ops, both protocols = {x_echo(ours)} ({e['p50_us']:.1f} us)",
        vs or "-", c.verdict(max(judged or [9]) <= 1.2))


def throughput_row(res, targets, C):
    """Closed-loop throughput of the 16 B ops at C clients, against the same protocol's torch
    server; C=256 is judged on perf.md's 110 k ops/s, C=1024 on not dropping from 256."""
    fig, vs, checks = [], [], []
    for proto in ("legacy", "modern"):
        o = small(res.get(("muster", proto, False, C), {}))
        if not o:
            continue
        fig.append(f"{proto} {span([d['ops_per_s'] / 1e3 for d in o.values()])} k ops/s")
        if C == 256:
            fast = [d["ops_per_s"] for (op, _), d in o.items() if op in ("add", "get", "wait")]
            checks.append(f">= 110 k ({proto}) {c.verdict(min(fast or [0]) >= 110e3)}")
        else:
            o256 = small(res.get(("muster", proto, False, 256), {}))
            drops = [o[k]["ops_per_s"] / o256[k]["ops_per_s"] for k in o if k in o256]
            if drops:
                fig[-1] += f" (1024/256 {span(drops, '{:.2f}')})"
                checks.append(f"no drop ({proto}) {c.verdict(min(drops) >= 0.95)}")
        tname = next((n for n, p, _ in targets if p == proto and n != "muster"), None)
        t = small(res.get((tname, proto, False, C), {}))
        ratios = [o[k]["ops_per_s"] / t[k]["ops_per_s"] for k in o if k in t]
        if not ratios:
            vs.append(f"{proto}: {tname or 'no torch server'} gave no result at C={C}")
            continue
        vs.append(f"{proto} {span(ratios, '{:.2f}')}x {tname}")
        need = 2 if proto == "legacy" else 1
        met = sum(x >= need for x in ratios)
        checks.append(f">= {need}x torch ({proto}) {c.verdict(met == len(ratios))} "
                      f"({met}/{len(ratios)} ops)")
    if not fig:
        return None
    target = (">= 110 k ops/s (add/get/wait); >= 2x torch 1.13; >= 1x torch 2.x" if C == 256
              else "no drop from C=256; >= 2x torch 1.13; >= 1x torch 2.x")
    return c.board_row(f"B3 throughput, C={C} (16 B)", target, "; ".join(fig), "; ".join(vs),
                       "; ".join(checks))


if __name__ == "__main__":
    main()
