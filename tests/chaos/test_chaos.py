"""Chaos test (issue #8 item 3): an elastic job of 4 simulated pods, real torch workers
training a tiny model with checkpoints (train.py), while a seeded random driver kills
workers (SIGKILL/SIGTERM), SIGKILLs agents (and restarts them, as a kubelet would), takes a
pod's link down for 2-5 s and delays DNS for a restarted agent. Invariants are checked while
it runs and at the end; any breach fails the test with the whole event timeline.

    MUSTER_CHAOS_SECONDS   length of the chaos window (default 180)
    MUSTER_CHAOS_SEED      replay a run's random schedule (the seed is printed)
    MUSTER_CHAOS_GAP       MIN:MAX seconds between two events (default 4:12)

The pods (tests/integration/pods.py) are network + PID namespaces on a bridge. pod0..pod3 run
`muster run --nnodes 2:4` with 2, 1, 2, 1 workers; pod4 runs `muster serve`, the standalone
rendezvous server DESIGN §1 has for elastic jobs whose server must outlive every worker pod
(an embedded server would take the job down with its agent). Each agent runs under a small
`sh` as the pod's PID 1, so the kernel does not kill the pod's processes when the agent dies:
whether anything outlives the agent is up to muster (watchdog, PDEATHSIG).
"""
import datetime
import heapq
import json
import os
import random
import re
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parents[0] / "integration"))
from conftest import (MUSTER, TORCH_PYTHON, TORCH_VERSION,  # noqa: E402,F401
                      _binaries_exist, _no_leftover_processes, muster_env, pid_alive)
from pods import Pods, read_text  # noqa: E402

TRAIN = HERE / "train.py"
NPROC = (2, 1, 2, 1)               # workers per chaos pod; the full world is 6
WORLD = sum(NPROC)
RDZV = len(NPROC)                  # index of the pod that runs `muster serve`
ENDPOINT = f"pod{RDZV}:29400"
RUN_ID = "chaos"
CONF = "heartbeat_interval=1s,heartbeat_misses=3,last_call_timeout=2s,join_timeout=90s"
MAX_DISRUPTED = 2                  # pods without a working agent at once: 4 - 2 >= MIN (2)
AGENT_GRACE = 1.0                  # s a process of a pod may outlive the pod's agent
# The pod's PID 1: runs the agent, keeps the PID namespace alive 2 s after it (so leftovers
# would be seen), and exits with the agent's status.
WRAP = '"$@"; rc=$?; sleep 2; exit $rc'
# Event kinds and their weights in the random schedule.
KINDS = (("worker_sigkill", 3), ("worker_sigterm", 2), ("agent_sigkill", 2), ("link_down", 2))


def chaos_seconds():
    raw = os.environ.get("MUSTER_CHAOS_SECONDS", "180")
    try:
        value = float(raw)
    except ValueError:
        value = -1
    if value < 10:
        raise pytest.UsageError(f"MUSTER_CHAOS_SECONDS={raw!r}: give the chaos window in "
                                f"seconds, at least 10 (CI uses 180)")
    return value


def chaos_gap():
    raw = os.environ.get("MUSTER_CHAOS_GAP", "4:12")
    try:
        lo, hi = (float(x) for x in raw.split(":"))
    except ValueError:
        lo = hi = -1
    if not 0.5 <= lo <= hi:
        raise pytest.UsageError(f"MUSTER_CHAOS_GAP={raw!r}: give MIN:MAX seconds between "
                                f"events, 0.5 <= MIN <= MAX (default 4:12)")
    return lo, hi


def chaos_seed():
    raw = os.environ.get("MUSTER_CHAOS_SEED")
    if raw is None:
        return random.SystemRandom().randrange(1 << 32)
    try:
        return int(raw)
    except ValueError:
        raise pytest.UsageError(f"MUSTER_CHAOS_SEED={raw!r}: give an integer (the seed a "
                                f"previous run printed)") from None


def wall(stamp):
    """Epoch seconds of an RFC 3339 time as muster writes it (event log, muster status)."""
    m = re.match(r"(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d)(?:\.(\d+))?(Z|[+-]\d\d:\d\d)$", stamp)
    assert m, f"unexpected time format {stamp!r}"
    frac = (m.group(2) or "0")[:6].ljust(6, "0")
    tz = "+00:00" if m.group(3) == "Z" else m.group(3)
    return datetime.datetime.fromisoformat(f"{m.group(1)}.{frac}{tz}").timestamp()


def read_json_lines(path):
    rows = []
    for line in read_text(path).splitlines():
        try:
            rows.append(json.loads(line))
        except ValueError:
            pass  # a line being written
    return rows


# -- /proc ----------------------------------------------------------------------------------

def scan_proc():
    """{pid namespace: [process dict]} for every live process (zombies left out)."""
    out = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        pid = int(entry)
        try:
            ns = os.readlink(f"/proc/{pid}/ns/pid")
            with open(f"/proc/{pid}/stat") as f:
                stat = f.read()
            head, tail = stat.rsplit(")", 1)
            fields = tail.split()
            if fields[0] == "Z":
                continue
            with open(f"/proc/{pid}/status") as f:
                nspid = next(int(l.split()[-1]) for l in f if l.startswith("NSpid:"))
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                cmd = f.read().split(b"\0")
        except (OSError, StopIteration, ValueError):
            continue
        out.setdefault(ns, []).append({"pid": pid, "ppid": int(fields[1]), "inner": nspid,
                                       "comm": head.split("(", 1)[1],
                                       "cmd": [c.decode(errors="replace") for c in cmd if c]})
    return out


