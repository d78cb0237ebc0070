#!/usr/bin/python3
"""B17 (issue 29 item 5): `muster run --warm-start` (docs/guides/warm-start.md) against the
exec path and torchrun, with real torch gloo ranks (bench/helpers/warm_worker.py).

- recover: 4 ranks, one SIGKILLed at step 20 of attempt 0, `--max-restarts 1`: from the kill
  (CLOCK_MONOTONIC, stamped by the rank just before it kills itself) to the last rank's first
  all_reduce of attempt 1 done. torchrun (torch.distributed.run of the same torch,
  --monitor-interval 0.1) vs muster (exec) vs muster --warm-start; per torch of --torch.
  A run that does not come back is counted as failed, with its error. The phases of the
  attempt (script start, import, init_process_group, first collective; the agent's
  worker_exited / restart_decided / worker_started events of --event-log) say where the
  time goes.
- start: 8 ranks of torch 2.x (the first of --torch), muster exec vs --warm-start, from the
  agent's start to the last rank's first all_reduce done (wall), and the CPU time of the whole
  process tree (os.wait4 of the agent: user + system of the agent and every process it or a
  descendant waited for: ranks, the template and its middle processes), against one
  `python -c "import torch"` of the same Python measured in the same run. Once all 8 ranks
  have done their collective (they then sleep), the memory: RSS and PSS
  (/proc/PID/smaps_rollup) of the ranks and of the template; then SIGUSR1 ends each rank.

Configurations are interleaved (one run of each in turn), so that the load of this shared box
hits them alike; the load average is printed for each round.
"""
import argparse
import json
import os
import pathlib
import re
import select
import signal
import statistics
import subprocess
import sys
import tempfile
import time

import common as c

WORKER = c.BENCH / "helpers" / "warm_worker.py"
KILL_RANK, KILL_STEP, STEPS = 1, 20, 40


def torch_python(which):
    """(version, python) of a torch: "2" TORCH2_PYTHON (scripts/torch2_venv.sh prints one),
    "1" TORCH_PYTHON (Debian's 1.13); (None, None) when it has no torch."""
    python = c.TORCH_PYTHON if which == "1" else c.TORCH2_PYTHON
    return (c._importable(python, "torch"), python) if python else (None, None)


def base_env(python, **extra):
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("MUSTER_", "PET_", "TORCHELASTIC_"))
           and k not in ("WORLD_SIZE", "RANK", "MASTER_PORT", "MASTER_ADDR")}
    env.update(PYTHON_EXEC=python, PYTHONUNBUFFERED="1", OMP_NUM_THREADS="1")
    env.update({k: str(v) for k, v in extra.items()})
    return env


def load():
    return "%.1f" % os.getloadavg()[0]


# ---------------------------------------------------------------- recover


def recover_argv(variant, python, n, event_log, version):
    if variant == "torchrun":
        if version.startswith("1."):
            run = [python, c.TORCHRUN113, "--standalone", "--nproc_per_node", str(n),
                   "--max_restarts", "1", "--monitor_interval", "0.1"]
        else:
            run = [python, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node",
                   str(n), "--max-restarts", "1", "--monitor-interval", "0.1"]
        return run + [str(WORKER)]
    warm = ["--warm-start"] if variant == "warm" else []
    return [c.MUSTER, "run", *warm, "--nproc-per-node", str(n), "--max-restarts", "1",
            "--event-log", str(event_log), str(WORKER)]


def first_lines(text):
    out = []
    for line in text.splitlines():
        p = line.split()
        if p and p[0] == "first":
            out.append({"restart": int(p[1]), "rank": int(p[2]), "script": int(p[3]),
                        "imported": int(p[4]), "init": int(p[5]), "first": int(p[6]),
                        "pid": int(p[7]), "preloaded": p[8] == "1"})
    return out


def descendants(pid):
    out, todo = [], [pid]
    while todo:
        try:
            kids = children(todo.pop())
        except OSError:
            continue
        out += kids
        todo += kids
    return out


