"""Shared by the chaos test's modules (test_chaos.py): the job's shape, the MUSTER_CHAOS_*
knobs, time stamps, and the /proc scan that finds a pod's processes.

Importing it puts tests/integration on sys.path (conftest's helpers, pods.py).
"""
import datetime
import json
import os
import random
import re
import sys
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parents[0] / "integration"))
from conftest import MUSTER, muster_env, pid_alive  # noqa: E402,F401
from pods import read_text  # noqa: E402

TRAIN = HERE / "train.py"
NPROC = (2, 1, 2, 1)               # workers per chaos pod; the full world is 6
WORLD = sum(NPROC)
RDZV = len(NPROC)                  # index of the pod that runs `muster serve`
ENDPOINT = f"pod{RDZV}:29400"
RUN_ID = "chaos"
CONF = "heartbeat_interval=1s,heartbeat_misses=3,last_call_timeout=2s,join_timeout=90s"
# The etcd mode's lease TTL is 5 s: an agent that no keep-alive reached for TTL - 0.5 s
# stops (self-fencing), and etcd's leader election (election timeout 1 s, randomized up to
# 2 s, slower on a loaded machine) must fit in that after the last keep-alive. With 3 s and
# 4 s, agents on the loaded 2-core machine exited 138 after a leader kill (once in a few
# runs at 4 s: no leader 2.9 s after the kill).
ETCD_CONF = CONF.replace("heartbeat_misses=3", "heartbeat_misses=5")
MAX_DISRUPTED = 2                  # pods without a working agent at once: 4 - 2 >= MIN (2)
AGENT_GRACE = 1.0                  # s a process of a pod may outlive the pod's agent
# The pod's PID 1: runs the agent, keeps the PID namespace alive 2 s after it (so leftovers
# would be seen), and exits with the agent's status.
WRAP = '"$@"; rc=$?; sleep 2; exit $rc'
# Event kinds and their weights in the random schedule.
KINDS = (("worker_sigkill", 3), ("worker_sigterm", 2), ("agent_sigkill", 2), ("link_down", 2))
# The etcd mode's (chaos_etcd.py): agents killed include the one that coordinates (the
# oldest node key), an agent is told to stop (SIGTERM: it leaves the job). Besides these,
# one etcd member at a time is SIGKILLed (the leader half of the time) and started again,
# every ETCD_GAP s on a schedule of its own (it disrupts no pod).
ETCD_KINDS = (("worker_sigkill", 3), ("worker_sigterm", 1), ("agent_sigkill", 1),
              ("coordinator_sigkill", 2), ("agent_sigterm", 1), ("link_down", 1))
ETCD_GAP = (5.0, 10.0)
MODES = ("grpc", "etcd")           # MUSTER_CHAOS_RDZV: the rendezvous backends to run


def chaos_modes():
    raw = os.environ.get("MUSTER_CHAOS_RDZV", ",".join(MODES))
    modes = [m.strip() for m in raw.split(",") if m.strip()]
    if not modes or any(m not in MODES for m in modes):
        raise pytest.UsageError(f"MUSTER_CHAOS_RDZV={raw!r}: give grpc, etcd or both "
                                f"(comma-separated; default grpc,etcd)")
    return modes


def chaos_seconds():
    """The whole chaos window; split evenly between the modes that run (chaos_modes)."""
    raw = os.environ.get("MUSTER_CHAOS_SECONDS", "120")
    try:
        value = float(raw)
    except ValueError:
        value = -1
    if value < 10 * len(chaos_modes()):
        raise pytest.UsageError(f"MUSTER_CHAOS_SECONDS={raw!r}: give the chaos window in "
                                f"seconds, at least 10 per mode of MUSTER_CHAOS_RDZV (CI uses "
                                f"120: 60 s each for grpc and etcd)")
    return value / len(chaos_modes())


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

