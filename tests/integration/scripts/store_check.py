"""Checks the agent-hosted store from inside a worker; appends one JSON line to $OUT.

attempt 0: all_reduce, rank 0 writes the raw key "leak/attempt0" into the store, barrier,
           then local rank 1 exits 143 (a restartable failure).
attempt 1: all_reduce, and every rank checks that "leak/attempt0" is not visible.
Both attempts record which process owns the listening socket on MASTER_PORT.
"""
import datetime
import json
import os

import torch
import torch.distributed as dist


def listener_owner(port):
    inodes = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        with open(table) as f:
            for line in f.readlines()[1:]:
                cols = line.split()
                if int(cols[1].rsplit(":", 1)[1], 16) == port and cols[3] == "0A":
                    inodes.add(cols[9])
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            for fd in os.listdir(f"/proc/{pid}/fd"):
                link = os.readlink(f"/proc/{pid}/fd/{fd}")
                if link.startswith("socket:[") and link[8:-1] in inodes:
                    return int(pid)
        except OSError:
            continue
    return None


def main():
    attempt = int(os.environ["TORCHELASTIC_RESTART_COUNT"])
    port = int(os.environ["MASTER_PORT"])
    dist.init_process_group("gloo", init_method="env://")
    rank, world = dist.get_rank(), dist.get_world_size()
    t = torch.tensor([1.0])
    dist.all_reduce(t)
    store = dist.TCPStore(os.environ["MASTER_ADDR"], port, world, False,
                          datetime.timedelta(seconds=10))
    leaked = None
    if attempt == 0 and rank == 0:
        store.set("leak/attempt0", "x")
    if attempt == 1:
        try:
            store.wait(["leak/attempt0"], datetime.timedelta(milliseconds=300))
            leaked = True
        except RuntimeError:
            leaked = False
    with open(os.environ["OUT"], "a") as f:
        f.write(json.dumps({"rank": rank, "attempt": attempt, "port": port,
                            "owner": listener_owner(port), "ppid": os.getppid(),
                            "sum": t.item(), "world": world, "leaked": leaked,
                            "torch": torch.__version__,
                            "use_agent_store": os.environ["TORCHELASTIC_USE_AGENT_STORE"]}) + "\n")
    dist.barrier()
    if attempt == 0 and os.environ["LOCAL_RANK"] == "1":
        os._exit(143)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
