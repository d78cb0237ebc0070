"""A real torch worker for test_metrics: env:// init and an all_reduce; in attempt 0 rank 1
is killed by SIGKILL (exit 137, a restartable failure) after it; in attempt 1 every rank
waits for the file argv[1] (the test creates it once Prometheus has seen the restart), for
at most 60 s, then exits 0."""
import os
import signal
import sys
import time

import torch
import torch.distributed as dist

dist.init_process_group("gloo", init_method="env://")
t = torch.ones(1)
dist.all_reduce(t)
assert t.item() == dist.get_world_size(), t
if os.environ["TORCHELASTIC_RESTART_COUNT"] == "0":
    if dist.get_rank() == 1:
        os.kill(os.getpid(), signal.SIGKILL)
    time.sleep(60)  # the agent stops this rank for the restart
    sys.exit(4)
deadline = time.monotonic() + 60
while not os.path.exists(sys.argv[1]):
    if time.monotonic() > deadline:
        sys.exit(3)
    time.sleep(0.05)
