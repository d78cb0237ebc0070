#!/usr/bin/python3
"""B2: rendezvous round time vs number of agents M (reference/perf.md §7 B2).

Server: the real gRPC rendezvous server, `muster serve --port 0 --rdzv-id b2` (a fresh process
per M). Agents: M simulated agents in one client process, one channel (TCP connection) per
agent, connected before the clock starts: with --client c++ bench/helpers/rdzv_load.cc (gRPC C++
callback API, built as <build>/bin/rdzv_load), with --client python the older
bench/helpers/rdzv_load.py (grpc.aio; its ~0.4 ms of CPU per agent competes with the server on
2 vCPUs and inflates the slope), by default (--client h2) bench/helpers/rdzv_h2load.cc (built as
<build>/bin/rdzv_h2load: one epoll thread speaking HTTP/2 + gRPC framing by hand, with gRPC's
client SETTINGS; a fifth of rdzv_load's CPU per round at 1024-4096 agents, so on 2 vCPUs the
round measures the server more than the client; it sends no Heartbeat messages and no HTTP/2
pings, so its heartbeat window is --hb-mode none only, every stream held open and silent).
Each agent sends Join (min = max nodes = M) and waits for RoundStarted. Metric: first Join
sent -> last RoundStarted received; server CPU (utime+stime from /proc/<pid>/stat over the
round) and peak RSS (VmHWM). The client's own CPU is reported too. Also: server cost with
--hb-agents joined agents for --hb-secs, sending Heartbeat every 1 s (--hb-mode app) or staying
joined without messages (--hb-mode none: liveness left to the transport), and optionally with
HTTP/2 keepalive pings (--keepalive-ms).
"""
import argparse
import json
import os
import subprocess
import sys
import time

import common as c
import storebench as sb

RDZV_LOAD_PY = str(c.BENCH / "helpers" / "rdzv_load.py")
RDZV_LOAD_CC = str(c.BUILD / "bin" / "rdzv_load")
RDZV_H2LOAD = str(c.BUILD / "bin" / "rdzv_h2load")
H2_REFUSAL = ("--client h2 (helpers/rdzv_h2load.cc) sends neither Heartbeat messages nor HTTP/2 "
              "keepalive pings: use --hb-mode none and --keepalive-ms 0")
PL_US_PER_AGENT = 40.0  # perf.md B2: M x (connect 28 us + 1-2 req/resp) ~ M x 40 us


class Serve:
    # Liveness of every agent connection (TCP keepalive) at the 1 Hz the heartbeat goal
    # (perf.md B9) is stated for.
    LIVENESS = ["--heartbeat-interval", "1s", "--heartbeat-misses", "3"]

    def __init__(self):
        env = {k: v for k, v in os.environ.items() if k != "MUSTER_TOKEN"}
        self.p = subprocess.Popen([c.MUSTER, "serve", "--port", "0", "--rdzv-id", "b2",
                                   "--log-level", "warn"] + self.LIVENESS, stdout=subprocess.PIPE,
                                  stderr=subprocess.DEVNULL, text=True, env=env,
                                  start_new_session=True)
        line = self.p.stdout.readline()
        self.port = int(line.rsplit(":", 1)[1])

    def stat(self):
        with open(f"/proc/{self.p.pid}/stat") as f:
            v = f.read().rsplit(")", 1)[1].split()
        cpu = (int(v[11]) + int(v[12])) / os.sysconf("SC_CLK_TCK")
        rss = hwm = 0
        with open(f"/proc/{self.p.pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS"):
                    rss = int(line.split()[1])
                if line.startswith("VmHWM"):
                    hwm = int(line.split()[1])
        return cpu, rss / 1024, hwm / 1024

    def stop(self):
        c.kill_group(self.p)


