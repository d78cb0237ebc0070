#!/usr/bin/python3
"""B2 for the etcd backend (issue 16): rendezvous round time vs number of agents M against a
3-member etcd on this machine, side by side with muster's own gRPC server in the same run,
and the coordinator fail-over time.

Etcd: Debian's etcd-server, 3 members on loopback, data on tmpfs (tests/integration/
etcd_cluster.py), a fresh cluster per M. gRPC: `muster serve --port 0` (a fresh process per
M). Agents, etcd (--etcd-client light, the default): one real agent coordinates
(bench/helpers/rdzv_agents.cc, `--agents 1`: rendezvous/etcd's EtcdRendezvousClient, started
first so that its node key is the oldest), the other M-1 are simulated in one process by
bench/helpers/etcd_light_agents.cc (the agents' protocol: own lease, node key, a real
agent's three watches: its own events key, requests/ and the coordinator's key; one
completion queue, one Watch stream, one LeaseKeepAlive stream). --etcd-client real: M EtcdRendezvousClients in one process
(rdzv_agents; 5 threads and 3 watch streams per agent: too heavy past a few hundred on 2
vCPUs). Agents, gRPC: bench/helpers/rdzv_h2load.cc (B2's light client, b2_rendezvous.py).
Each joins a job of min = max = M and waits for RoundStarted. Metric: first join sent ->
last RoundStarted. Recorded: the server's CPU over the run (etcd: the 3 members'
utime+stime together; muster serve's), its peak RSS (etcd: the members' VmHWM summed), the
client process' CPU, and (etcd) the coordinating agent's CPU.

Fail-over (--failover-ms), light client: two real agents join first, one process each
(rdzv_agents --agents 1, in that order: the coordinator and its successor, since light agents
cannot coordinate), then M-2 light agents (min M-1, max M); once round 1 has started
everywhere the coordinator's process is SIGKILLed; the time from the kill to the first and to
the last RoundStarted of the next round among the light agents, and etcd's CPU (3 members)
from the kill to the last. Each M runs twice per try: the survivors follow the successor the
coordinator's batches named (one read each: rendezvous/etcd/election.h), and
--on-coordinator-loss oldest (what agents did before: the coordinator key, then the oldest
node key, which etcd 3.4 answers by reading and sorting every node key). --etcd-client real:
one process with 1 agent, then one with M-1 real agents. Lease TTL = heartbeat 1 s x 2
misses (the round runs use the default 5 s x 3); the light agents' 15 s
(--failover-light-ttl-s): with 2 s, etcd busy with 1024 oldest-key reads (or 4096 joins) on
2 vCPUs answered their keep-alives too late (requested lease not found). The kill is seen
through the successor's liveness connection, not a lease, so the TTL does not change it.
"""
import argparse
import json
import os
import signal
import subprocess
import sys
import time

import common as c

sys.path.insert(0, str(c.REPO / "tests" / "integration"))
from etcd_cluster import ETCD, EtcdCluster  # noqa: E402

import b2_rendezvous as b2r  # noqa: E402

AGENTS = str(c.BUILD / "bin" / "rdzv_agents")
LIGHT = str(c.BUILD / "bin" / "etcd_light_agents")
TTL_S = 2  # the fail-over runs' lease
# The round runs: the agents' default liveness (5 s x 3 = a 15 s lease). With a 2 s lease,
# 256 agents' keep-alive threads in one process on 2 busy vCPUs missed it (lease ended).
ROUND_LIVENESS = dict(heartbeat_ms=5000, misses=3)


def proc_stat(pid):
    """(utime+stime seconds, VmHWM MB) of a live process."""
    with open(f"/proc/{pid}/stat") as f:
        v = f.read().rsplit(")", 1)[1].split()
    cpu = (int(v[11]) + int(v[12])) / os.sysconf("SC_CLK_TCK")
    hwm = 0
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmHWM"):
                hwm = int(line.split()[1]) / 1024
    return cpu, hwm


def servers_stat(pids):
    stats = [proc_stat(p) for p in pids]
    return sum(s[0] for s in stats), sum(s[1] for s in stats)


def agents_argv(backend, endpoints, m, run_id, **extra):
    argv = [AGENTS, "--backend", backend, "--endpoints", endpoints, "--agents", str(m),
            "--run-id", run_id, "--timeout-s", "300"]
    for k, v in extra.items():
        argv += ["--" + k.replace("_", "-"), str(v)]
    return argv