def worker_env(pid):
    try:
        with open(f"/proc/{pid}/environ", "rb") as f:
            env = dict(kv.split(b"=", 1) for kv in f.read().split(b"\0") if b"=" in kv)
    except OSError:
        return None
    return {k.decode(): v.decode(errors="replace") for k, v in env.items()}


def is_worker(p):
    """A training process (python ... train.py), not the agent whose command line names it."""
    return p["comm"].startswith("python") and any(c.endswith("train.py") for c in p["cmd"])


# -- the driver ---------------------------------------------------------------------------

class Incarnation:
    """One agent process of a pod (a restarted agent is a new incarnation)."""

    def __init__(self, pod, k, proc, events, dns_delay):
        self.pod, self.k, self.proc, self.events = pod, k, proc, events
        self.dns_delay = dns_delay
        self.started = time.time()
        self.ns = self.wrapper = self.agent = None
        self.agent_dead_at = self.ended_at = self.killed_at = None
        self.rc = None

    @property
    def name(self):
        return f"{self.pod.name}#{self.k}"


class Chaos:
    def __init__(self, pods, root, seed, seconds):
        self.pods, self.root, self.seed, self.seconds = pods, root, seed, seconds
        self.gap = chaos_gap()
        self.rng = random.Random(seed)
        self.t0 = time.time()
        self.timeline = []
        self.violations = []
        self.incs = {i: [] for i in range(len(NPROC))}
        self.kills = []          # dicts: kind, pod, inc, t, and for workers inner/rank/sig
        self.outages = []        # dicts: pod, down, up
        self.actions = []        # heap of (t, seq, fn)
        self.seq = 0
        self.finishing = False
        self.rows = []
        self.offsets = {}
        self.tokens = {}         # round token -> {"world","restart","master","ranks":{}, ...}
        self.worker_token = {}   # worker id (pids repeat across a pod's agents) -> round token
        self.chaos_start = None
        self.status_docs = []    # (t, doc) from `muster status --watch --json`
        self.counts = {k: 0 for k, _ in KINDS}
        self.counts.update(dns_delay=0, skipped=0, agent_restart=0)
        self.server = None
        self.watch = None
        self.job_over = None     # the job's status when it ended before the stop file

    # -- bookkeeping ------------------------------------------------------------------------
    def log(self, what, t=None):
        t = time.time() if t is None else t
        self.timeline.append((t, what))
        print(f"[chaos {t - self.t0:8.2f}s] {what}", flush=True)

    def violate(self, what):
        if what not in (v for _, v in self.violations):
            self.violations.append((time.time(), what))
            self.log(f"VIOLATION: {what}")

    def at(self, t, fn, kind):
        """Runs fn at time t; kind "event" (a chaos event) or "repair" (link up, DNS)."""
        self.seq += 1
        heapq.heappush(self.actions, (t, self.seq, kind, fn))

    def current(self, i):
        return self.incs[i][-1] if self.incs[i] else None

    def timeline_text(self):
        rows = sorted(self.timeline, key=lambda r: r[0])
        return "\n".join(f"  {t - self.t0:8.2f}s  {w}" for t, w in rows)

    # -- processes --------------------------------------------------------------------------
    def env(self, pod):
        return muster_env(CHAOS_DIR=self.root, POD_IP=pod.ip, OMP_NUM_THREADS=1)

    def start_server(self):
        pod = self.pods[RDZV]
        self.server = pod.run([MUSTER, "serve", "--port", "29400", "--rdzv-id", RUN_ID,
                               "--heartbeat-interval", "1s", "--heartbeat-misses", "3"],
                              env=muster_env())

    def start_agent(self, i, dns_delay=0.0):
        pod = self.pods[i]
        k = len(self.incs[i])
        events = self.root / f"{pod.name}.{k}.events.jsonl"
        args = ["sh", "-c", WRAP, "sh", MUSTER, "run", "--nnodes", f"2:{len(NPROC)}",
                "--nproc-per-node", NPROC[i], "--rdzv-endpoint", ENDPOINT, "--rdzv-id", RUN_ID,
                "--max-restarts", 100000, "--rdzv-conf", CONF, "--shutdown-timeout", "5s",
                "--event-log", events, "--status-file", self.root / f"{pod.name}.{k}.status.json",
                TRAIN]
        if dns_delay:
            # Like a headless Service whose record appears after the Pod starts.
            pod.write_hosts(withhold=[f"pod{RDZV}"])
            self.at(time.time() + dns_delay, lambda: self.dns_ready(i), "repair")
        inc = Incarnation(pod, k, pod.run(args, env=self.env(pod)), events, dns_delay)
        self.incs[i].append(inc)
        self.log(f"start agent {inc.name}" + (f" with the rendezvous host's DNS entry withheld "
                                              f"for {dns_delay:.1f} s" if dns_delay else ""))
        return inc

    def dns_ready(self, i):
        self.pods[i].add_host(f"pod{RDZV}", self.pods[RDZV].ip)
        self.log(f"{self.pods[i].name}: DNS entry for pod{RDZV} appears")

    def resolve(self, inc):
        """Finds the pod's PID 1 (the sh wrapper), its namespace and the agent under it."""
        if inc.wrapper is None:
            try:
                with open(f"/proc/{inc.proc.pid}/task/{inc.proc.pid}/children") as f:
                    kids = [int(x) for x in f.read().split()]
            except OSError:
                kids = []
            if kids:
                inc.wrapper = kids[0]
                inc.ns = os.readlink(f"/proc/{inc.wrapper}/ns/pid")
        if inc.wrapper is not None and inc.agent is None and inc.agent_dead_at is None:
            try:
                with open(f"/proc/{inc.wrapper}/task/{inc.wrapper}/children") as f:
                    kids = [int(x) for x in f.read().split()]
                for kid in kids:
                    with open(f"/proc/{kid}/cmdline", "rb") as f:
                        if f.read().split(b"\0")[0] == str(MUSTER).encode():
                            inc.agent = kid
            except OSError:
                pass

    def poll_incarnations(self):
        now = time.time()
        for i in range(len(NPROC)):
            inc = self.current(i)
            if inc is None or inc.ended_at is not None:
                continue
            self.resolve(inc)
            if inc.agent is not None and inc.agent_dead_at is None and not pid_alive(inc.agent):
                inc.agent_dead_at = now
            rc = inc.proc.poll()
            if rc is None:
                continue
            inc.rc, inc.ended_at = rc, now
            if inc.agent_dead_at is None:
                inc.agent_dead_at = now
            last = read_text(inc.proc.err_path).strip().splitlines()[-1:] or [""]
            self.log(f"agent {inc.name} exited {rc}: {last[0][-300:]}")
            if not self.finishing and rc not in (137, 138):
                doc = self.status()
                if doc and doc["phase"] in ("Failed", "Succeeded"):
                    # The job ended: no more chaos, no restarts; check_early_end judges it.
                    self.job_over, self.finishing = doc, True
                    self.log(f"the job ended during the chaos: {doc.get('outcome')}")
            self.check_agent_exit(inc)
            if not self.finishing:
                dns = self.rng.uniform(1.5, 4.0) if self.rng.random() < 0.5 or \
                    self.counts["dns_delay"] == 0 else 0.0
                self.counts["agent_restart"] += 1
                self.counts["dns_delay"] += bool(dns)
                self.start_agent(i, dns)

    def check_agent_exit(self, inc):
        """DESIGN §4.4: a SIGKILLed agent reports 137 (through its PID 1), one cut off from
        the server 138; during the chaos no other exit is expected."""
        rc = inc.rc
        if inc.killed_at is not None:
            if rc != 137:
                self.violate(f"agent {inc.name} was SIGKILLed but its pod exited {rc}")
            return
        cut = [o for o in self.outages if o["pod"] == inc.pod.index and
               o["down"] >= inc.started - 1 and o["down"] <= inc.ended_at]
        if cut and (rc == 138 or not self.finishing):
            if rc != 138:
                self.violate(f"agent {inc.name} lost its link at "
                             f"{cut[-1]['down'] - self.t0:.2f}s and exited {rc}, not 138 "
                             f"(DESIGN §4.4: server lost)")
            return
        if self.finishing:
            return  # checked at the end: every agent must exit 0
        self.violate(f"agent {inc.name} exited {rc} with no chaos event to explain it; "
                     f"stderr tail:\n{read_text(inc.proc.err_path)[-2500:]}")

    # -- invariants while running -----------------------------------------------------------
    def sample(self):
        """Per pod: no process outlives its agent; the workers alive belong to one round and
        are at most --nproc-per-node."""
        procs = scan_proc()
        now = time.time()
        for i in range(len(NPROC)):
            for inc in self.incs[i]:
                # Once the pod's PID 1 has exited the kernel has emptied its namespace, and
                # the namespace's inode number may already name the next incarnation's.
                if inc.ns is None or inc.ended_at is not None:
                    continue
                live = procs.get(inc.ns, [])
                if inc.agent_dead_at is not None and now - inc.agent_dead_at > AGENT_GRACE:
                    left = [p for p in live if p["inner"] != 1 and p["comm"] != "sleep"]
                    if left:
                        self.violate(
                            f"{inc.name}: {len(left)} process(es) outlived the agent by "
                            f"{now - inc.agent_dead_at:.1f} s: " +
                            "; ".join(f"pid {p['pid']} {' '.join(p['cmd'])[:120]}" for p in left))
                workers = [p for p in live if is_worker(p) and p["ppid"] == inc.agent]
                if len(workers) > NPROC[i]:
                    self.violate(f"{inc.name}: {len(workers)} workers alive, more than "
                                 f"--nproc-per-node {NPROC[i]}")
                rounds = set()
                for w in workers:
                    env = worker_env(w["pid"])
                    if env:
                        rounds.add((env.get("MASTER_ADDR"), env.get("MASTER_PORT"),
                                    env.get("TORCHELASTIC_RESTART_COUNT")))
                if len(rounds) > 1:
                    self.violate(f"{inc.name}: workers of different rounds alive at once "
                                 f"(master, port, restart count): {sorted(rounds, key=repr)}")
        return procs

    def read_records(self):
        d = self.root / "records"
        for path in sorted(d.iterdir()):
            off = self.offsets.get(path, 0)
            with open(path, "rb") as f:
                f.seek(off)
                data = f.read()
            end = data.rfind(b"\n") + 1
            if end == 0:
                continue
            self.offsets[path] = off + end
            for line in data[:end].decode().splitlines():
                row = json.loads(line)
                self.rows.append(row)
                self.check_row(row)

    def check_row(self, r):
        who = f"rank {r['rank']} on {r['host']} (pid {r['pid']}, restart {r['restart']})"
        if r.get("stale_found"):
            self.violate(f"{who} read keys of an earlier round through this round's store: "
                         f"{r['stale_found'][:5]}")
        if r["ev"] == "round":
            if not r["probe_works"]:
                self.violate(f"{who}: the store probe does not find the worker's own key")
            if r["joined"] != r["world"]:
                self.violate(f"{who}: this round's store counter says {r['joined']} workers "
                             f"joined, WORLD_SIZE is {r['world']} (keys leaking between rounds?)")
            tok = self.tokens.setdefault(r["token"], {"world": r["world"], "restart": r["restart"],
                                                      "master": r["master"], "ranks": {},
                                                      "t": r["t"], "last_step": {}})
            for field in ("world", "restart", "master"):
                if tok[field] != r[field]:
                    self.violate(f"round {r['token'][:8]}: {who} has {field} {r[field]}, another "
                                 f"worker of the same round has {tok[field]}")
            if not 0 <= r["rank"] < r["world"]:
                self.violate(f"{who}: RANK outside 0..WORLD_SIZE-1 ({r['world']})")
            other = tok["ranks"].get(r["rank"])
            if other and other != (r["host"], r["pid"], r["id"]):
                self.violate(f"round {r['token'][:8]}: rank {r['rank']} held by both {other} "
                             f"and {(r['host'], r['pid'])}")
            tok["ranks"][r["rank"]] = (r["host"], r["pid"], r["id"])
            self.worker_token[r["id"]] = r["token"]
            tok["t"] = min(tok["t"], r["t"])
        if r["ev"] == "step":
            token = self.worker_token.get(r["id"])
            if token:
                self.tokens[token]["last_step"][r["rank"]] = r["t"]
            if not r["in_sync"]:
                self.violate(f"{who}: parameters differ between ranks at step {r['step']}")

    # -- rendezvous status ------------------------------------------------------------------
    def status_cmd(self, *extra):
        return ["ip", "netns", "exec", self.pods[RDZV].ns, str(MUSTER), "status",
                "--rdzv-endpoint", "127.0.0.1:29400", "--rdzv-id", RUN_ID, "--timeout", "10",
                "--json", *extra]

    def status(self):
        r = subprocess.run(self.status_cmd(), capture_output=True, text=True, timeout=30)
        if r.returncode != 0:
            return None
        return json.loads(r.stdout)

    def start_watch(self):
        self.watch = subprocess.Popen(self.status_cmd("--watch"), stdout=subprocess.PIPE,
                                      stderr=subprocess.PIPE, text=True)

        def reader():
            last = None
            for line in self.watch.stdout:
                try:
                    doc = json.loads(line)
                except ValueError:
                    continue
                self.status_docs.append((time.time(), doc))
                summary = (doc["phase"], doc["round"], doc["restarts_used"],
                           tuple(sorted(n["host"] for n in doc["nodes"]
                                        if n.get("group_rank", -1) >= 0)))
                if summary != last:
                    last = summary
                    self.log(f"job: {doc['phase']}, round {doc['round']}, restarts "
                             f"{doc['restarts_used']}, in the round: {', '.join(summary[3])}")

        threading.Thread(target=reader, daemon=True).start()

    # -- chaos events -----------------------------------------------------------------------
    def disrupted(self, i):
        inc = self.current(i)
        if inc is None or inc.ended_at is not None:
            return True
        if inc.agent_dead_at is not None or inc.killed_at is not None:
            return True
        if any(o["pod"] == i and o["up"] is None for o in self.outages):
            return True
        if time.time() - inc.started < 45 and not any(
                e.get("event") == "worker_started" for e in read_json_lines(inc.events)):
            return True  # a restarted agent has not run workers yet
        return False

    def live_workers(self, i, procs):
        inc = self.current(i)
        if inc is None or inc.ns is None or inc.agent is None:
            return []
        return [p for p in procs.get(inc.ns, []) if is_worker(p) and p["ppid"] == inc.agent]

    def fire(self, kind, pick):
        procs = scan_proc()
        order = [(pick + j) % len(NPROC) for j in range(len(NPROC))]
        if kind.startswith("worker"):
            sig = signal.SIGKILL if kind == "worker_sigkill" else signal.SIGTERM
            for i in order:
                workers = self.live_workers(i, procs)
                if workers:
                    w = workers[pick % len(workers)]
                    env = worker_env(w["pid"]) or {}
                    try:
                        os.kill(w["pid"], sig)
                    except ProcessLookupError:
                        continue
                    t = time.time()
                    inc = self.current(i)
                    self.kills.append({"kind": "worker", "pod": i, "inc": inc, "t": t,
                                       "inner": w["inner"], "outer": w["pid"], "sig": int(sig),
                                       "rank": int(env.get("RANK", -1)),
                                       "restart": env.get("TORCHELASTIC_RESTART_COUNT")})
                    self.counts[kind] += 1
                    self.log(f"{sig.name} worker rank {env.get('RANK')} on {inc.name} (pid "
                             f"{w['inner']} in the pod, restart count "
                             f"{env.get('TORCHELASTIC_RESTART_COUNT')})", t)
                    return
            self.counts["skipped"] += 1
            self.log(f"skip {kind}: no worker running anywhere")
            return
        busy = sum(self.disrupted(i) for i in range(len(NPROC)))
        for i in order:
            if self.disrupted(i) or busy + 1 > MAX_DISRUPTED:
                continue
            inc = self.current(i)
            if kind == "agent_sigkill":
                if inc.agent is None:
                    continue
                t = time.time()
                os.kill(inc.agent, signal.SIGKILL)
                inc.killed_at = t
                self.kills.append({"kind": "agent", "pod": i, "inc": inc, "t": t})
                self.log(f"SIGKILL agent {inc.name}", t)
            else:
                down = self.rng.uniform(2.0, 5.0)
                self.pods[i].link_down()
                outage = {"pod": i, "down": time.time(), "up": None, "inc": inc}
                self.outages.append(outage)
                self.log(f"{self.pods[i].name}: link down for {down:.1f} s", outage["down"])
                self.at(outage["down"] + down, lambda o=outage: self.link_up(o), "repair")
            self.counts[kind] += 1
            return
        self.counts["skipped"] += 1
        self.log(f"skip {kind}: {busy} pods already disrupted (at most {MAX_DISRUPTED})")

    def link_up(self, outage):
        self.pods[outage["pod"]].link_up()
        outage["up"] = time.time()
        self.log(f"{self.pods[outage['pod']].name}: link up", outage["up"])

    # -- the run ----------------------------------------------------------------------------
    def tick_until(self, deadline, done=lambda: False, stop_when_over=True):
        """Runs due actions and samples until `deadline` or `done()`; also returns early on a
        violation, or (stop_when_over) when the job ended on its own."""
        next_sample = next_records = 0.0
        while time.time() < deadline:
            now = time.time()
            while self.actions and self.actions[0][0] <= now:
                _, _, _, fn = heapq.heappop(self.actions)
                fn()
            self.poll_incarnations()
            if now >= next_sample:
                self.sample()
                next_sample = now + 0.25
            if now >= next_records:
                self.read_records()
                next_records = now + 1.0
            if done() or self.violations or (stop_when_over and self.job_over):
                return True
            time.sleep(0.05)
        return False

    def full_round_stepping(self, since):
        """A round of all pods in which every rank has trained after `since`."""
        for token, tok in self.tokens.items():
            if tok["world"] == WORLD and len([t for t in tok["last_step"].values()
                                              if t > since]) == WORLD:
                return token
        return None

    def run(self):
        (self.root / "records").mkdir()
        (self.root / "keys").mkdir()
        (self.root / "ckpt").mkdir()
        self.start_server()
        for i in range(len(NPROC)):
            self.start_agent(i)
        self.log(f"seed {self.seed}; waiting for the first round of all {len(NPROC)} pods")
        if not self.tick_until(time.time() + 150, lambda: self.full_round_stepping(0)):
            raise AssertionError("the job did not start training with all pods within 150 s;\n"
                                 + self.agent_logs())
        self.start_watch()
        start = self.chaos_start = time.time()
        end = start + self.seconds
        t = start + self.rng.uniform(1, 4)
        while t < end:
            kind = self.rng.choices([k for k, _ in KINDS], [w for _, w in KINDS])[0]
            pick = self.rng.randrange(1 << 16)
            self.at(t, lambda k=kind, p=pick: self.fire(k, p), "event")
            t += self.rng.uniform(*self.gap)
        self.log(f"chaos for {self.seconds:.0f} s")
        self.tick_until(end)
        if self.job_over:
            # Every agent must see the end and exit: wait for that, not just for job_over.
            self.tick_until(time.time() + 90, lambda: all(
                self.current(i).ended_at is not None for i in range(len(NPROC))),
                stop_when_over=False)
            return
        # Links still down come up and withheld DNS entries appear; no new events.
        self.actions = [a for a in self.actions if a[2] == "repair"]
        heapq.heapify(self.actions)
        self.log("chaos over: waiting for a round of all pods to train")
        calm = time.time()
        if not self.violations and not self.tick_until(
                calm + 120, lambda: not self.actions and self.full_round_stepping(calm)):
            self.violate("no round of all pods trained within 120 s after the chaos ended")
        if self.violations:
            return
        self.finishing = True
        (self.root / "stop").write_text("stop\n")
        self.log("stop file written: the workers finish at the next step")
        self.tick_until(time.time() + 90, lambda: all(
            self.current(i).ended_at is not None for i in range(len(NPROC))))

    def agent_logs(self):
        out = []
        for i in range(len(NPROC)):
            for inc in self.incs[i][-2:]:
                tail = read_text(inc.proc.err_path)[-2000:]
                out.append(f"--- {inc.name} stderr tail ---\n{tail}")
        return "\n".join(out)


