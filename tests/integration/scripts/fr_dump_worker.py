"""A real torch gloo job that leaves flight recorder dumps (issue 17 item 3). torch 2.x
records gloo collectives but writes no dump on its own when a rank fails or a gloo
collective times out on CPU, so every rank asks torch for its dump
(torch._C._distributed_c10d._dump_fr_trace_file: the pickled trace torch writes to
<TORCH_FR_DUMP_TEMP_FILE><rank>, the prefix the launcher gave). After a barrier, rank
$FAIL_RANK exits 1 and the others wait to be stopped. Nothing here knows about muster."""
import os
import time

import torch
import torch._C._distributed_c10d as c10d
import torch.distributed as dist


def main():
    dist.init_process_group("gloo", init_method="env://")
    t = torch.ones(4)
    dist.all_reduce(t)
    rank = dist.get_rank()
    c10d._dump_fr_trace_file(rank)  # torch writes it where TORCH_FR_DUMP_TEMP_FILE says
    dist.barrier()  # every rank's dump is written
    if rank == int(os.environ["FAIL_RANK"]):
        raise SystemExit(1)
    time.sleep(60)  # stopped by the launcher


if __name__ == "__main__":
    main()
