"""A training loop that honours muster's preemption notice (docs/guides/preemption.md).

Every step all-reduces a value, logs "attempt world_size rank step" to STEP_LOG, then
all-reduces the "stop" flag (MAX): a rank that got the notice (SIGUSR1, or the
MUSTER_PREEMPTED file) makes every rank stop after the same step, save {step} to
CKPT_DIR/rank<R>.json and exit 0. At start it resumes after the saved step (every rank file
must agree); a resumed run does RESUMED_STEPS more steps and exits 0, a fresh one runs until
the notice. SAVE_GATE: a file that must exist before a rank saves (the test creates it once
it has seen the Preempting phase; up to 60 s, then the rank fails)."""
import json
import os
import signal
import sys
import time

import torch
import torch.distributed as dist

notice = {"signalled": False}


def on_notice(signum, frame):
    notice["signalled"] = True


signal.signal(signal.SIGUSR1, on_notice)


def preempted():
    path = os.environ.get("MUSTER_PREEMPTED", "")
    return notice["signalled"] or (os.environ.get("POLL_FILE") == "1" and os.path.exists(path))


def saved_step(ckpt):
    steps = set()
    for name in os.listdir(ckpt):
        with open(os.path.join(ckpt, name)) as f:
            steps.add(json.load(f)["step"])
    assert len(steps) <= 1, f"ranks saved different steps: {steps}"
    return steps.pop() if steps else None


def wait_for_gate(gate):
    deadline = time.monotonic() + 60
    while gate and not os.path.exists(gate):
        if time.monotonic() > deadline:
            raise SystemExit(f"SAVE_GATE {gate} did not appear in 60 s")
        time.sleep(0.02)


def main():
    ckpt, log = os.environ["CKPT_DIR"], os.environ["STEP_LOG"]
    dist.init_process_group("gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    attempt = os.environ["TORCHELASTIC_RESTART_COUNT"]
    last = saved_step(ckpt)
    dist.barrier()  # every rank read the checkpoint before any writes a new one
    step = 0 if last is None else last + 1
    end = step + int(os.environ.get("RESUMED_STEPS", "5")) if last is not None else None
    while end is None or step < end:
        x = torch.tensor([float(step)])
        dist.all_reduce(x)
        assert x.item() == step * world, (x.item(), step, world)
        with open(log, "a") as f:
            f.write(f"{attempt} {world} {rank} {step}\n")
        stop = torch.tensor([1 if preempted() else 0])
        dist.all_reduce(stop, op=dist.ReduceOp.MAX)
        if stop.item():
            wait_for_gate(os.environ.get("SAVE_GATE"))
            tmp = os.path.join(ckpt, f".rank{rank}.tmp")
            with open(tmp, "w") as f:
                json.dump({"step": step}, f)
            os.rename(tmp, os.path.join(ckpt, f"rank{rank}.json"))
            print(f"rank {rank}: preempted ({open(os.environ['MUSTER_PREEMPTED']).read().strip()})"
                  f", saved step {step}", flush=True)
            dist.destroy_process_group()
            return 0
        step += 1
        time.sleep(float(os.environ.get("STEP_SECONDS", "0.05")))
    dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    sys.exit(main())