def kill_tree(p):
    """SIGKILL to the agent's process group and to every descendant: torchrun 2.x starts
    its workers in sessions of their own, which a group kill misses (a hung torchrun run
    otherwise leaves its attempt's ranks waiting in init_process_group)."""
    for pid in descendants(p.pid):
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    c.kill_group(p)


def why_failed(stderr):
    """The agent's or a rank's last word: the first exception of a rank that is not in its
    "[rankN]:" form (that is attempt 0's survivors), else the last line."""
    lines = stderr.strip().splitlines() or [""]
    found = [x for x in lines if re.match(r"^\w*(Error|Exception): ", x)]
    line = found[0] if found else lines[-1]
    return re.sub(r"\S*/third_party/", "", line.strip())[:200]


def recover_once(variant, python, version, n, timeout):
    """{"s": kill -> last first collective (None: did not come back), "error", "phases"}."""
    with tempfile.TemporaryDirectory(prefix="muster-b17-") as tmp:
        tmp = pathlib.Path(tmp)
        out, log, err = tmp / "stamps", tmp / "events.jsonl", tmp / "stderr"
        env = base_env(python, B17_MODE="recover", B17_OUT=out, B17_KILL_RANK=KILL_RANK,
                       B17_KILL_STEP=KILL_STEP, B17_STEPS=STEPS)
        argv = recover_argv(variant, python, n, log, version)
        with open(err, "w") as ef:
            p = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=ef, env=env, cwd=tmp,
                                 start_new_session=True)
            try:
                rc = p.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                kill_tree(p)
                rc = None
        text = out.read_text() if out.exists() else ""
        stderr = err.read_text(errors="replace")
        kill = [int(line.split()[1]) for line in text.splitlines() if line.startswith("kill ")]
        firsts = [f for f in first_lines(text) if f["restart"] == 1]
        result = {"rc": rc, "s": None, "error": None, "phases": None}
        if rc != 0 or len(kill) != 1 or len(firsts) != n:
            result["error"] = ("timed out after %d s" % timeout if rc is None else
                               "exit %s, %d of %d ranks back" % (rc, len(firsts), n))
            result["error"] += ": " + why_failed(stderr)
            return result
        k = kill[0]
        result["s"] = (max(f["first"] for f in firsts) - k) / 1e9
        ph = {"preloaded": all(f["preloaded"] for f in firsts),
              "script": (max(f["script"] for f in firsts) - k) / 1e9,
              "imported": (max(f["imported"] for f in firsts) - k) / 1e9,
              "init": (max(f["init"] for f in firsts) - k) / 1e9,
              "first_script": (min(f["script"] for f in firsts) - k) / 1e9}
        if variant != "torchrun" and log.exists():
            events = [json.loads(line) for line in log.read_text().splitlines()]

            def at(pred):
                xs = [e["mono_ns"] for e in events if pred(e)]
                return (min(xs) - k) / 1e9 if xs else float("nan")
            ph["seen"] = at(lambda e: e["event"] == "worker_exited" and e["signal"] == 9)
            ph["stopped"] = max((e["mono_ns"] - k) / 1e9 for e in events
                                if e["event"] == "worker_exited" and e["attempt"] == 0)
            ph["decided"] = at(lambda e: e["event"] == "restart_decided")
            ph["started_event"] = at(lambda e: e["event"] == "worker_started"
                                     and e["attempt"] == 1)
            ph["how"] = sorted({e.get("start", "?") for e in events
                                if e["event"] == "worker_started" and e["attempt"] == 1})
        result["phases"] = ph
        return result


