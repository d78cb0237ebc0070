"""A minimal distributed job: gloo all_reduce and a barrier over env:// (CPU only).

Run it under muster (or torchrun) with any number of workers:
    muster run --standalone --nproc-per-node 4 examples/allreduce.py
Each rank contributes rank+1; every rank checks the sum is WORLD_SIZE*(WORLD_SIZE+1)/2.
"""
import os
import sys

import torch
import torch.distributed as dist
from torch.distributed.elastic.multiprocessing.errors import record


@record
def main():
    dist.init_process_group("gloo", init_method="env://")
    rank, world = dist.get_rank(), dist.get_world_size()
    t = torch.tensor([float(rank + 1)])
    dist.all_reduce(t)
    expected = world * (world + 1) / 2
    if t.item() != expected:
        raise ValueError(f"rank {rank}: all_reduce gave {t.item()}, expected {expected}")
    dist.barrier()
    print(f"rank {rank}/{world} (local {os.environ['LOCAL_RANK']}, restart "
          f"{os.environ['TORCHELASTIC_RESTART_COUNT']}, store {os.environ['MASTER_ADDR']}:"
          f"{os.environ['MASTER_PORT']}): all_reduce = {t.item():g} OK", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    sys.exit(main())
