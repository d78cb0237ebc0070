"""The worker of scripts/gpu_check.sh, by its argument (GPU_CHECK_CUDA=1: CUDA and NCCL;
else CPU stand-ins with gloo, which only check muster's plumbing):
  allreduce    all_reduce of a one on cuda:LOCAL_RANK; prints "all_reduce result X".
  timeout      spins the GPU for about 10 minutes, then all_reduces with a 10 s process
               group timeout: NCCL's watchdog times out and dumps its flight recorder.
  synchronize  spins the GPU, prints "blocking now", waits in torch.cuda.synchronize().
  warm         for `muster run --warm-start --max-restarts 1` (issue 29): prints whether CUDA
               was initialised before the script ran (a rank forked from the template must
               say False), all_reduces on cuda:LOCAL_RANK; in attempt 0 it then SIGKILLs
               itself, writing the time to $WARM_KILLED; attempt 1 prints "warm recovered in
               X s" (the kill to its all_reduce done) and exits 0."""
import datetime
import os
import signal
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


def warm():
    print("cuda initialized before the script:", torch.cuda.is_initialized(), flush=True)
    device = init()
    t = torch.ones(1, device=device)
    dist.all_reduce(t)
    if CUDA:
        torch.cuda.synchronize()
    print("all_reduce result", t.item(), "on", device, flush=True)
    marker = os.environ["WARM_KILLED"]
    if os.environ.get("TORCHELASTIC_RESTART_COUNT", "0") == "0":
        with open(marker, "w") as f:
            f.write(repr(time.time()))
        os.kill(os.getpid(), signal.SIGKILL)
    with open(marker) as f:
        killed = float(f.read())
    print(f"warm recovered in {time.time() - killed:.3f} s", flush=True)
    dist.destroy_process_group()


{"allreduce": allreduce, "timeout": timeout, "synchronize": synchronize,
 "warm": warm}[sys.argv[1]]()