# -- checks at the end ----------------------------------------------------------------------

def check_outcome(chaos, final):
    """DESIGN §4.4: every worker exited 0, so the job succeeded and every agent exits 0."""
    for i in range(len(NPROC)):
        inc = chaos.current(i)
        if inc.ended_at is None:
            chaos.violate(f"agent {inc.name} still running 90 s after the stop file")
            continue
        err = read_text(inc.proc.err_path).strip().splitlines()
        if inc.rc != 0 or not err or "job succeeded" not in err[-1]:
            chaos.violate(f"agent {inc.name} exited {inc.rc} at the end, expected 0 with "
                          f"'job succeeded'; last line: {err[-1] if err else ''}")
    if final is None:
        chaos.violate("`muster status` could not be read at the end")
        return
    if final["phase"] != "Succeeded" or final.get("outcome", {}).get("exit_code") != 0:
        chaos.violate(f"job status at the end: phase {final['phase']}, outcome "
                      f"{final.get('outcome')}; expected Succeeded, exit 0")


def check_early_end(chaos, final):
    """The job ended during the chaos. Under the default ExitCode policy that is what DESIGN
    §4.4 says when a worker's exit was not restartable: a worker whose own link was down
    fails a fresh connection with exit 1 (and its report can reach the server once the link
    is back), or a peer's collective raises after a kill and its report wins the race.
    Accepted only when a chaos event explains the root cause, and then every agent must
    exit with the root cause's code (or as its own kill or cut-off explains)."""
    out = final.get("outcome", {})
    code, cause = out.get("exit_code"), final.get("root_cause") or {}
    t_fail = wall(final["history"][-1]["time"]) if final.get("history") else time.time()
    pod = cause.get("host")
    explained = [f"link of {pod} down at {o['down'] - chaos.t0:.2f}s" for o in chaos.outages
                 if chaos.pods[o["pod"]].name == pod and
                 o["down"] - 1 <= t_fail <= (o["up"] or t_fail) + 5] + \
                [f"{k['kind']} kill on {k['inc'].name} at {k['t'] - chaos.t0:.2f}s"
                 for k in chaos.kills if t_fail - 5 <= k["t"] <= t_fail]
    chaos.log(f"ENDED EARLY: job {final['phase']}, exit {code}: {out.get('reason')}; "
              f"explained by: {explained or 'nothing'}")
    if final["phase"] != "Failed" or code in (0, 130, 137, 138, 143) or not explained:
        chaos.violate(f"the job ended during the chaos ({final['phase']}, exit {code}: "
                      f"{out.get('reason')}) and no chaos event explains it as a fatal exit")
    for i in range(len(NPROC)):
        inc = chaos.current(i)
        if inc.ended_at is None:
            chaos.violate(f"agent {inc.name} still running 90 s after the job ended")
        elif inc.rc != code and not (inc.rc == 137 and inc.killed_at) and inc.rc != 138 and \
                not (inc.rc == 2 and "already finished" in read_text(inc.proc.err_path)):
            chaos.violate(f"agent {inc.name} exited {inc.rc}; the job's outcome is {code} "
                          f"(DESIGN §4.4: the same code on every node)")


