"""A real torch gloo job for naming stragglers (issue 30 item 4): every rank loops on a fixed
amount of pure-Python compute ($WORK iterations) and an all_reduce, until $MARKS/stop exists
(the ranks agree through the all_reduce, so that they all stop after the same step). Once the
group is up each rank writes its pid to $MARKS/pid-<rank>, so that the test can throttle one,
and at the end its step count to $MARKS/steps-<rank>. Nothing here knows about muster."""
import os

import torch
import torch.distributed as dist


def compute(n):
    x = 0
    for i in range(n):
        x += i * i
    return x


def write(path, text):
    with open(path + ".tmp", "w") as f:
        f.write(text)
    os.rename(path + ".tmp", path)


def main():
    dist.init_process_group("gloo", init_method="env://")
    rank = dist.get_rank()
    marks = os.environ["MARKS"]
    flag = torch.zeros(1)
    dist.all_reduce(flag)  # every rank is up
    write(os.path.join(marks, f"pid-{rank}"), str(os.getpid()))
    work = int(os.environ.get("WORK", "1000000"))
    steps = 0
    while True:
        compute(work)
        flag[0] = 1.0 if os.path.exists(os.path.join(marks, "stop")) else 0.0
        dist.all_reduce(flag, op=dist.ReduceOp.MAX)
        steps += 1
        if flag.item() > 0:
            break
    write(os.path.join(marks, f"steps-{rank}"), str(steps))
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
