"""The chaos driver: starts the pods' agents and the rendezvous server, fires the seeded
random events (worker and agent kills, link outages, withheld DNS), restarts killed agents
and checks the invariants that must hold while the job runs (chaos_checks.py checks the
rest at the end)."""
import heapq
import json
import os
import random
import signal
import subprocess
import threading
import time

from chaos_checks import node_id
from chaos_common import (AGENT_GRACE, CONF, ENDPOINT, ETCD_CONF, ETCD_GAP, ETCD_KINDS, KINDS,
                          MAX_DISRUPTED, MUSTER, NPROC, RDZV, RUN_ID, TRAIN, WORLD, WRAP,
                          chaos_gap, is_worker, muster_env, pid_alive, read_json_lines,
                          read_text, scan_proc, worker_env)
from chaos_etcd import MEMBER_DOWN, ChaosEtcd


def agent_pids(inc, live):
    """The agent's pids: the muster process the pod's wrapper started and, when that one is a
    supervisor (mode session, not PID 1: launch/supervisor.h), the agent it runs as its child.
    Workers are the children of either."""
    pids = {inc.agent}
    pids.update(p["pid"] for p in live
                if p["ppid"] == inc.agent and p["cmd"][:1] == [str(MUSTER)])
    return pids

class Incarnation:
    """One agent process of a pod (a restarted agent is a new incarnation)."""

    def __init__(self, pod, k, proc, events, dns_delay):
        self.pod, self.k, self.proc, self.events = pod, k, proc, events
        self.dns_delay = dns_delay
        self.started = time.time()
        self.ns = self.wrapper = self.agent = None
        self.agent_dead_at = self.ended_at = self.killed_at = None
        self.rc = None
        self.termed_at = None    # when the driver sent the agent SIGTERM (etcd mode)

    @property
    def name(self):
        return f"{self.pod.name}#{self.k}"