def check_rounds(chaos, final):
    """Ranks of each round are a permutation of 0..WORLD_SIZE-1; TORCHELASTIC_RESTART_COUNT
    never decreases from round to round and ends at the job's restart count; training
    resumes from the newest checkpoint."""
    rows_by_worker = {}
    for r in chaos.rows:
        rows_by_worker.setdefault(r["id"], []).append(r)
    ordered = sorted(chaos.tokens.items(), key=lambda kv: kv[1]["t"])
    for token, tok in ordered:
        stepped = any(r["ev"] == "step" for _, _, w in tok["ranks"].values()
                      for r in rows_by_worker.get(w, []))
        if stepped and sorted(tok["ranks"]) != list(range(tok["world"])):
            chaos.violate(f"round {token[:8]} trained with ranks {sorted(tok['ranks'])}, not a "
                          f"permutation of 0..{tok['world'] - 1}")
    restarts = [tok["restart"] for _, tok in ordered]
    if restarts != sorted(restarts):
        chaos.violate(f"TORCHELASTIC_RESTART_COUNT went backwards between rounds: {restarts}")
    if final and final["phase"] == "Succeeded" and restarts and \
            restarts[-1] != final["restarts_used"]:
        chaos.violate(f"the last round ran with TORCHELASTIC_RESTART_COUNT {restarts[-1]}, the "
                      f"job used {final['restarts_used']} restarts")
    ckpts = sorted((r["t"], r["step"]) for r in chaos.rows if r["ev"] == "ckpt")
    for r in chaos.rows:
        if r["ev"] != "resume":
            continue
        first = min((x["t"] for x in chaos.rows if x["ev"] == "start" and
                     x["master"] == r["master"] and x["restart"] == r["restart"]), default=r["t"])
        saved = [s for t, s in ckpts if t < first - 0.5]
        if saved and r["step"] < max(saved):
            chaos.violate(f"rank {r['rank']} on {r['host']} resumed at step {r['step']}, but "
                          f"step {max(saved)} was checkpointed before its round began")
    checked = sum(r.get("stale_checked", 0) for r in chaos.rows)
    if len(ordered) > 1 and checked == 0:
        chaos.violate("no worker ever probed an earlier round's key: the stale-key check "
                      "did not run")
    return checked


