"""A real torch worker that keeps a gloo collective running, for the etcd liveness tests:
env:// init, one JSON line to $OUT (its round's start time included), then all_reduce in
a loop until $RELEASE exists (120 s at most, then it fails). A peer that dies mid-loop
makes all_reduce raise: the worker exits 1, fatal under the ExitCode restart policy.
EXIT_AT_ONCE=1: on that error, print it and exit 1 at once, as a training script that
exits on a collective error does (without it, torch 1.13's process group can hold the
interpreter's exit after the traceback until the agent stops the worker)."""
import json
import os
import sys
import time
import traceback

started = time.time()

import torch  # noqa: E402 (the start time first)
import torch.distributed as dist  # noqa: E402

dist.init_process_group("gloo", init_method="env://")
with open(os.environ["OUT"], "a") as f:
    f.write(json.dumps({k: os.environ[k] for k in (
        "RANK", "GROUP_RANK", "WORLD_SIZE", "TORCHELASTIC_RESTART_COUNT")} |
        {"pid": os.getpid(), "tag": os.environ.get("TAG", ""), "started": started}) + "\n")
deadline = time.monotonic() + 120
# Every rank leaves the loop after the same all_reduce: the release is agreed (MAX).
while True:
    if time.monotonic() > deadline:
        raise SystemExit("looped for 120 s: never released")
    t = torch.tensor([1.0 if os.path.exists(os.environ["RELEASE"]) else 0.0])
    try:
        dist.all_reduce(t, op=dist.ReduceOp.MAX)
    except RuntimeError:
        if os.environ.get("EXIT_AT_ONCE") != "1":
            raise
        traceback.print_exc()
        sys.stderr.flush()
        os._exit(1)
    if t.item() > 0:
        break
    time.sleep(0.01)
dist.destroy_process_group()