class Chaos:
    def __init__(self, pods, root, seed, seconds, mode="grpc"):
        self.pods, self.root, self.seed, self.seconds = pods, root, seed, seconds
        self.mode = mode         # "grpc": `muster serve` in pod RDZV; "etcd": etcd there
        self.kinds = ETCD_KINDS if mode == "etcd" else KINDS
        self.etcd = None         # chaos_etcd.ChaosEtcd in the etcd mode
        self.gap = chaos_gap()
        self.rng = random.Random(seed)
        self.t0 = time.time()
        self.timeline = []
        self.violations = []
        self.incs = {i: [] for i in range(len(NPROC))}
        self.kills = []          # dicts: kind, pod, inc, t, and for workers inner/rank/sig
        self.outages = []        # dicts: pod, down, up
        self.etcd_kills = []     # dicts: member, leader, t, up (etcd mode)
        self.actions = []        # heap of (t, seq, fn)
        self.seq = 0
        self.finishing = False
        self.rows = []
        self.offsets = {}
        self.tokens = {}         # round token -> {"world","restart","master","ranks":{}, ...}
        self.worker_token = {}   # worker id (pids repeat across a pod's agents) -> round token
        self.chaos_start = None
        self.status_docs = []    # (t, doc) from `muster status --watch --json`
        self.counts = {k: 0 for k, _ in self.kinds}
        self.counts.update(dns_delay=0, skipped=0, agent_restart=0)
        if mode == "etcd":
            self.counts.update(etcd_member_kill=0, etcd_leader_kill=0, coordinator_killed=0)
        self.server = None
        self.watch = None
        self.watch_done = False  # ends the etcd mode's status poller
        self.watch_thread = None
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
        if self.mode == "etcd":
            self.etcd = ChaosEtcd(pod)
            self.log(f"etcd: 3 members in {pod.name} ({self.etcd.endpoints})")
            return
        self.server = pod.run([MUSTER, "serve", "--port", "29400", "--rdzv-id", RUN_ID,
                               "--heartbeat-interval", "1s", "--heartbeat-misses", "3"],
                              env=muster_env())

    def start_agent(self, i, dns_delay=0.0):
        pod = self.pods[i]
        k = len(self.incs[i])
        events = self.root / f"{pod.name}.{k}.events.jsonl"
        # ExitCode (muster's default until issue 28): the checks judge a job that ends early
        # by docs/design.md §4.4 (chaos_checks.check_early_end).
        rdzv = ["--rdzv-endpoint", ENDPOINT, "--restart-policy", "ExitCode"]
        if self.etcd is not None:
            # By name, as ENDPOINT: the withheld DNS entry delays the etcd client too.
            rdzv = ["--rdzv-backend", "etcd", "--rdzv-endpoint", ",".join(
                f"pod{RDZV}:{p}" for p in self.etcd.cluster.client_ports),
                    # A pod cut off is seen lost only after its lease TTL, when its peers'
                    # collectives have long failed (exit 1, fatal under ExitCode): torchrun's
                    # policy, so that the job goes on (chaos_checks.peer_failure). A killed
                    # agent is seen at once (liveness): no exit 1 is excused after one.
                    "--restart-policy", "OnFailure"]
        args = ["sh", "-c", WRAP, "sh", MUSTER, "run", "--nnodes", f"2:{len(NPROC)}",
                "--nproc-per-node", NPROC[i], *rdzv, "--rdzv-id", RUN_ID,
                "--max-restarts", 100000, "--rdzv-conf", ETCD_CONF if self.etcd else CONF,
                # The kills are the driver's, not a sick pod's: the bad-node memory
                # (docs/guides/health-gate.md "Bad-node memory") would quarantine a pod
                # killed twice and the job would shrink to --nnodes' minimum. Off here, so
                # that every pod keeps taking part in the rounds these invariants check.
                "--quarantine-after", "0",
                "--shutdown-timeout", "5s",
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
            if not self.finishing and rc not in (137, 138) and not (inc.termed_at and rc == 143):
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
        """docs/design.md §4.4: a SIGKILLed agent reports 137 (through its PID 1), one cut off from
        the server 138; during the chaos no other exit is expected."""
        rc = inc.rc
        if inc.killed_at is not None:
            if rc != 137:
                self.violate(f"agent {inc.name} was SIGKILLed but its pod exited {rc}")
            return
        if inc.termed_at is not None:
            # docs/guides/preemption.md: the node leaves the job and exits 143.
            if rc != 143:
                self.violate(f"agent {inc.name} was sent SIGTERM but its pod exited {rc}, not "
                             f"143; stderr tail:\n{read_text(inc.proc.err_path)[-1500:]}")
            return
        cut = [o for o in self.outages if o["pod"] == inc.pod.index and
               o["down"] >= inc.started - 1 and o["down"] <= inc.ended_at]
        if cut and (rc == 138 or not self.finishing):
            if rc != 138:
                self.violate(f"agent {inc.name} lost its link at "
                             f"{cut[-1]['down'] - self.t0:.2f}s and exited {rc}, not 138 "
                             f"(docs/design.md §4.4: server lost)")
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
                workers = [p for p in live if is_worker(p) and p["ppid"] in agent_pids(inc, live)]
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
        if self.etcd is not None:
            # The status key goes with the last coordinator's lease: read its history.
            return self.etcd.last_status()
        r = subprocess.run(self.status_cmd(), capture_output=True, text=True, timeout=30)
        if r.returncode != 0:
            return None
        return json.loads(r.stdout)

    def start_watch(self):
        last = [None]

        def sink(doc):
            self.status_docs.append((time.time(), doc))
            summary = (doc["phase"], doc["round"], doc["restarts_used"],
                       tuple(sorted(n["host"] for n in doc["nodes"]
                                    if n.get("group_rank", -1) >= 0)))
            if summary != last[0]:
                last[0] = summary
                self.log(f"job: {doc['phase']}, round {doc['round']}, restarts "
                         f"{doc['restarts_used']}, in the round: {', '.join(summary[3])}")

        if self.etcd is not None:
            self.watch_thread = threading.Thread(
                target=self.etcd.watch_status, args=(sink, lambda: self.watch_done), daemon=True)
            self.watch_thread.start()
            return
        self.watch = subprocess.Popen(self.status_cmd("--watch"), stdout=subprocess.PIPE,
                                      stderr=subprocess.PIPE, text=True)

        def reader():
            for line in self.watch.stdout:
                try:
                    sink(json.loads(line))
                except ValueError:
                    continue

        threading.Thread(target=reader, daemon=True).start()

    # -- chaos events -----------------------------------------------------------------------
    def disrupted(self, i):
        inc = self.current(i)
        if inc is None or inc.ended_at is not None:
            return True
        if inc.agent_dead_at is not None or inc.killed_at or inc.termed_at:
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
        live = procs.get(inc.ns, [])
        return [p for p in live if is_worker(p) and p["ppid"] in agent_pids(inc, live)]

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
        if kind == "etcd_member_kill":
            self.fire_etcd()
            return
        busy = sum(self.disrupted(i) for i in range(len(NPROC)))
        if kind == "coordinator_sigkill":
            order = self.coordinator_first(order)
        for i in order:
            if self.disrupted(i) or busy + 1 > MAX_DISRUPTED:
                continue
            inc = self.current(i)
            if kind in ("agent_sigkill", "coordinator_sigkill", "agent_sigterm"):
                if inc.agent is None:
                    continue
                self.signal_agent(kind, i, inc)
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
        self.retry_first(kind, pick)

    def signal_agent(self, kind, i, inc):
        sig = signal.SIGTERM if kind == "agent_sigterm" else signal.SIGKILL
        coordinating = self.etcd is not None and node_id(inc) == self.etcd.coordinator_node()
        t = time.time()
        os.kill(inc.agent, sig)
        if sig == signal.SIGKILL:
            inc.killed_at = t
        else:
            inc.termed_at = t
        self.kills.append({"kind": "agent", "pod": i, "inc": inc, "t": t, "sig": int(sig),
                           "coordinator": coordinating})
        self.counts["coordinator_killed"] = self.counts.get("coordinator_killed", 0) + \
            coordinating
        self.log(f"{sig.name} agent {inc.name}" + (" (it coordinates)" if coordinating else ""),
                 t)

    def coordinator_first(self, order):
        """[the pod whose agent coordinates] (the oldest node key in etcd), or [] when no
        pod's current agent has that key (the event is then skipped)."""
        coord = self.etcd.coordinator_node()
        for i in order:
            inc = self.current(i)
            if coord is not None and inc is not None and node_id(inc) == coord:
                return [i]
        self.log(f"coordinator_sigkill: no current agent has the oldest node key ({coord})")
        return []

    def fire_etcd(self):
        """SIGKILLs one etcd member and starts it again MEMBER_DOWN s later (one at a time:
        the cluster keeps its majority)."""
        t = time.time()
        killed = self.etcd.kill_member(self.rng)
        if killed is None:
            self.counts["skipped"] += 1
            self.log("skip etcd_member_kill: a member is down or not healthy yet")
            return
        i, leader = killed
        self.counts["etcd_member_kill"] += 1
        self.counts["etcd_leader_kill"] += leader
        self.etcd_kills.append({"member": i, "leader": leader, "t": t, "up": None})
        down = self.rng.uniform(*MEMBER_DOWN)
        self.log(f"SIGKILL etcd member m{i}" + (" (the leader)" if leader else "") +
                 f", restarted in {down:.1f} s", t)

        def restart(k=self.etcd_kills[-1]):
            self.etcd.restart_member()
            k["up"] = time.time()
            self.log(f"etcd member m{k['member']} started again")

        self.at(t + down, restart, "repair")

    def retry_first(self, kind, pick):
        """A kind that has not fired yet is tried again 1 s later while the chaos lasts, so
        that every run of 60 s or more kills an agent (the test asserts that it did)."""
        if self.counts[kind] == 0 and time.time() + 1 < self.chaos_start + self.seconds:
            self.at(time.time() + 1, lambda: self.fire(kind, pick), "event")

    def schedule(self, t, end):
        """[(time, kind, pick)] from t to end, drawn by weight from the seed; where there are
        enough events, each kind stands at least once (a missing one takes the place of an
        event whose kind stands more than once)."""
        events = []
        while t < end:
            kind = self.rng.choices([k for k, _ in self.kinds], [w for _, w in self.kinds])[0]
            events.append([t, kind, self.rng.randrange(1 << 16)])
            t += self.rng.uniform(*self.gap)
        if len(events) >= len(self.kinds):
            for kind, _ in self.kinds:
                kinds = [e[1] for e in events]
                if kind in kinds:
                    continue
                spare = [e for e in events if kinds.count(e[1]) > 1]
                self.rng.choice(spare)[1] = kind
        return [tuple(e) for e in events]

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
        for t, kind, pick in self.schedule(start + self.rng.uniform(1, 4), end):
            self.at(t, lambda k=kind, p=pick: self.fire(k, p), "event")
        t = start + self.rng.uniform(*ETCD_GAP)
        while self.etcd is not None and t < end:
            self.at(t, lambda: self.fire("etcd_member_kill", 0), "event")
            t += self.rng.uniform(*ETCD_GAP)
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