def node_id(inc):
    """The agent's rendezvous node id (host:pid:random), from its --status-file."""
    try:
        return json.loads((inc.events.parent / f"{inc.pod.name}.{inc.k}.status.json")
                          .read_text())["node_id"]
    except (OSError, ValueError, KeyError):
        return None


def agent_events(inc):
    events = read_json_lines(inc.events)
    for e in events:
        e["t"] = wall(e["time"])
    return events


_LOG_LINE = re.compile(r"^\[muster (\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d{3}) \w+\] (.*)$")


def round_starts(inc, events):
    """[(time, round)] of every round this agent started workers for. The agent marks each
    start but the job's first: a counted restart in the event log (restart_decided, with
    the round), a membership change on stderr ("round R: re-formed ...")."""
    marks = [(e["t"], e["round"]) for e in events if e["event"] == "restart_decided"]
    for line in read_text(inc.proc.err_path).splitlines():
        m = _LOG_LINE.match(line)
        r = m and re.match(r"round (\d+): re-formed", m.group(2))
        if r:
            stamp = datetime.datetime.strptime(m.group(1), "%Y-%m-%d %H:%M:%S.%f").timestamp()
            marks.append((stamp, int(r.group(1))))
    return sorted(marks)


def round_at(marks, t):
    """The round this agent was in at time t (1 before any mark)."""
    return max(((mt, r) for mt, r in marks if mt <= t), default=(0, 1))[1]