def run_agents(argv, timeout=330):
    p = subprocess.run(argv, capture_output=True, text=True, timeout=timeout)
    try:
        return json.loads(p.stdout.strip().splitlines()[-1])
    except (IndexError, json.JSONDecodeError):
        return {"ok": False, "error": p.stderr[-300:]}


class Serve:
    def __init__(self):
        env = {k: v for k, v in os.environ.items() if k != "MUSTER_TOKEN"}
        self.p = subprocess.Popen([c.MUSTER_BUILT, "serve", "--port", "0", "--rdzv-id", "b2",
                                   "--log-level", "warn", "--heartbeat-interval", "1s",
                                   "--heartbeat-misses", "2"], stdout=subprocess.PIPE,
                                  stderr=subprocess.DEVNULL, text=True, env=env,
                                  start_new_session=True)
        self.port = int(self.p.stdout.readline().rsplit(":", 1)[1])

    def stop(self):
        c.kill_group(self.p)


def measure_etcd(m, client="light"):
    return measure_etcd_light(m) if client == "light" else measure_etcd_real(m)


def measure_etcd_light(m):
    """The coordinating agent (a real one) first, then M-1 light agents."""
    etcd = EtcdCluster(3)
    coordinator = None
    try:
        pids = [p.pid for p in etcd.procs]
        coordinator = subprocess.Popen(agents_argv("etcd", etcd.endpoints, 1, f"b2-{m}",
                                                   min=m, max=m, rounds=99, **ROUND_LIVENESS),
                                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + 30
        while not etcd.keys(f"/muster/b2-{m}/nodes/"):
            assert time.monotonic() < deadline and coordinator.poll() is None
            time.sleep(0.05)
        cpu0, _ = servers_stat(pids)
        coord0, _ = proc_stat(coordinator.pid)
        endpoint = etcd.endpoints.split(",")[0]
        p = subprocess.run([LIGHT, "--endpoint", endpoint, "--agents", str(m - 1), "--min",
                            str(m), "--run-id", f"b2-{m}", "--ttl-s", "15", "--timeout-s",
                            "300"], capture_output=True, text=True, timeout=330)
        try:
            d = json.loads(p.stdout.strip().splitlines()[-1])
        except (IndexError, json.JSONDecodeError):
            d = {"ok": False, "error": p.stderr[-300:]}
        cpu1, hwm = servers_stat(pids)
        coord1, coord_hwm = proc_stat(coordinator.pid)
        d.update(server_cpu_s=cpu1 - cpu0, server_hwm_mb=hwm, coordinator_cpu_s=coord1 - coord0,
                 coordinator_hwm_mb=coord_hwm)
        return d
    finally:
        if coordinator is not None:
            coordinator.kill()
            coordinator.wait()
        etcd.stop()


def measure_etcd_real(m):
    etcd = EtcdCluster(3)
    try:
        pids = [p.pid for p in etcd.procs]
        cpu0, _ = servers_stat(pids)
        d = run_agents(agents_argv("etcd", etcd.endpoints, m, f"b2-{m}", **ROUND_LIVENESS))
        cpu1, hwm = servers_stat(pids)
        d.update(server_cpu_s=cpu1 - cpu0, server_hwm_mb=hwm)
        return d
    finally:
        etcd.stop()


def measure_grpc(m):
    """B2's light client (rdzv_h2load) against muster serve, as b2_rendezvous.py runs it."""
    d = b2r.run(m, client="h2", hb_mode="none")
    d["ok"] = bool(d.get("round_ms"))
    d["client_cpu_s"] = d.get("client_cpu_round_s", 0) + d.get("client_cpu_connect_s", 0)
    return d


def measure_grpc_real(m):
    s = Serve()
    try:
        cpu0, _ = proc_stat(s.p.pid)
        d = run_agents(agents_argv("grpc", f"127.0.0.1:{s.port}", m, "b2", **ROUND_LIVENESS))
        cpu1, hwm = proc_stat(s.p.pid)
        d.update(server_cpu_s=cpu1 - cpu0, server_hwm_mb=hwm)
        return d
    finally:
        s.stop()


def start_real_agent(etcd, run_id, nth, spec):
    """One real agent in a process of its own (rounds 99: it stays), once its key is there."""
    p = subprocess.Popen(agents_argv("etcd", etcd.endpoints, 1, run_id, rounds=99, **spec),
                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 30
    while len(etcd.keys(f"/muster/{run_id}/nodes/")) < nth:  # its key is the nth oldest
        assert time.monotonic() < deadline and p.poll() is None
        time.sleep(0.05)
    return p


def measure_failover_light(m, on_loss, light_ttl_s=TTL_S):
    """(kill -> first RoundStarted of the next round, kill -> last) in ms among the light
    agents, and etcd's CPU seconds from the kill to the last."""
    etcd = EtcdCluster(3)
    real = []
    try:
        spec = dict(min=m - 1, max=m, last_call_ms=100)
        real = [start_real_agent(etcd, "fo", nth, spec) for nth in (1, 2)]
        rest = subprocess.Popen([LIGHT, "--endpoint", etcd.endpoints.split(",")[0], "--agents",
                                 str(m - 2), "--min", str(m - 1), "--max", str(m), "--run-id",
                                 "fo", "--ttl-s", str(light_ttl_s), "--timeout-s", "120",
                                 "--rounds", "2", "--on-coordinator-loss", on_loss],
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        killed, cpu0 = None, 0.0
        for line in rest.stderr:
            if line.startswith("round 1 ") and killed is None:
                cpu0, _ = servers_stat([p.pid for p in etcd.procs])
                real[0].send_signal(signal.SIGKILL)
                killed = time.monotonic()
        out = rest.stdout.read()
        rest.wait(timeout=60)
        cpu1, _ = servers_stat([p.pid for p in etcd.procs])
        d = json.loads(out.strip().splitlines()[-1])
        r2 = [r for r in d["rounds"] if r["round"] == 2]
        if killed is None or not r2 or not d.get("ok"):
            print(json.dumps({"failover": m, "on_loss": on_loss, **d}), file=sys.stderr)
            return None, None, None
        return (r2[0]["first"] - killed) * 1e3, (r2[0]["last"] - killed) * 1e3, cpu1 - cpu0
    finally:
        for p in real:
            p.kill()
            p.wait()
        etcd.stop()


def measure_failover(m):
    """(kill -> first RoundStarted of the next round, kill -> last) in ms (real agents)."""
    etcd = EtcdCluster(3)
    try:
        spec = dict(min=m - 1, max=m, last_call_ms=100)
        coordinator = subprocess.Popen(agents_argv("etcd", etcd.endpoints, 1, "fo", rounds=99,
                                                   **spec), stdout=subprocess.DEVNULL,
                                       stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + 30
        while not etcd.keys("/muster/fo/nodes/"):  # its key is the oldest
            assert time.monotonic() < deadline and coordinator.poll() is None
            time.sleep(0.05)
        rest = subprocess.Popen(agents_argv("etcd", etcd.endpoints, m - 1, "fo", rounds=2,
                                            **spec), stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True)
        killed = None
        for line in rest.stderr:
            if line.startswith("round 1 ") and killed is None:
                coordinator.send_signal(signal.SIGKILL)
                killed = time.monotonic()
        out = rest.stdout.read()
        rest.wait(timeout=60)
        coordinator.wait()
        d = json.loads(out.strip().splitlines()[-1])
        r2 = [r for r in d["rounds"] if r["round"] == 2]
        if killed is None or not r2:
            return None, None, None
        return (r2[0]["first"] - killed) * 1e3, (r2[0]["last"] - killed) * 1e3, None
    finally:
        etcd.stop()


def fit(xs, ys):
    n = len(xs)
    mx, my = sum(xs) / n, sum(ys) / n
    b = sum((x - mx) * (y - my) for x, y in zip(xs, ys)) / sum((x - mx) ** 2 for x in xs)
    return b, my - b * mx


def median_run(fn, m, runs):
    outs = [fn(m) for _ in range(runs)]
    ok = sorted((o for o in outs if o.get("ok")), key=lambda o: o["round_ms"])
    return (ok[len(ok) // 2], len(ok), len(outs)) if ok else (outs[-1], 0, len(outs))


def row(backend, m, res):
    o, n_ok, n = res
    if not n_ok:
        return [m, backend, "error: " + str(o.get("error", o))[:120], "", "", "", "", ""]
    coord = o.get("coordinator_cpu_s")
    return [m, backend, f"{o['round_ms']:.1f}", f"{o['server_cpu_s'] * 1e3:.0f}",
            f"{o['server_hwm_mb']:.1f}", f"{coord * 1e3:.0f}" if coord is not None else "-",
            f"{o['client_cpu_s'] * 1e3:.0f}", f"{n_ok}/{n}"]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--ms", default="16,64,256,1024")
    ap.add_argument("--runs", type=int, default=1, help="runs per M and backend (median)")
    ap.add_argument("--failover-ms", default="16,256,1024",
                    help="M for the fail-over measurement")
    ap.add_argument("--failover-runs", type=int, default=3)
    ap.add_argument("--failover-light-ttl-s", type=int, default=15,
                    help="the light agents' lease TTL in the fail-over runs (the real ones: 2 s)")
    ap.add_argument("--etcd-client", choices=("light", "real"), default="light")
    ap.add_argument("--grpc-client", choices=("h2", "real"), default="h2")
    a = ap.parse_args()
    for exe in (AGENTS, LIGHT, b2r.RDZV_H2LOAD):
        if not os.path.exists(exe):
            sys.exit(f"{exe} missing: ninja -C <build> rdzv_agents etcd_light_agents rdzv_h2load")
    c.print_header("B2 etcd: rendezvous round vs M, etcd backend beside muster's gRPC server")
    if not os.access(ETCD, os.X_OK):
        sys.exit(f"b2_etcd: no etcd at {ETCD}: install etcd-server (scripts/setup.sh), or set "
                 "MUSTER_ETCD to an etcd binary (scripts/fetch_etcd.sh prints one)")
    version = subprocess.run([ETCD, "--version"], capture_output=True, text=True).stdout
    print(f"- etcd: {ETCD} ({version.splitlines()[0] if version else 'no --version'}; "
          "MUSTER_ETCD picks another)")
    rows, pts = [], {"etcd": [], "grpc": []}
    for m in [int(x) for x in a.ms.split(",") if x]:  # --ms "": the fail-over alone
        etcd_fn = lambda m: measure_etcd(m, a.etcd_client)  # noqa: E731
        grpc_fn = measure_grpc if a.grpc_client == "h2" else measure_grpc_real
        for backend, fn in (("etcd", etcd_fn), ("grpc", grpc_fn)):
            res = median_run(fn, m, a.runs)
            rows.append(row(backend, m, res))
            if res[1]:
                pts[backend].append((m, res[0]["round_ms"]))
            print(json.dumps({"m": m, "backend": backend, **res[0]}), file=sys.stderr)
    note = ("Round: first join sent -> last RoundStarted (median of the runs). Server CPU: over "
            "the whole run (join, round); etcd: its 3 members together; RSS: peak (etcd: "
            f"summed). Clients: etcd {a.etcd_client}, gRPC {a.grpc_client}; coordinator CPU: "
            "the coordinating agent's process over the light agents' run.")
    for backend, p in pts.items():
        big = [(x, y) for x, y in p if x >= 16]
        if len(big) >= 2:
            b, a0 = fit([x for x, _ in big], [y for _, y in big])
            note += f" {backend} fit (M >= 16): round_ms = {a0:.1f} + {b * 1e3:.1f} us x M."
    if rows:
        c.table("Round time", ["M", "backend", "round ms", "server CPU ms", "server peak RSS MB",
                               "coordinator CPU ms", "client CPU ms", "runs ok"], rows, note)
    fo_rows = []
    modes = ("successor", "oldest") if a.etcd_client == "light" else ("real agents",)
    for m in [int(x) for x in a.failover_ms.split(",") if x]:
        got = {mode: [] for mode in modes}
        for _ in range(a.failover_runs):  # the modes alternate: same load for both
            for mode in modes:
                got[mode].append(measure_failover(m) if mode == "real agents"
                                 else measure_failover_light(m, mode, a.failover_light_ttl_s))
        for mode in modes:
            firsts = sorted(g[0] for g in got[mode] if g[0] is not None)
            lasts = sorted(g[1] for g in got[mode] if g[1] is not None)
            cpus = sorted(g[2] for g in got[mode] if g[2] is not None)
            fo_rows.append([m, mode, ", ".join(f"{x:.0f}" for x in firsts),
                            ", ".join(f"{x:.0f}" for x in lasts),
                            ", ".join(f"{x * 1e3:.0f}" for x in cpus) or "-",
                            f"{TTL_S * 1e3 + 1e3:.0f}",
                            c.verdict(len(lasts) == a.failover_runs and
                                      max(lasts) < TTL_S * 1e3 + 1e3)])
    if fo_rows:
        c.table("Coordinator fail-over (SIGKILL -> next round started)",
                ["M", "survivors find the next coordinator by", "first agent's RoundStarted ms",
                 "last agent's ms", "etcd CPU ms (kill -> last)", "target ms", "verdict"],
                fo_rows,
                f"Lease TTL {TTL_S} s (heartbeat 1 s x 2; light agents "
                f"{a.failover_light_ttl_s} s), last call 100 ms; each run's kill "
                "lands when every agent has round 1. successor: one read of the successor's "
                "key (rendezvous/etcd/election.h); oldest: the coordinator key, then the oldest "
                "node key (before successors). Light client: 2 real agents, M-2 light ones.")


if __name__ == "__main__":
    main()
