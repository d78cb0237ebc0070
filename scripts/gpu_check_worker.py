"""The worker of scripts/gpu_check.sh, by its argument (GPU_CHECK_CUDA=1: CUDA and NCCL;
else CPU stand-ins with gloo, which only check muster's plumbing):
  allreduce    all_reduce of a one on cuda:LOCAL_RANK; prints "all_reduce result X".
  timeout      spins the GPU for about 10 minutes, then all_reduces with a 10 s process
               group timeout: NCCL's watchdog times out and dumps its flight recorder.
  synchronize  spins the GPU, prints "blocking now", waits in torch.cuda.synchronize()."""
import datetime
import os
import sys
import time

import torch
import torch.distributed as dist

CUDA = os.environ.get("GPU_CHECK_CUDA") == "1"
# torch.cuda._sleep counts GPU clock cycles: about 1.5-2e9 a second on an H100/H200.
# 25-35 s: long enough to outlast the 10 s NCCL timeout (the watchdog dumps while the kernel
# still spins) and short enough that the rank can then abort: a spin of minutes keeps the
# aborting rank alive behind the kernel (seen on an H200 with torch 2.11: dump written at
# 10 s, the rank still alive 100 s later).
SPIN_CYCLES = 2_000_000_000 * 15


def init(timeout_s=60):
    backend = "nccl" if CUDA else "gloo"
    if CUDA:
        torch.cuda.set_device(int(os.environ["LOCAL_RANK"]))
    dist.init_process_group(backend, timeout=datetime.timedelta(seconds=timeout_s))
    return torch.device("cuda", int(os.environ["LOCAL_RANK"])) if CUDA else torch.device("cpu")


def allreduce():
    device = init()
    t = torch.ones(1, device=device)
    dist.all_reduce(t)
    print("all_reduce result", t.item(), "on", device, flush=True)
    dist.destroy_process_group()


def timeout():
    device = init(timeout_s=10)
    t = torch.ones(1, device=device)
    dist.all_reduce(t)  # the communicator exists before the spin
    if CUDA:
        torch.cuda.synchronize()
        torch.cuda._sleep(SPIN_CYCLES)  # the collective below waits behind it
        dist.all_reduce(t)
        torch.cuda.synchronize()
    else:
        time.sleep(120)  # gloo: no watchdog, no trace; the step's timeout ends it
    print("not reached: the watchdog should have ended this rank", flush=True)
    sys.exit(1)


def synchronize():
    if CUDA:
        torch.cuda.set_device(int(os.environ["LOCAL_RANK"]))
        torch.cuda._sleep(SPIN_CYCLES)
        print("blocking now", flush=True)
        torch.cuda.synchronize()
    else:
        print("blocking now", flush=True)
        time.sleep(120)


{"allreduce": allreduce, "timeout": timeout, "synchronize": synchronize}[sys.argv[1]]()