def check_accounting(chaos, final):
    """Every kill the driver made is in the restart history (or the round it hit was already
    ending), and every entry of the history is explained by a chaos event."""
    history = final["history"] if final else []
    for h in history:
        h["t"] = wall(h["time"])
    explained = set()
    for k in chaos.kills:
        inc, t = k["inc"], k["t"]
        events = agent_events(inc)
        pod = chaos.pods[k["pod"]].name
        if k["kind"] == "worker":
            code = 128 + k["sig"]
            exits = [e for e in events if e["event"] == "worker_exited" and e["pid"] == k["inner"]]
            what = f"{signal.Signals(k['sig']).name} of rank {k['rank']} on {inc.name} at " \
                   f"{t - chaos.t0:.2f}s"
            if not exits:
                if inc.agent_dead_at is not None and inc.agent_dead_at < t + 2:
                    k["how"] = "its agent died at the same time"
                    continue
                chaos.violate(f"{what}: the agent's event log has no exit of pid {k['inner']}")
                continue
            ex = exits[0]
            ok_codes = {code} if ex["while"] == "running" else {code, 137, 143}
            if ex["code"] not in ok_codes:
                chaos.violate(f"{what}: the agent recorded exit {ex['code']} ({ex['while']}), "
                              f"expected {code} (DESIGN §4.4: 128+N)")
            # Pids repeat across a pod's incarnations: the node id tells them apart.
            direct = [j for j, h in enumerate(history) if h.get("failure") and
                      h["failure"]["node_id"] == node_id(inc) and
                      h["failure"]["pid"] == k["inner"] and h["failure"]["code"] == code and
                      h["t"] >= t - 0.5]
            if direct:
                j = direct[0]
                explained.add(j)
                k["how"] = f"history #{j}: round {history[j]['round']}, counted " \
                           f"{history[j]['counted']}"
                if not history[j]["counted"]:
                    chaos.violate(f"{what}: restartable exit {code} did not consume the budget")
                continue
            if ex["while"] == "stopping":
                k["how"] = "the agent was already stopping that round"
                continue
            started = [e["t"] for e in events if e["event"] == "worker_started" and
                       e["pid"] == k["inner"]]
            rnd = round_at(round_starts(inc, events), started[0] if started else t)
            # The entry that ended the victim's round came first: the report was too late to
            # count (the job ignores failures of a round it is already stopping).
            ending = [j for j, h in enumerate(history) if h["round"] == rnd and
                      h["t"] <= ex["t"] + 1.0]
            if ending:
                k["how"] = f"its round {rnd} was already ending: history #{ending[0]}"
                continue
            chaos.violate(f"{what}: exit {ex['code']} in round {rnd}, seen by the agent at "
                          f"{ex['t'] - chaos.t0:.2f}s, is not in the restart history")
        else:
            what = f"SIGKILL of agent {inc.name} at {t - chaos.t0:.2f}s"
            rnd = round_at(round_starts(inc, events), t)
            named = [j for j, h in enumerate(history) if re.search(
                rf"\bnode {pod} \(.*\) lost", h["reason"]) and h["round"] >= rnd and
                t - 0.5 <= h["t"] <= t + 10]
            if named:
                explained.add(named[0])
                k["how"] = f"history #{named[0]}: {history[named[0]]['reason'][:80]}"
                continue
            started = [e for e in events if e["event"] == "worker_started" and e["t"] <= t]
            exited = {e["pid"] for e in events if e["event"] == "worker_exited" and e["t"] <= t}
            running = [e for e in started if e["pid"] not in exited]
            if not running:
                k["how"] = "no workers ran on it"
                continue
            ending = [j for j, h in enumerate(history) if h["round"] == rnd and h["t"] <= t + 1.0]
            if ending:
                k["how"] = f"its round {rnd} was already ending: history #{ending[0]}"
                continue
            chaos.violate(f"{what}: its workers were running, but the history records no loss "
                          f"of {pod}")
    # The other direction: nothing restarted the job that the chaos did not cause.
    for j, h in enumerate(history):
        if j in explained or (chaos.job_over and j == len(history) - 1):
            continue  # the entry that ended the job early is judged by check_early_end
        reason = h["reason"]
        m = re.search(r"\bnode (pod\d+)\b", reason)
        pod = m.group(1) if m else None
        if h.get("failure") or h["counted"]:
            chaos.violate(f"history #{j} (round {h['round']}, counted {h['counted']}) is a failure "
                          f"the chaos did not cause: {reason}")
        elif pod and " joined" in reason:
            if not any(inc.pod.name == pod and inc.started <= h["t"] and
                       (inc.k > 0 or h["t"] < chaos.chaos_start)
                       for incs in chaos.incs.values() for inc in incs):
                chaos.violate(f"history #{j}: {pod} joined but was never restarted: {reason}")
        elif pod and " lost" in reason:
            near = [o for o in chaos.outages if chaos.pods[o["pod"]].name == pod and
                    o["down"] - 0.5 <= h["t"] <= (o["up"] or h["t"]) + 10] + \
                   [k for k in chaos.kills if k["kind"] == "agent" and
                    chaos.pods[k["pod"]].name == pod and k["t"] - 0.5 <= h["t"] <= k["t"] + 10]
            if not near:
                chaos.violate(f"history #{j}: {pod} was lost with no chaos event on it: {reason}")
        else:
            chaos.violate(f"history #{j}: unexplained entry: {reason}")
    return history


