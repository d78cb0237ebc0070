"""A real torch worker for the etcd backend's tests: env:// init, all_reduce, one JSON line
to $OUT. With HOLD_WORLD=N it then waits (up to 120 s, then fails) while WORLD_SIZE is N,
so that a test can kill a node (or an etcd member) under a running round; with RELEASE set,
it goes on once that file exists. With FAIL_RANK=R, rank R exits 3 in attempt 0."""
import json
import os
import time

import torch
import torch.distributed as dist

dist.init_process_group("gloo", init_method="env://")
t = torch.tensor([float(dist.get_rank() + 1)])
dist.all_reduce(t)
with open(os.environ["OUT"], "a") as f:
    f.write(json.dumps({k: os.environ[k] for k in (
        "RANK", "GROUP_RANK", "WORLD_SIZE", "TORCHELASTIC_RESTART_COUNT", "MASTER_ADDR",
        "MASTER_PORT")} | {"sum": t.item(), "pid": os.getpid()}) + "\n")
if os.environ.get("FAIL_RANK") == os.environ["RANK"] and \
        os.environ["TORCHELASTIC_RESTART_COUNT"] == "0":
    raise SystemExit(3)  # first attempt only
if os.environ.get("HOLD_WORLD") == os.environ["WORLD_SIZE"]:
    # Until $RELEASE exists (when set), else until the round is stopped.
    release = os.environ.get("RELEASE")
    deadline = time.monotonic() + 120
    while not (release and os.path.exists(release)):
        if time.monotonic() > deadline:
            raise SystemExit("held for 120 s: the round was never stopped or released")
        time.sleep(0.05)
dist.barrier()
dist.destroy_process_group()