def bench_recover(torches, runs, n, timeout):
    rows, phase_rows, board = [], [], []
    for version, python in torches:
        variants = ["torchrun", "exec", "warm"]
        res = {v: [] for v in variants}
        loads = []
        for i in range(runs):
            loads.append(load())
            for v in variants:
                r = recover_once(v, python, version, n, timeout)
                res[v].append(r)
                print(f"# recover torch {version} run {i + 1}/{runs} {v}: "
                      + (f"{r['s']:.3f} s" if r["s"] is not None else f"FAILED ({r['error']})"))
                sys.stdout.flush()
        oks = {v: [r["s"] for r in res[v] if r["s"] is not None] for v in variants}
        med = {v: statistics.median(oks[v]) if oks[v] else float("nan") for v in variants}
        for v in variants:
            label = {"torchrun": f"torchrun {version}", "exec": "muster (exec)",
                     "warm": "muster --warm-start"}[v]
            xs = oks[v]
            fails = [r["error"] for r in res[v] if r["s"] is None]
            rows.append([f"torch {version}", label, f"{len(xs)} of {len(res[v])}",
                         f"{min(xs):.3f}" if xs else "-", f"{med[v]:.3f}" if xs else "-",
                         f"{max(xs):.3f}" if xs else "-",
                         c.ratio(med[v], med["warm"]) if xs else "-",
                         (fails[0] if fails else "")])
            for r in res[v]:
                if r["phases"] is not None and v != "torchrun":
                    ph = r["phases"]
                    phase_rows.append([f"torch {version}", label, f"{ph['seen']:.3f}",
                                       f"{ph['stopped']:.3f}", f"{ph['decided']:.3f}",
                                       f"{ph['first_script']:.3f}", f"{ph['script']:.3f}",
                                       f"{ph['imported']:.3f}", f"{ph['init']:.3f}",
                                       f"{r['s']:.3f}", ",".join(ph.get("how", []))])
        print(f"# torch {version}: load average (1 min) at each round: {' '.join(loads)}")
        ok = bool(oks["warm"]) and med["warm"] < 1 and bool(oks["exec"]) and \
            med["exec"] >= 5 * med["warm"]
        tr = f"torchrun {version}: {len(oks['torchrun'])} of {runs} came back" + (
            f", p50 {med['torchrun']:.2f} s" if oks["torchrun"] else "")
        failed = [r for r in res["torchrun"] if r["s"] is None]
        exits = [r for r in failed if r["rc"] is not None]
        hung = len(failed) - len(exits)
        if failed:
            tr += " (" + "; ".join(
                ([f"{len(exits)} exited {exits[0]['rc']}, first: "
                  f"{exits[0]['error'].split(': ', 1)[-1]}"] if exits else []) +
                ([f"{hung} hung past the {timeout:g} s deadline"] if hung else [])) + ")"
        board.append(c.board_row(
            f"B17 warm start: recover from a SIGKILLed rank, 4 ranks, torch {version}",
            "< 1 s with --warm-start, >= 5x better than exec (issue 29)",
            f"warm p50 {med['warm']:.3f} s (max {max(oks['warm'] or [float('nan')]):.3f}), "
            f"exec p50 {med['exec']:.2f} s: {c.ratio(med['exec'], med['warm'])}; "
            f"{runs} runs each, load {min(loads)}-{max(loads)}", tr, c.verdict(ok)))
    c.table(f"recover: kill of rank {KILL_RANK} at step {KILL_STEP} -> last rank's first "
            f"all_reduce of attempt 1, {n} ranks, gloo, seconds",
            ["torch", "agent", "came back", "min", "p50", "max", "p50 / warm p50",
             "first failure"], rows)
    c.table("where the time goes (each muster run; seconds after the kill, the last rank's "
            "unless said)",
            ["torch", "agent", "death seen", "attempt 0 stopped", "restart decided",
             "first rank's script starts", "script starts", "torch imported",
             "init_process_group done", "first all_reduce done", "how started"], phase_rows)
    return board


# ---------------------------------------------------------------- start + memory


def smaps(pid):
    out = {}
    with open(f"/proc/{pid}/smaps_rollup") as f:
        for line in f:
            p = line.split()
            if len(p) >= 3 and p[0].endswith(":") and p[2] == "kB":
                out[p[0][:-1]] = int(p[1])
    return out


def children(pid):
    out = []
    for task in os.listdir(f"/proc/{pid}/task"):
        try:
            with open(f"/proc/{pid}/task/{task}/children") as f:
                out += [int(x) for x in f.read().split()]
        except OSError:
            pass
    return out


