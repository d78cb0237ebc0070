"""A real DeepSpeed worker for test_deepspeed_real.py (run by the torch 2.x venv's python).

deepspeed.init_distributed(dist_backend="gloo") (DeepSpeed reads RANK, WORLD_SIZE,
MASTER_ADDR, MASTER_PORT and LOCAL_RANK, as its own launcher would set them), then an
all_reduce and an all_gather through deepspeed.comm. While every worker of the job is alive
(between two barriers) it takes a census of its pod's processes (/proc is the pod's own PID
namespace), so the test can check that nothing but muster and the workers ran: no ssh, no
pdsh, no DeepSpeed launcher. Appends one JSON line to $OUT.

`--local_rank N` / `--local_rank=N` is parsed as DeepSpeed scripts do (muster's
--local-rank-arg passes it); without it the script relies on LOCAL_RANK.
"""
import argparse
import json
import os

parser = argparse.ArgumentParser()
parser.add_argument("--local_rank", type=int, default=None)
args = parser.parse_args()

import deepspeed  # noqa: E402  (after argparse: a bad argument fails fast)
import deepspeed.comm as dist  # noqa: E402
import torch  # noqa: E402
from deepspeed.accelerator import get_accelerator  # noqa: E402


def census():
    """Every process of this pod: pid, ppid, comm and argv."""
    out = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                stat = f.read()
            with open(f"/proc/{entry}/cmdline", "rb") as f:
                argv = [a.decode(errors="replace") for a in f.read().split(b"\0") if a]
        except OSError:
            continue  # exited meanwhile
        comm = stat[stat.index("(") + 1:stat.rindex(")")]
        fields = stat[stat.rindex(")") + 2:].split()
        if fields[0] == "Z":
            continue
        out.append({"pid": int(entry), "ppid": int(fields[1]), "comm": comm, "argv": argv})
    return out


deepspeed.init_distributed(dist_backend="gloo")
rank, world = dist.get_rank(), dist.get_world_size()
t = torch.tensor([float(rank + 1)])
dist.all_reduce(t)
gathered = [torch.zeros(1) for _ in range(world)]
dist.all_gather(gathered, torch.tensor([float(rank)]))
dist.barrier()  # every worker of the job is alive from here to the next barrier
procs = census()
dist.barrier()

with open(os.environ["OUT"], "a") as f:
    f.write(json.dumps({
        "env": {k: os.environ.get(k) for k in (
            "RANK", "LOCAL_RANK", "WORLD_SIZE", "LOCAL_WORLD_SIZE", "GROUP_RANK", "CROSS_RANK",
            "CROSS_SIZE", "LOCAL_SIZE", "MASTER_ADDR", "MASTER_PORT", "OMP_NUM_THREADS")},
        "arg_local_rank": args.local_rank,
        "ds_rank": rank, "ds_world": world, "ds_local_rank": dist.get_local_rank(),
        "ds_backend": torch.distributed.get_backend(), "accelerator": get_accelerator()._name,
        "deepspeed": deepspeed.__version__, "torch": torch.__version__,
        "sum": t.item(), "gathered": [g.item() for g in gathered],
        "pid": os.getpid(), "ppid": os.getppid(), "procs": procs,
        "affinity": sorted(os.sched_getaffinity(0)),
        "hostname": os.uname().nodename,
    }) + "\n")
dist.barrier()
dist.destroy_process_group()
