"""A real torch gloo job for hang detection (issue 17 item 2). Every rank does an all_reduce,
then in attempt 0 rank $STALL_RANK waits before the second one while the others are in it:
MODE=sleep sleeps (a hang: no CPU anywhere), MODE=spin computes for $SPIN_SECONDS (merely
slow: its CPU moves), MODE=spin,sleep does one then the other. It writes
time.monotonic_ns() to $MARKS/stall-<attempt> as it starts, and creates
$MARKS/spun-<attempt> when a spin is over. Nothing here knows about muster."""
import os
import time

import torch
import torch.distributed as dist


def sleep_before_all_reduce():
    time.sleep(600)


def spin_before_all_reduce(seconds):
    end = time.monotonic() + seconds
    n = 0
    while time.monotonic() < end:
        n += 1
    return n


def main():
    dist.init_process_group("gloo", init_method="env://")
    t = torch.ones(1)
    dist.all_reduce(t)  # every rank is up
    attempt = int(os.environ["TORCHELASTIC_RESTART_COUNT"])
    if attempt == 0 and dist.get_rank() == int(os.environ["STALL_RANK"]):
        with open(os.path.join(os.environ["MARKS"], f"stall-{attempt}"), "w") as f:
            f.write(str(time.monotonic_ns()))
        for mode in os.environ["MODE"].split(","):
            if mode == "sleep":
                sleep_before_all_reduce()
            else:
                spin_before_all_reduce(float(os.environ["SPIN_SECONDS"]))
                open(os.path.join(os.environ["MARKS"], f"spun-{attempt}"), "w").close()
    dist.all_reduce(t)
    dist.destroy_process_group()


main()