def tree_cpu(root):
    """user + system s of ROOT and every live descendant, with what each has reaped
    (/proc/PID/stat utime, stime, cutime, cstime; clock ticks, 10 ms each)."""
    total, todo = 0, [root]
    while todo:
        pid = todo.pop()
        try:
            with open(f"/proc/{pid}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
            todo += children(pid)
        except OSError:
            continue  # it exited meanwhile: its reaper counts it
        total += sum(int(x) for x in fields[11:15])  # fields 14-17 of proc(5)
    return total / os.sysconf("SC_CLK_TCK")


def import_reference(python, code):
    """(cpu s, wall s) of one `python -c CODE`."""
    t0 = time.monotonic()
    p = subprocess.Popen([python, "-c", code], env=base_env(python))
    _, status, ru = os.wait4(p.pid, 0)
    p.returncode = os.waitstatus_to_exitcode(status)
    assert p.returncode == 0, p.returncode
    return ru.ru_utime + ru.ru_stime, time.monotonic() - t0


# The reference: one interpreter that imports torch; with its exit (the interpreter's
# teardown with torch loaded) and without (os._exit right after the import, as the
# template's rank-less end is).
REFERENCES = [("one `python -c \"import torch\"`", "import torch"),
              ("the same, os._exit(0) after the import", "import torch, os; os._exit(0)")]


PR_SET_CHILD_SUBREAPER = 36


def become_subreaper():
    """The template outlives the agent by a moment (it exits on EOF of its socket) and is
    not the agent's to reap: as a subreaper this process inherits and reaps it, so that its
    CPU time (the import) is counted."""
    import ctypes
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) != 0:
        raise OSError(ctypes.get_errno(), "prctl(PR_SET_CHILD_SUBREAPER)")


def reap_orphans(timeout=30):
    """user + system s of every process re-parented to this one, once all have exited."""
    cpu, deadline = 0.0, time.monotonic() + timeout
    while True:
        try:
            pid, _, ru = os.wait4(-1, os.WNOHANG)
        except ChildProcessError:
            return cpu
        if pid:
            cpu += ru.ru_utime + ru.ru_stime
        elif time.monotonic() > deadline:
            raise RuntimeError(f"orphans still alive {timeout} s after the agent exited")
        else:
            time.sleep(0.01)


def start_once(warm, python, n, timeout):
    """{"wall", "cpu", "ranks": [smaps], "template": smaps or None, "preloaded"}."""
    with tempfile.TemporaryDirectory(prefix="muster-b17-") as tmp:
        tmp = pathlib.Path(tmp)
        fifo = tmp / "stamps"
        os.mkfifo(fifo)
        # O_RDWR: the open does not wait for a writer and a rank's close is no EOF.
        rd = os.open(fifo, os.O_RDWR | os.O_NONBLOCK)
        env = base_env(python, B17_MODE="idle", B17_OUT=fifo)
        argv = [c.MUSTER, "run", *(["--warm-start"] if warm else []), "--nproc-per-node",
                str(n), str(WORKER)]
        deadline = time.monotonic() + timeout
        t0 = time.monotonic_ns()
        p = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                             env=env, cwd=tmp, start_new_session=True)
        try:
            buf = b""
            while buf.count(b"\n") < n:
                left = deadline - time.monotonic()
                if left <= 0 or p.poll() is not None:
                    raise RuntimeError(f"{n} ranks not up in {timeout} s (agent rc {p.poll()})")
                if select.select([rd], [], [], left)[0]:
                    buf += os.read(rd, 65536)
            firsts = first_lines(buf.decode())
            wall = (max(f["first"] for f in firsts) - t0) / 1e9
            cpu_up = tree_cpu(p.pid)
            pids = {f["pid"] for f in firsts}
            ranks = [smaps(pid) for pid in pids]
            template = [k for k in children(p.pid) if k not in pids and
                        b"warm template" in open(f"/proc/{k}/cmdline", "rb").read()]
            tmpl = smaps(template[0]) if template else None
            for pid in pids:
                os.kill(pid, signal.SIGUSR1)
            _, status, ru = os.wait4(p.pid, 0)
            p.returncode = os.waitstatus_to_exitcode(status)
            template_cpu = reap_orphans()
        except BaseException:
            kill_tree(p)
            raise
        finally:
            os.close(rd)
        assert p.returncode == 0, p.returncode
        return {"wall": wall, "cpu_up": cpu_up, "cpu": ru.ru_utime + ru.ru_stime + template_cpu,
                "template_cpu": template_cpu, "ranks": ranks,
                "template": tmpl, "preloaded": all(f["preloaded"] for f in firsts)}


