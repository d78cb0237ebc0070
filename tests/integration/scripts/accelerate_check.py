"""A real HF Accelerate worker for test_deepspeed_real.py (run by the torch 2.x venv's python).

`Accelerator()` as a training script would create it (no launcher: muster's environment is
all it has), then a reduce and a gather through it. Appends one JSON line to $OUT with what
Accelerate believes (process index/count, local index) next to the environment muster gave.
On a node without GPUs Accelerate only goes distributed with ACCELERATE_USE_CPU=true (what
`accelerate launch --cpu` exports); the test sets it.
"""
import json
import os

import torch
from accelerate import Accelerator

acc = Accelerator()
total = acc.reduce(torch.tensor([float(acc.process_index + 1)]), reduction="sum")
gathered = acc.gather(torch.tensor([acc.process_index]))
acc.wait_for_everyone()
with open(os.environ["OUT"], "a") as f:
    f.write(json.dumps({
        "env": {k: os.environ.get(k) for k in (
            "RANK", "LOCAL_RANK", "WORLD_SIZE", "LOCAL_WORLD_SIZE", "GROUP_RANK",
            "MASTER_ADDR")},
        "process_index": acc.process_index, "num_processes": acc.num_processes,
        "local_process_index": acc.local_process_index,
        "is_main_process": acc.is_main_process,
        "is_local_main_process": acc.is_local_main_process,
        "distributed_type": str(acc.distributed_type), "device": str(acc.device),
        "backend": acc.state.backend, "sum": total.item(), "gathered": gathered.tolist(),
        "torch_rank": torch.distributed.get_rank(),
        "torch_world": torch.distributed.get_world_size(),
        "hostname": os.uname().nodename,
    }) + "\n")
acc.wait_for_everyone()
acc.end_training()
