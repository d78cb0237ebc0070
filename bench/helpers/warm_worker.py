"""B17's rank (bench/b17_warm_start.py): a gloo job that stamps CLOCK_MONOTONIC at each phase of
its start. Run by muster (exec'd or forked from the warm template) or by torchrun.

B17_MODE=recover: every step is an all_reduce; in attempt 0 rank B17_KILL_RANK SIGKILLs itself
at step B17_KILL_STEP (it first appends "kill NS"). In every later attempt each rank appends
"first RESTART RANK T_SCRIPT T_IMPORTED T_INIT T_COLLECTIVE" once its first all_reduce is
done, runs B17_STEPS steps and exits 0.
B17_MODE=idle: each rank writes the same "first" line to the FIFO B17_OUT (one write, under
PIPE_BUF: atomic), with its pid, and then sleeps until SIGUSR1, on which it exits 0.
"""
import os
import sys
import time

T_SCRIPT = time.monotonic_ns()
PRELOADED = "torch" in sys.modules  # forked from muster's warm template
import signal  # noqa: E402

import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402

T_IMPORTED = time.monotonic_ns()


def append(path, line):
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, (line + "\n").encode())
    finally:
        os.close(fd)


def main():
    mode, out = os.environ["B17_MODE"], os.environ["B17_OUT"]
    restart = int(os.environ.get("TORCHELASTIC_RESTART_COUNT", "0"))
    if mode == "idle":
        signal.signal(signal.SIGUSR1, lambda *_: os._exit(0))
    dist.init_process_group("gloo", init_method="env://")
    t_init = time.monotonic_ns()
    rank = dist.get_rank()
    t = torch.ones(1024)
    dist.all_reduce(t)
    t_first = time.monotonic_ns()
    first = (f"first {restart} {rank} {T_SCRIPT} {T_IMPORTED} {t_init} {t_first} "
             f"{os.getpid()} {int(PRELOADED)}")
    if mode == "idle":
        append(out, first)
        while True:
            signal.pause()
    if restart > 0:
        append(out, first)
    kill_rank, kill_step = int(os.environ["B17_KILL_RANK"]), int(os.environ["B17_KILL_STEP"])
    for step in range(1, int(os.environ["B17_STEPS"])):
        if restart == 0 and rank == kill_rank and step == kill_step:
            append(out, f"kill {time.monotonic_ns()}")
            os.kill(os.getpid(), signal.SIGKILL)
        dist.all_reduce(t)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
