"""The chaos test's checks at the end of the run: the job's outcome, the rounds the workers
saw, and the restart history against the chaos events (chaos_world.Chaos keeps the record)."""
import datetime
import json
import re
import signal
import subprocess
import time

from chaos_common import NPROC, read_json_lines, read_text, wall
from chaos_etcd import LEASE_TTL, PREFIX


def check_outcome(chaos, final):
    """docs/design.md §4.4: every worker exited 0, so the job succeeded and every agent exits 0."""
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
    """The job ended during the chaos. Under the ExitCode policy (chaos_world.py gives it) that is what DESIGN
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
                not (inc.rc == 143 and inc.termed_at) and \
                not (inc.rc == 2 and "already finished" in read_text(inc.proc.err_path)):
            chaos.violate(f"agent {inc.name} exited {inc.rc}; the job's outcome is {code} "
                          f"(docs/design.md §4.4: the same code on every node)")


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
    check_restart_counts(chaos, final)
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


def check_restart_counts(chaos, final):
    """The job-wide restart count never goes back (also across a coordinator change): in
    the order the rounds' workers started (their first record, written before torch is
    imported, so rounds too short to train count as well), in `muster status` over time,
    and at the end it is the number of counted entries of the history."""
    first = {}
    for r in chaos.rows:
        if r["ev"] == "start" and (r["master"] not in first or r["t"] < first[r["master"]][0]):
            first[r["master"]] = (r["t"], r["restart"])
    seen = [c for _, c in sorted(first.values())]
    if seen != sorted(seen):
        chaos.violate(f"TORCHELASTIC_RESTART_COUNT went backwards between rounds (workers' "
                      f"start, in order): {seen}")
    used = [d["restarts_used"] for _, d in chaos.status_docs]
    if used != sorted(used):
        chaos.violate(f"`muster status` restarts_used went backwards: {used}")
    if final and final.get("history") is not None:
        counted = sum(1 for h in final["history"] if h["counted"])
        if counted != final["restarts_used"]:
            chaos.violate(f"the history has {counted} counted entries, the job says "
                          f"{final['restarts_used']} restarts used")


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


def account_worker_kill(chaos, k, history, explained):
    """Finds the restart history entry a worker kill caused (adds it to `explained`), or the
    reason it has none; a kill nothing accounts for is a violation."""
    inc, t = k["inc"], k["t"]
    events = agent_events(inc)
    code = 128 + k["sig"]
    exits = [e for e in events if e["event"] == "worker_exited" and e["pid"] == k["inner"]]
    what = f"{signal.Signals(k['sig']).name} of rank {k['rank']} on {inc.name} at " \
           f"{t - chaos.t0:.2f}s"
    if not exits:
        if inc.agent_dead_at is not None and inc.agent_dead_at < t + 2:
            k["how"] = "its agent died at the same time"
            return
        chaos.violate(f"{what}: the agent's event log has no exit of pid {k['inner']}")
        return
    ex = exits[0]
    ok_codes = {code} if ex["while"] == "running" else {code, 137, 143}
    if ex["code"] not in ok_codes:
        chaos.violate(f"{what}: the agent recorded exit {ex['code']} ({ex['while']}), "
                      f"expected {code} (docs/design.md §4.4: 128+N)")
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
        return
    if ex["while"] == "stopping":
        k["how"] = "the agent was already stopping that round"
        return
    started = [e["t"] for e in events if e["event"] == "worker_started" and
               e["pid"] == k["inner"]]
    rnd = round_at(round_starts(inc, events), started[0] if started else t)
    # The entry that ended the victim's round came first: the report was too late to
    # count (the job ignores failures of a round it is already stopping).
    # etcd: a peer's exit 1 may reach the coordinator first, later (a leader change slows
    # every write): up to a lease TTL.
    late = LEASE_TTL if chaos.etcd is not None else 1.0
    ending = [j for j, h in enumerate(history) if h["round"] == rnd and
              h["t"] <= ex["t"] + late]
    if ending:
        k["how"] = f"its round {rnd} was already ending: history #{ending[0]}"
        return
    # etcd: the round's coordinator was already dead (killed before this kill, its lease not
    # yet over): no one took the report, and the takeover ended the round uncounted.
    takeover = [j for j, h in enumerate(history) if chaos.etcd is not None and
                h["round"] == rnd and h["reason"].startswith("node lost: the coordinator") and
                h["t"] >= t - 0.5 and any(a["kind"] == "agent" and a["t"] <= t and
                                          h["t"] <= loss_seen_by(chaos, a["t"])
                                          for a in chaos.kills)]
    if takeover:
        k["how"] = f"its round {rnd} had lost its coordinator; the takeover ended it: " \
                   f"history #{takeover[0]}"
        return
    chaos.violate(f"{what}: exit {ex['code']} in round {rnd}, seen by the agent at "
                  f"{ex['t'] - chaos.t0:.2f}s, is not in the restart history")


def loss_seen_by(chaos, t):
    """The latest time the loss of an agent killed at t is seen: 10 s later with muster's
    own rendezvous; with etcd, a lease TTL later, but each leader change meanwhile gives
    every lease its full TTL again (etcd's lessor on promotion), so it can be later."""
    end = t + 10
    for k in sorted(chaos.etcd_kills, key=lambda k: k["t"]):
        if k["leader"] and t - 1 <= k["t"] <= end:
            end = max(end, k["t"] + LEASE_TTL + 10)
    return end


def account_agent_kill(chaos, k, history, explained):
    """Finds the history entry that records the SIGKILLed agent's node as lost (adds it to
    `explained`), or the reason it has none; a kill nothing accounts for is a violation."""
    inc, t = k["inc"], k["t"]
    events = agent_events(inc)
    pod = chaos.pods[k["pod"]].name
    what = f"{signal.Signals(k.get('sig', signal.SIGKILL)).name} of agent {inc.name} at " \
           f"{t - chaos.t0:.2f}s"
    rnd = round_at(round_starts(inc, events), t)
    seen_by = loss_seen_by(chaos, t)
    named = [j for j, h in enumerate(history) if re.search(
        rf"\bnode {pod} \(.*\) (lost|preempted)", h["reason"]) and h["round"] >= rnd and
        t - 0.5 <= h["t"] <= seen_by]
    if not named and chaos.etcd is not None:
        # The etcd backend: the next coordinator records its predecessor's loss as "node
        # lost: the coordinator" (its own state does not know which node that was).
        named = [j for j, h in enumerate(history) if j not in explained and
                 h["reason"].startswith("node lost: the coordinator") and
                 h["round"] >= rnd and t - 0.5 <= h["t"] <= seen_by]
    if not named and chaos.etcd is not None:
        named = [j for j, h in enumerate(history) if peer_failure(chaos, h, [k])]
        if named:
            explained.add(named[0])
            k["how"] = f"its peers' collectives failed first: history #{named[0]}: " \
                       f"{history[named[0]]['reason'][:80]}"
            return
    if named:
        explained.add(named[0])
        k["how"] = f"history #{named[0]}: {history[named[0]]['reason'][:80]}"
        return
    started = [e for e in events if e["event"] == "worker_started" and e["t"] <= t]
    exited = {e["pid"] for e in events if e["event"] == "worker_exited" and e["t"] <= t}
    running = [e for e in started if e["pid"] not in exited]
    if not running:
        k["how"] = "no workers ran on it"
        return
    ending = [j for j, h in enumerate(history) if h["round"] == rnd and h["t"] <= t + 1.0]
    if ending:
        k["how"] = f"its round {rnd} was already ending: history #{ending[0]}"
        return
    # etcd: the loss is seen when the lease ends; a round that began stopping for another
    # reason before that records no loss (Job::RemoveNode while stopping).
    ending = [j for j, h in enumerate(history) if chaos.etcd is not None and
              h["round"] == rnd and h["t"] <= seen_by]
    if ending:
        k["how"] = f"its round {rnd} began stopping before its lease ended: history " \
                   f"#{ending[0]}"
        return
    chaos.violate(f"{what}: its workers were running, but the history records no loss "
                  f"of {pod}")


def peer_failure(chaos, h, kills):
    """etcd mode (--restart-policy OnFailure): a counted exit 1 of a worker whose peer was
    killed or whose pod's link was down (its collective raised; a partition is seen a lease
    TTL later), within 10 s after the chaos event. Not after a SIGKILL of an agent: its
    death is seen at once (docs/operations/liveness-and-partitions.md
    "etcd backend: a dead agent is seen at once"), before its peers' collectives fail."""
    f = h.get("failure")
    if chaos.etcd is None or not f or f.get("code") != 1:
        return False
    kills = [k for k in kills if not (k["kind"] == "agent" and k["sig"] == signal.SIGKILL)]
    return any(k["t"] - 0.5 <= h["t"] <= k["t"] + 10 for k in kills) or any(
        o["down"] - 0.5 <= h["t"] <= (o["up"] or h["t"]) + 10 for o in chaos.outages)


def check_history_explained(chaos, history, explained):
    """The other direction: nothing restarted the job that the chaos did not cause."""
    for j, h in enumerate(history):
        if j in explained or (chaos.job_over and j == len(history) - 1):
            continue  # the entry that ended the job early is judged by check_early_end
        reason = h["reason"]
        m = re.search(r"\bnode (pod\d+)\b", reason)
        pod = m.group(1) if m else None
        if peer_failure(chaos, h, chaos.kills):
            continue
        if h.get("failure") or h["counted"]:
            chaos.violate(f"history #{j} (round {h['round']}, counted {h['counted']}) is a failure "
                          f"the chaos did not cause: {reason}")
        elif pod and " joined" in reason:
            if not any(inc.pod.name == pod and inc.started <= h["t"] and
                       (inc.k > 0 or h["t"] < chaos.chaos_start)
                       for incs in chaos.incs.values() for inc in incs):
                chaos.violate(f"history #{j}: {pod} joined but was never restarted: {reason}")
        elif chaos.etcd is not None and reason.startswith("node lost: the coordinator"):
            near = [o for o in chaos.outages if o["down"] - 0.5 <= h["t"] <=
                    (o["up"] or h["t"]) + 10] + \
                   [k for k in chaos.kills if k["kind"] == "agent" and
                    k["t"] - 0.5 <= h["t"] <= loss_seen_by(chaos, k["t"])]
            if not near:
                chaos.violate(f"history #{j}: the coordinator was lost with no agent kill or "
                              f"outage before it: {reason}")
        elif pod and (" lost" in reason or " preempted" in reason):
            near = [o for o in chaos.outages if chaos.pods[o["pod"]].name == pod and
                    o["down"] - 0.5 <= h["t"] <= (o["up"] or h["t"]) + 10] + \
                   [k for k in chaos.kills if k["kind"] == "agent" and
                    chaos.pods[k["pod"]].name == pod and
                    k["t"] - 0.5 <= h["t"] <= loss_seen_by(chaos, k["t"])]
            if not near:
                chaos.violate(f"history #{j}: {pod} was lost with no chaos event on it: {reason}")
        else:
            chaos.violate(f"history #{j}: unexplained entry: {reason}")


def check_accounting(chaos, final):
    """Every kill the driver made is in the restart history (or the round it hit was already
    ending), and every entry of the history is explained by a chaos event."""
    history = final["history"] if final else []
    for h in history:
        h["t"] = wall(h["time"])
    explained = set()
    for k in chaos.kills:
        if k["kind"] == "worker":
            account_worker_kill(chaos, k, history, explained)
        else:
            account_agent_kill(chaos, k, history, explained)
    check_history_explained(chaos, history, explained)
    return history


def check_pods_empty(chaos):
    """After the job no process is left in any chaos pod (its network namespace). The PID
    namespace check is sample(): between an agent's death and its pod's PID 1 exiting."""
    for i in range(len(NPROC)):
        r = subprocess.run(["ip", "netns", "pids", chaos.pods[i].ns], capture_output=True,
                           text=True, timeout=30)
        if r.stdout.split():
            chaos.violate(f"{chaos.pods[i].name}: processes left in the pod: {r.stdout.split()}")



def check_round_overlap(chaos):
    """No split brain: two rounds never train at once. A round (its store's token) runs
    from its first worker's "round" record to its last worker's last record; every round
    has a rank 0, so two rounds whose spans overlap ran at once on a rank."""
    spans = {}
    for r in chaos.rows:
        token = chaos.worker_token.get(r["id"])
        if token is None or r["ev"] == "start":
            continue
        lo, hi = spans.get(token, (r["t"], r["t"]))
        spans[token] = (min(lo, r["t"]), max(hi, r["t"]))
    ordered = sorted(spans.items(), key=lambda kv: kv[1][0])
    for (a, (_, a_end)), (b, (b_start, _)) in zip(ordered, ordered[1:]):
        if b_start < a_end:
            chaos.violate(f"rounds {a[:8]} and {b[:8]} ran at once: {b[:8]} began at "
                          f"{b_start - chaos.t0:.2f}s, {a[:8]} ran until "
                          f"{a_end - chaos.t0:.2f}s (two rounds on the same ranks)")


def check_etcd_keys_gone(chaos):
    """etcd mode (docs/guides/etcd.md): the agents' keys go with their leases, a lease TTL
    + 1 s after the last agent ended none is left; the job's two keys (job, status) live
    with the job lease, 3 TTLs, which no one keeps alive any more: each must have a lease
    with at most that left."""
    last = max(chaos.current(i).agent_dead_at or chaos.current(i).ended_at
               for i in range(len(NPROC)))
    deadline = last + LEASE_TTL + 1.0
    job_keys = {PREFIX + "job", PREFIX + "status"}
    while True:
        keys = [k for k in chaos.etcd.keys(PREFIX) if k not in job_keys]
        if not keys or time.time() >= deadline:
            break
        time.sleep(0.2)
    if keys:
        chaos.violate(f"etcd still holds {len(keys)} agent key(s) of the job "
                      f"{time.time() - last:.1f} s after the last agent ended (lease TTL "
                      f"{LEASE_TTL:.0f} s): {sorted(keys)[:8]}")
    for key, left in chaos.etcd.lease_left(PREFIX).items():
        if key not in job_keys or not 0 <= left <= 3 * LEASE_TTL:
            chaos.violate(f"etcd key {key} after the end: its lease has {left} s left "
                          f"(-1: none); expected a job key with at most 3 x {LEASE_TTL:.0f} s")