def load_argv(client, port, m, hb_secs, hb_mode="app", keepalive_ms=0):
    if client == "python":
        if hb_mode != "app" or keepalive_ms:
            sys.exit("--client python sends app heartbeats only, without keepalive pings")
        return [sys.executable, RDZV_LOAD_PY, str(port), str(m), "--heartbeat-secs", str(hb_secs)]
    if client == "h2":
        if keepalive_ms or (hb_secs and hb_mode != "none"):
            sys.exit(H2_REFUSAL)
        # The heartbeat window: every stream held open, silent (as rdzv_load
        # --no-app-heartbeats); TCP keepalive as below.
        argv = [RDZV_H2LOAD, str(port), str(m), "--tcp-keepalive-ms", "1000"]
        return argv + (["--hold-secs", str(hb_secs)] if hb_secs else [])
    # Agents' connections carry TCP keepalive as real agents' do (1 s: Serve.LIVENESS).
    argv = [RDZV_LOAD_CC, str(port), str(m), "--heartbeat-secs", str(hb_secs),
            "--keepalive-ms", str(keepalive_ms), "--tcp-keepalive-ms", "1000"]
    if hb_mode == "none":
        argv.append("--no-app-heartbeats")
    return argv


def run(m, hb_secs=0, client="c++", hb_mode="app", keepalive_ms=0):
    s = Serve()
    try:
        cpu0, rss0, _ = s.stat()
        p = subprocess.Popen(load_argv(client, s.port, m, hb_secs, hb_mode, keepalive_ms),
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        hb = {}
        phase = {}  # server CPU at the C++ client's phase markers
        for line in p.stderr:
            if line.startswith("hb_window start"):
                hb["cpu0"], hb["rss0"], _ = s.stat()
                hb["t0"] = time.monotonic()
            elif line.startswith("hb_window end"):
                hb["cpu1"], hb["rss1"], _ = s.stat()
                hb["t1"] = time.monotonic()
                if client == "python":
                    break
            elif line.startswith("phase "):
                phase[line.split(None, 1)[1].strip()] = s.stat()[0]
                if line.startswith("phase leave end"):
                    break
        out, err = p.communicate(timeout=900)
        cpu1, rss1, hwm = s.stat()
        d = json.loads(out.strip().splitlines()[-1]) if out.strip() else {"error": err[-300:]}
        d.update(server_cpu_s=cpu1 - cpu0, server_rss0_mb=rss0, server_hwm_mb=hwm)
        if "join start" in phase and "join end" in phase:
            d["server_cpu_round_s"] = phase["join end"] - phase["join start"]
        if "leave start" in phase and "leave end" in phase:
            d["server_cpu_leave_s"] = phase["leave end"] - phase["leave start"]
        d.update(hb)
        return d
    finally:
        s.stop()


def fit(xs, ys):
    n = len(xs)
    mx, my = sum(xs) / n, sum(ys) / n
    b = sum((x - mx) * (y - my) for x, y in zip(xs, ys)) / sum((x - mx) ** 2 for x in xs)
    return b, my - b * mx


def parse_args():
    ap = argparse.ArgumentParser()
    ap.add_argument("--ms", default="1,4,16,64,256,1024,4096")
    ap.add_argument("--runs", type=int, default=3, help="runs per M (median by round time)")
    ap.add_argument("--hb-agents", type=int, default=1024)
    ap.add_argument("--hb-secs", type=float, default=30)
    ap.add_argument("--max-wait", type=float, default=30,
                    help="seconds to wait for an idle machine per configuration")
    ap.add_argument("--client", choices=["c++", "python", "h2"], default="h2",
                    help="load generator: helpers/rdzv_h2load.cc (default: hand-written HTTP/2, "
                         "single epoll thread), rdzv_load.cc (gRPC C++), or rdzv_load.py")
    ap.add_argument("--hb-mode", choices=["app", "none"], default="none",
                    help="heartbeat window: no messages (agents since TCP keepalive liveness), "
                         "or Heartbeat messages every 1 s (agents before it)")
    ap.add_argument("--keepalive-ms", type=int, default=0,
                    help="agents' HTTP/2 keepalive ping interval (0: none)")
    c.add_summary_arg(ap)
    a = ap.parse_args()
    if a.client == "python":
        a.hb_mode = "app"  # rdzv_load.py always sends Heartbeat messages
    if a.client == "c++" and not os.path.exists(RDZV_LOAD_CC):
        sys.exit(f"{RDZV_LOAD_CC} missing: cmake --build <build> --target rdzv_load")
    if a.client == "h2":
        if a.hb_agents and (a.hb_mode != "none" or a.keepalive_ms):
            sys.exit(H2_REFUSAL)
        if not os.path.exists(RDZV_H2LOAD):
            sys.exit(f"{RDZV_H2LOAD} missing: cmake --build <build> --target rdzv_h2load")
    return a


def round_row(a, m, pts, board):
    """Measures --runs rounds of M agents; returns the table row, adds to pts and board."""
    runs = a.runs

    def measure():
        return [run(m, client=a.client) for _ in range(runs)]
    outs, dist = c.quiet_measure(measure, f"M={m}")
    ok = sorted((o for o in outs if o.get("round_ms")), key=lambda o: o["round_ms"])
    if not ok:
        return [m, "error: " + str(outs[-1].get("errors") or outs[-1].get("error")),
                "", "", "", "", "", "", "", ""]
    o = ok[len(ok) // 2]
    pts.append((m, o["round_ms"]))
    pl = m * PL_US_PER_AGENT / 1e3
    if m in (1024, 4096):
        board.append(c.board_row(
            f"B2 rendezvous round, M={m}", f"<= 2x PL = {2 * pl:.0f} ms",
            f"median {o['round_ms']:.2f} ms of {len(ok)} runs (range "
            f"{ok[0]['round_ms']:.2f}-{ok[-1]['round_ms']:.2f}), {o['round_ms'] / pl:.1f}x PL",
            "- (torch's rendezvous: row B2 baseline)", c.verdict(o["round_ms"] <= 2 * pl)))
    return [m, f"{o['round_ms']:.2f}", f"{min(x['round_ms'] for x in ok):.2f}-"
            f"{max(x['round_ms'] for x in ok):.2f}", f"{pl:.2f}",
            f"{o['round_ms'] / pl:.1f}x" if pl else "-",
            f"{o['server_cpu_s'] * 1e3:.0f}",
            f"{o['server_cpu_round_s'] * 1e3:.0f}" if "server_cpu_round_s" in o else "-",
            f"{o['client_cpu_round_s'] * 1e3:.0f}",
            f"{o['server_hwm_mb']:.1f}",
            f"{o['connect_ms']:.0f} ms; {len(ok)}/{len(outs)} runs" +
            (" *" if dist else "")]


def round_note(pts, board):
    """The round table's note: the least-squares fit over M >= 16 (its board row too)."""
    note = ("Median of the runs. * = a foreign build ran. PL = M x 40 us "
            "(perf.md B2). Server CPU (whole run): connect + round + leave (+ heartbeat window); "
            "server CPU (round): between the compiled clients' join markers (first Join written, "
            "last RoundStarted read); client CPU: the round only.")
    if len(pts) < 3:
        return note
    big = [(x, y) for x, y in pts if x >= 16]
    b, k = fit([x for x, _ in big], [y for _, y in big])
    lin = "; ".join(f"M={x}: fit {k + b * x:.1f} vs {y:.1f} ms" for x, y in big)
    note += (f"\n\nLeast-squares fit over M >= 16: round_ms = {k:.2f} + {b * 1e3:.1f} us x M "
             f"(PL slope 40 us). Residuals: {lin}.")
    if len(big) >= 3:
        (x1, y1), (x2, y2) = big[-2], big[-1]
        last, first = (y2 - y1) / (x2 - x1) * 1e3, big[0][1] / big[0][0] * 1e3
        note += (f" Per-agent cost between the last two M: "
                 f"{last:.1f} us (vs {first:.1f}"
                 f" us/agent at M={big[0][0]}): growth > 1.5x would flag a superlinear term.")
        board.append(c.board_row(
            "B2 rendezvous, linear fit (M >= 16)",
            "linear: no superlinear term (PL slope 40 us/agent)",
            f"round_ms = {k:.1f} + {b * 1e3:.1f} us x M; {x1} -> {x2}: {last:.0f} us per "
            f"agent (M={big[0][0]}: {first:.0f} us/agent)", "-",
            c.verdict(last <= 1.5 * first)))
    return note


def heartbeat_table(a, board):
    """The heartbeat window: --hb-agents joined agents for --hb-secs."""
    def measure_hb():
        return run(a.hb_agents, a.hb_secs, a.client, a.hb_mode, a.keepalive_ms)
    o, dist = c.quiet_measure(measure_hb, "heartbeat")
    if "cpu1" not in o:
        print(f"# heartbeat run failed: {o}")
        return
    secs = o["t1"] - o["t0"]
    cpu = o["cpu1"] - o["cpu0"]
    what = ("heartbeating every 1 s" if a.hb_mode == "app" else "joined, no messages")
    if a.keepalive_ms:
        what += f", HTTP/2 keepalive ping every {a.keepalive_ms} ms"
    c.table(f"B2 server cost, {a.hb_agents} joined agents {what}",
            ["agents", "window s", "server CPU % of a core", "CPU us per heartbeat",
             "server RSS MB (idle before join)", "RSS MB with agents", "RSS KB / agent",
             f"client CPU % ({a.client})", "leave ms"],
            [[a.hb_agents, f"{secs:.1f}", f"{cpu / secs * 100:.2f}",
              f"{cpu / (secs * a.hb_agents) * 1e6:.1f}", f"{o['server_rss0_mb']:.1f}",
              f"{o['rss1']:.1f}",
              f"{(o['rss1'] - o['server_rss0_mb']) * 1024 / a.hb_agents:.1f}",
              f"{o.get('client_cpu_hb_s', 0) / secs * 100:.1f}" + (" *" if dist else ""),
              f"{o['leave_ms']:.1f}" if o.get("leave_ms") is not None else "-"]],
            note="perf.md B9/B6 goals: heartbeat traffic for 4096 agents at 1 Hz < 1 % of "
                 "a core; <= 30 KB per agent.")
    board.append(liveness_row(a, cpu / secs * 100,
                              (o["rss1"] - o["server_rss0_mb"]) * 1024 / a.hb_agents))


def main():
    a = parse_args()
    sb.bound_quiet_wait(a.max_wait)
    c.print_header(f"B2 rendezvous round time vs M agents (gRPC server, {a.client} agents)")
    c.check_binaries()
    rows, pts, board = [], [], []
    for m in [int(x) for x in a.ms.split(",")]:
        rows.append(round_row(a, m, pts, board))
    note = round_note(pts, board)
    c.table("B2 rendezvous round (first Join -> last RoundStarted)",
            ["M", "round ms", "range", "PL ms", "round / PL", "server CPU ms (whole run)",
             "server CPU ms (round)", "client CPU ms (round)", "server peak RSS MB",
             "connect (untimed) / runs"], rows, note=note)
    if a.hb_agents:
        heartbeat_table(a, board)
    c.write_summary(a.summary_json, board)


def liveness_row(a, cpu_pct, kb_per_agent):
    """perf.md B9's heartbeat goals, measured by B2's window (CPU scaled to 4096 agents)."""
    how = ("Heartbeat every 1 s" if a.hb_mode == "app" else "no messages, TCP keepalive 1 s")
    if a.keepalive_ms:
        how += f", HTTP/2 ping every {a.keepalive_ms} ms"
    ok_cpu, ok_mem = cpu_pct * 4096 / a.hb_agents < 1, kb_per_agent <= 30
    return c.board_row(
        f"B9 liveness cost, {a.hb_agents} joined agents",
        "< 1 % of a core at 4096 agents (scaled linearly); <= 30 KB per agent",
        f"server CPU {cpu_pct:.2f} % of a core; {kb_per_agent:.1f} KB RSS per agent ({how})",
        "-", f"CPU {c.verdict(ok_cpu)}, memory {c.verdict(ok_mem)}")


if __name__ == "__main__":
    main()
