"""A real torch worker for the etcd backend's tests: env:// init, all_reduce, one JSON line
to $OUT. With HOLD_WORLD=N it then waits (up to 120 s, then fails) while WORLD_SIZE is N,
so that a test can kill a node (or an etcd member) under a running round (HOLD_WORLD=6,4:
either size); with RELEASE set, it goes on once that file exists. With FAIL_RANK=R, rank R
exits 3 in attempt 0. TAG (the agent's environment) is copied to the line, to tell nodes
apart; SLOW_STOP=S makes SIGTERM take S seconds (a node that stops its workers late), only
in workers whose environment matches SLOW_STOP_IF ("VAR=VALUE VAR=VALUE", all of them) when
that is set.
With INTERVALS set, each worker also appends (round, rank, start, end) of its held time
there, for the split-brain check."""
import json
import os
import signal
import time

started = time.time()

import torch  # noqa: E402 (the start time first)
import torch.distributed as dist  # noqa: E402

dist.init_process_group("gloo", init_method="env://")
t = torch.tensor([float(dist.get_rank() + 1)])
dist.all_reduce(t)
with open(os.environ["OUT"], "a") as f:
    f.write(json.dumps({k: os.environ[k] for k in (
        "RANK", "GROUP_RANK", "WORLD_SIZE", "TORCHELASTIC_RESTART_COUNT", "MASTER_ADDR",
        "MASTER_PORT")} | {"sum": t.item(), "pid": os.getpid(),
                          "tag": os.environ.get("TAG", "")}) + "\n")


def record_interval():
    if os.environ.get("INTERVALS"):
        with open(os.environ["INTERVALS"], "a") as f:
            f.write(json.dumps({"round": os.environ["TORCHELASTIC_RESTART_COUNT"],
                                "world": os.environ["WORLD_SIZE"],
                                "master": os.environ["MASTER_ADDR"] + ":" +
                                os.environ["MASTER_PORT"],
                                "rank": int(os.environ["RANK"]), "start": started,
                                "end": time.time(), "tag": os.environ.get("TAG", "")}) + "\n")


def slow_here():
    conditions = [c.split("=", 1) for c in os.environ.get("SLOW_STOP_IF", "").split()]
    return all(os.environ.get(var) == value for var, value in conditions)


def on_term(signum, frame):
    if slow_here():
        time.sleep(float(os.environ.get("SLOW_STOP", "0")))
    record_interval()
    os._exit(143)


signal.signal(signal.SIGTERM, on_term)
if os.environ.get("FAIL_RANK") == os.environ["RANK"] and \
        os.environ["TORCHELASTIC_RESTART_COUNT"] == "0":
    raise SystemExit(3)  # first attempt only
if os.environ["WORLD_SIZE"] in os.environ.get("HOLD_WORLD", "").split(","):
    # Until $RELEASE exists (when set), else until the round is stopped.
    release = os.environ.get("RELEASE")
    deadline = time.monotonic() + 120
    while not (release and os.path.exists(release)):
        if time.monotonic() > deadline:
            raise SystemExit("held for 120 s: the round was never stopped or released")
        time.sleep(0.05)
dist.barrier()
dist.destroy_process_group()
record_interval()
