"""A real torch worker that holds its job open: env:// init through the agent's store,
all_reduce, one JSON line to $OUT, then waits (at most 60 s) until the file $GO exists, so
a test can look at the agents' sockets while every worker is connected."""
import json
import os
import time

import torch
import torch.distributed as dist

dist.init_process_group("gloo", init_method="env://")
t = torch.tensor([float(dist.get_rank() + 1)])
dist.all_reduce(t)
with open(os.environ["OUT"], "a") as f:
    f.write(json.dumps({k: os.environ[k] for k in ("RANK", "GROUP_RANK", "MASTER_ADDR",
                                                    "MASTER_PORT")} | {"sum": t.item()}) + "\n")
deadline = time.monotonic() + 60
while not os.path.exists(os.environ["GO"]) and time.monotonic() < deadline:
    time.sleep(0.05)
dist.barrier()
dist.destroy_process_group()