def bench_start(version, python, runs, n, timeout):
    become_subreaper()
    ref, res, loads = {code: [] for _, code in REFERENCES}, {"exec": [], "warm": []}, []
    for i in range(runs):
        loads.append(load())
        for _, code in REFERENCES:
            ref[code].append(import_reference(python, code))
        for v in ("exec", "warm"):
            r = start_once(v == "warm", python, n, timeout)
            assert r["preloaded"] == (v == "warm"), r
            res[v].append(r)
            print(f"# start torch {version} run {i + 1}/{runs} {v}: wall {r['wall']:.2f} s, "
                  f"cpu {r['cpu_up']:.2f} s up, {r['cpu']:.2f} s with the exits (template {r['template_cpu']:.2f} s; import torch: "
                  f"cpu {ref[REFERENCES[0][1]][-1][0]:.2f} s, "
                  f"{ref[REFERENCES[1][1]][-1][0]:.2f} s without the exit)")
            sys.stdout.flush()
    imp_cpu = statistics.median(x[0] for x in ref[REFERENCES[1][1]])  # the stricter one
    rows = []
    for label, code in REFERENCES:
        cpu = statistics.median(x[0] for x in ref[code])
        rows.append([label, f"{statistics.median(x[1] for x in ref[code]):.2f}", "-",
                     f"{cpu:.2f}", "-", "-", c.ratio(cpu, imp_cpu)])
    med = {}
    for v in ("exec", "warm"):
        wall = statistics.median(r["wall"] for r in res[v])
        up = statistics.median(r["cpu_up"] for r in res[v])
        cpu = statistics.median(r["cpu"] for r in res[v])
        tcpu = statistics.median(r["template_cpu"] for r in res[v])
        med[v] = (wall, up, cpu)
        rows.append([f"muster {'--warm-start' if v == 'warm' else '(exec)'}, {n} ranks",
                     f"{wall:.2f}", f"{up:.2f}", f"{cpu:.2f}",
                     f"{tcpu:.2f}" if v == "warm" else "-", c.ratio(up, imp_cpu),
                     c.ratio(cpu, imp_cpu)])
    print(f"# start: load average (1 min) at each round: {' '.join(loads)}")
    c.table(f"first start: agent start -> last of {n} ranks' first all_reduce done, torch "
            f"{version}, p50 of {runs}; CPU = user + system of the whole process tree: up to the "
            "first all_reduce (/proc/PID/stat) and for the whole run with every exit (wait4)",
            ["what", "wall s", "CPU s to the all_reduce", "CPU s with the exits",
             "of which the template", "CPU to the all_reduce / import", "with exits / import"],
            rows)

    def mb(kb):
        return f"{kb / 1024:.0f}"

    mem_rows = []
    for v in ("exec", "warm"):
        rss = statistics.median(sum(s["Rss"] for s in r["ranks"]) for r in res[v])
        pss = statistics.median(sum(s["Pss"] for s in r["ranks"]) for r in res[v])
        priv = statistics.median(sum(s.get("Private_Clean", 0) + s.get("Private_Dirty", 0)
                                     for s in r["ranks"]) for r in res[v])
        mem_rows.append([f"{n} idle ranks, {v}", mb(rss), mb(pss), mb(priv)])
        print(f"# memory {v}, each run (ranks RSS/PSS/private MB; template): " + "; ".join(
            "%s/%s/%s%s" % (mb(sum(s["Rss"] for s in r["ranks"])),
                            mb(sum(s["Pss"] for s in r["ranks"])),
                            mb(sum(s.get("Private_Clean", 0) + s.get("Private_Dirty", 0)
                                   for s in r["ranks"])),
                            " (%s/%s/%s)" % (mb(r["template"]["Rss"]), mb(r["template"]["Pss"]),
                                             mb(r["template"].get("Private_Clean", 0) +
                                                r["template"].get("Private_Dirty", 0)))
                            if r["template"] else "") for r in res[v]))
        if v == "warm":
            t = [r["template"] for r in res[v] if r["template"]]
            if t:
                trss = statistics.median(s["Rss"] for s in t)
                tpss = statistics.median(s["Pss"] for s in t)
                tpriv = statistics.median(s.get("Private_Clean", 0) + s.get("Private_Dirty", 0)
                                          for s in t)
                mem_rows.append(["the template", mb(trss), mb(tpss), mb(tpriv)])
                mem_rows.append([f"{n} ranks + template, warm", mb(rss + trss), mb(pss + tpss),
                                 mb(priv + tpriv)])
                med["warm_pss_total"] = pss + tpss
        else:
            med["exec_pss_total"] = pss
    c.table(f"memory (MB, /proc/PID/smaps_rollup, summed; p50 of {runs}): {n} ranks sleeping "
            "after init_process_group and one all_reduce",
            ["processes", "RSS", "PSS", "private (USS)"], mem_rows)
    board = [c.board_row(
        f"B17 warm start: first start, {n} ranks, torch {version}",
        "CPU <= 1.5x one import torch (issue 29)",
        f"CPU to the first all_reduce: warm {med['warm'][1]:.2f} s = "
        f"{c.ratio(med['warm'][1], imp_cpu)} one import torch ({imp_cpu:.2f} s, no exit), exec "
        f"{med['exec'][1]:.2f} s = {c.ratio(med['exec'][1], imp_cpu)}; with the exits warm "
        f"{c.ratio(med['warm'][2], imp_cpu)}, exec {c.ratio(med['exec'][2], imp_cpu)}; wall "
        f"warm {med['warm'][0]:.2f} s, exec {med['exec'][0]:.2f} s; p50 of {runs}, load "
        f"{min(loads)}-{max(loads)}", "- (torchrun execs, as muster (exec))",
        c.verdict(med["warm"][1] <= 1.5 * imp_cpu))]
    if "warm_pss_total" in med:
        board.append(c.board_row(
            f"B17 warm start: memory of {n} idle ranks, torch {version}",
            "- (issue 29 asks for the figure)",
            f"PSS ranks + template {med['warm_pss_total'] / 1024:.0f} MB (warm) vs "
            f"{med['exec_pss_total'] / 1024:.0f} MB (exec)", "- (torchrun execs, as exec)",
            "-"))
    return board


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=5, help="runs of each configuration")
    ap.add_argument("--torch", default="2,1",
                    help="torches for recover: 2 (TORCH2_PYTHON), "
                         "1 (Debian's 1.13); the first also runs start")
    ap.add_argument("--parts", default="recover,start")
    ap.add_argument("--ranks", type=int, default=4, help="ranks of recover")
    ap.add_argument("--start-ranks", type=int, default=8)
    ap.add_argument("--timeout", type=float, default=90, help="deadline of each run, s")
    c.add_summary_arg(ap)
    args = ap.parse_args()
    c.check_binaries()
    c.print_header("B17 warm start")
    torches = []
    for which in args.torch.split(","):
        version, python = torch_python(which)
        if version:
            torches.append((version, python))
            print(f"- torch {version}: {python}")
        else:
            print(f"# NOTE: no torch {which}.x here: left out")
    print(f"- load average at start: {' '.join('%.2f' % x for x in os.getloadavg())}")
    board = []
    parts = args.parts.split(",")
    if "recover" in parts:
        board += bench_recover(torches, args.runs, args.ranks, args.timeout)
    if "start" in parts and torches:
        board += bench_start(*torches[0], args.runs, args.start_ranks, args.timeout)
    c.write_summary(args.summary_json, board)
    return 0


if __name__ == "__main__":
    sys.exit(main())