def check_pods_empty(chaos):
    """After the job no process is left in any chaos pod (its network namespace). The PID
    namespace check is sample(): between an agent's death and its pod's PID 1 exiting."""
    for i in range(len(NPROC)):
        r = subprocess.run(["ip", "netns", "pids", chaos.pods[i].ns], capture_output=True,
                           text=True, timeout=30)
        if r.stdout.split():
            chaos.violate(f"{chaos.pods[i].name}: processes left in the pod: {r.stdout.split()}")


@pytest.mark.skipif(TORCH_VERSION is None,
                    reason=f"SKIPPED LOUDLY: no torch importable by {TORCH_PYTHON}; install "
                           f"python3-torch to run the chaos test")
def test_chaos(tmp_path):
    seconds, seed = chaos_seconds(), chaos_seed()
    print(f"\nchaos seed {seed} (replay: MUSTER_CHAOS_SEED={seed}), window {seconds:.0f} s",
          flush=True)
    t_start = time.monotonic()
    with Pods(len(NPROC) + 1, tmp_path) as pods:
        chaos = Chaos(pods, tmp_path / "chaos", seed, seconds)
        chaos.root.mkdir()
        try:
            chaos.run()
            chaos.read_records()
            final = chaos.status()
            if chaos.watch is not None:
                try:
                    chaos.watch.wait(20)
                except subprocess.TimeoutExpired:
                    chaos.watch.kill()
            if chaos.job_over and final:
                check_early_end(chaos, final)
            elif not chaos.violations:
                check_outcome(chaos, final)
            checked = check_rounds(chaos, final)
            history = check_accounting(chaos, final)
            if chaos.current(0) and all(chaos.current(i).ended_at for i in range(len(NPROC))):
                check_pods_empty(chaos)
        finally:
            for o in chaos.outages:
                if o["up"] is None:
                    pods[o["pod"]].link_up()
            if chaos.server is not None and chaos.server.poll() is None:
                chaos.server.send_signal(signal.SIGTERM)
    kills = "\n".join(f"  {k['t'] - chaos.t0:8.2f}s {k['kind']} kill on {k['inc'].name}: "
                      f"{k.get('how', '-')}" for k in chaos.kills)
    steps = max((r["step"] for r in chaos.rows if r["ev"] == "done"), default=None)
    summary = (f"seed {seed}: {seconds:.0f} s of chaos, {time.monotonic() - t_start:.0f} s in all; "
               f"events {chaos.counts}; {len(chaos.tokens)} rounds seen by workers, "
               f"{len(history)} history entries, {final and final['restarts_used']} restarts "
               f"used; {checked} earlier-round keys probed; final step {steps}")
    print(f"\n{summary}\nkills and how the history accounts for them:\n{kills}")
    assert not chaos.violations, (
        f"chaos invariants broken (replay: MUSTER_CHAOS_SEED={seed} MUSTER_CHAOS_SECONDS="
        f"{seconds:.0f}):\n" + "\n".join(f"  {t - chaos.t0:8.2f}s {v}" for t, v in chaos.violations)
        + f"\n{summary}\ntimeline:\n{chaos.timeline_text()}\nkills:\n{kills}\n"
        + chaos.agent_logs())
    assert chaos.counts["worker_sigkill"] + chaos.counts["worker_sigterm"] > 0 or seconds < 60
    assert chaos.counts["agent_sigkill"] > 0 or seconds < 60
