"""A real torch worker for multi-node tests: env:// init, all_reduce, one JSON line to $OUT."""
import json
import os

import torch
import torch.distributed as dist

dist.init_process_group("gloo", init_method="env://")
t = torch.tensor([float(dist.get_rank() + 1)])
dist.all_reduce(t)
with open(os.environ["OUT"], "a") as f:
    f.write(json.dumps({k: os.environ[k] for k in (
        "RANK", "LOCAL_RANK", "GROUP_RANK", "WORLD_SIZE", "LOCAL_WORLD_SIZE", "GROUP_WORLD_SIZE",
        "ROLE_RANK", "NODE_RANK", "TORCHELASTIC_RESTART_COUNT", "MASTER_ADDR", "MASTER_PORT")}
        | {"sum": t.item(), "torch": torch.__version__}) + "\n")
dist.barrier()
dist.destroy_process_group()
