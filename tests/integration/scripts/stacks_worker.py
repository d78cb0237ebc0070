"""A real torch gloo job for `muster stacks` (issue 17): every rank but the last blocks in
all_reduce; the last waits in stuck_here until $RELEASE exists. Each rank writes its pid to
$READY/<rank> once it is about to block. Nothing here knows about stacks."""
import os
import time

import torch
import torch.distributed as dist


def stuck_here(release):
    while not os.path.exists(release):
        time.sleep(0.05)


def main():
    dist.init_process_group("gloo", init_method="env://")
    rank, world = dist.get_rank(), dist.get_world_size()
    t = torch.ones(1)
    with open(os.path.join(os.environ["READY"], str(rank)), "w") as f:
        f.write(str(os.getpid()))
    if rank == world - 1:
        stuck_here(os.environ["RELEASE"])
    dist.all_reduce(t)
    assert t.item() == world
    dist.destroy_process_group()


main()
