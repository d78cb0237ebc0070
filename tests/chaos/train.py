"""The chaos test's worker: a tiny model trained with torch.distributed (gloo, env://).

Every worker incarnation appends JSON lines to $CHAOS_DIR/records/<host>-<pid>-<id>.jsonl
(one file each, so no two processes share a file), which the driver reads while the job
runs:

  start   before torch is imported: host, pid, RANK, WORLD_SIZE, ... as the agent set them
  round   after init: the round token (a uuid rank 0 put into this round's store), the
          store key this worker wrote (also in $CHAOS_DIR/keys/<id>), how many workers
          joined this round's store counter (must be WORLD_SIZE: a counter left from an
          earlier round would make it larger), whether the probe finds its own key (it
          must), and which keys of earlier rounds it could still read through the store
          (none)
  resume  the step training resumes from (rank 0 loads the latest checkpoint, broadcasts it)
  step    each training step: loss, whether the parameters agree on every rank
  stale   every STALE_EVERY steps: earlier rounds' keys probed again through the store
  ckpt    rank 0 saved a checkpoint (every CKPT_EVERY steps, atomic rename)
  done    training stopped because $CHAOS_DIR/stop exists (all ranks agree on the step)

Nothing here fakes a failure: a worker ends by exiting 0 at the stop step, or by whatever
kills it (the driver's signals, the agent stopping the round, a peer's death making a
collective raise).
"""
import json
import os
import random
import socket
import sys
import time
import uuid

CHAOS_DIR = os.environ["CHAOS_DIR"]
CKPT_EVERY = int(os.environ.get("CHAOS_CKPT_EVERY", "10"))
STALE_EVERY = int(os.environ.get("CHAOS_STALE_EVERY", "20"))
STEP_SLEEP = float(os.environ.get("CHAOS_STEP_SLEEP", "0.05"))
ABSENT = b"__chaos_absent__"  # compare_set probe: returned as is when the key is missing

HOST = socket.gethostname()
ME = uuid.uuid4().hex[:12]
_out = open(os.path.join(CHAOS_DIR, "records", f"{HOST}-{os.getpid()}-{ME}.jsonl"), "a",
            buffering=1)
ENV = {k: os.environ.get(k) for k in (
    "RANK", "LOCAL_RANK", "WORLD_SIZE", "GROUP_RANK", "GROUP_WORLD_SIZE", "LOCAL_WORLD_SIZE",
    "TORCHELASTIC_RESTART_COUNT", "MASTER_ADDR", "MASTER_PORT")}


def record(ev, **fields):
    row = {"ev": ev, "t": time.time(), "host": HOST, "pid": os.getpid(), "id": ME,
           "rank": int(ENV["RANK"]), "world": int(ENV["WORLD_SIZE"]),
           "restart": int(ENV["TORCHELASTIC_RESTART_COUNT"]),
           "master": f"{ENV['MASTER_ADDR']}:{ENV['MASTER_PORT']}"}
    row.update(fields)
    _out.write(json.dumps(row) + "\n")


record("start", env=ENV)

import datetime  # noqa: E402  (torch's import is slow: "start" is written before it)

import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402


def earlier_keys(token):
    """Keys that workers of other rounds wrote ($CHAOS_DIR/keys: one small file each)."""
    keys = []
    for name in os.listdir(os.path.join(CHAOS_DIR, "keys")):
        try:
            with open(os.path.join(CHAOS_DIR, "keys", name)) as f:
                row = json.loads(f.read())
        except (OSError, ValueError):  # a file being written right now
            continue
        if row["token"] != token:
            keys.append(row["key"])
    return keys


def readable(store, keys):
    """The keys among `keys` that this store has (compare_set with a sentinel never blocks
    and never creates a key: torch returns the expected value when the key is missing)."""
    return [k for k in keys if store.compare_set(k, ABSENT, b"x") != ABSENT]


def main():
    rank, world = int(ENV["RANK"]), int(ENV["WORLD_SIZE"])
    dist.init_process_group("gloo", init_method="env://",
                            timeout=datetime.timedelta(seconds=60))
    store = dist.distributed_c10d._get_default_store()
    if rank == 0:
        store.set("chaos/round", uuid.uuid4().hex)
    key = f"chaos/key/{HOST}/{os.getpid()}/{ME}"
    store.set(key, ME)
    store.add("chaos/joined", 1)
    dist.barrier()
    token = store.get("chaos/round").decode()
    joined = store.add("chaos/joined", 0)
    with open(os.path.join(CHAOS_DIR, "keys", ME), "w") as f:
        f.write(json.dumps({"token": token, "key": key}))
    old = earlier_keys(token)
    # The probe must see this round's own key, or "no stale key found" would mean nothing.
    record("round", token=token, key=key, joined=joined,
           probe_works=readable(store, [key]) == [key], stale_checked=len(old),
           stale_found=readable(store, old))

    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.Tanh(), torch.nn.Linear(32, 1))
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    ckpt = os.path.join(CHAOS_DIR, "ckpt", "latest.pt")
    step = torch.zeros(1, dtype=torch.int64)
    if rank == 0 and os.path.exists(ckpt):
        state = torch.load(ckpt)
        model.load_state_dict(state["model"])
        opt.load_state_dict(state["opt"])
        step[0] = state["step"]
    dist.broadcast(step, 0)
    for p in model.parameters():
        dist.broadcast(p.data, 0)
    record("resume", step=int(step[0]))

    target = torch.linspace(-1, 1, 16)
    stop_file = os.path.join(CHAOS_DIR, "stop")
    step = int(step[0])
    while True:
        step += 1
        g = torch.Generator().manual_seed(step * 1000 + rank)
        x = torch.randn(32, 16, generator=g)
        y = (x @ target).unsqueeze(1)
        loss = torch.nn.functional.mse_loss(model(x), y)
        opt.zero_grad()
        loss.backward()
        for p in model.parameters():
            dist.all_reduce(p.grad)
            p.grad /= world
        opt.step()
        psum = float(sum(p.detach().double().sum() for p in model.parameters()))
        agree = torch.tensor([psum, -psum, float(os.path.exists(stop_file))],
                             dtype=torch.float64)
        dist.all_reduce(agree, op=dist.ReduceOp.MAX)
        in_sync = abs(agree[0].item() - psum) < 1e-9 and abs(-agree[1].item() - psum) < 1e-9
        record("step", step=step, loss=round(loss.item(), 6), in_sync=in_sync)
        if step % STALE_EVERY == 0:
            old = earlier_keys(token)
            sample = random.sample(old, min(len(old), 25))
            record("stale", step=step, stale_checked=len(sample),
                   stale_found=readable(store, sample))
        if rank == 0 and step % CKPT_EVERY == 0:
            tmp = f"{ckpt}.{os.getpid()}.tmp"
            torch.save({"step": step, "model": model.state_dict(), "opt": opt.state_dict()}, tmp)
            os.replace(tmp, ckpt)
            record("ckpt", step=step)
        if agree[2].item() > 0:
            break
        time.sleep(STEP_SLEEP)
    if rank == 0:
        tmp = f"{ckpt}.{os.getpid()}.tmp"
        torch.save({"step": step, "model": model.state_dict(), "opt": opt.state_dict()}, tmp)
        os.replace(tmp, ckpt)
        record("ckpt", step=step)
    dist.barrier()
    record("done", step=step, loss=round(loss.item(), 6))
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
    sys.exit(0)
