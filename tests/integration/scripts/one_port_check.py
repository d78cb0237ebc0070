"""Worker of the one-port tests (tests/integration/test_one_port.py): all_reduce over gloo
through env://, then one JSON line to $OUT with what it saw and the TCP ports its agent
(the parent process) listens on, read from /proc of the worker's own network namespace."""
import json
import os

import torch
import torch.distributed as dist


def listening_ports(pid):
    inodes = set()
    for fd in os.listdir(f"/proc/{pid}/fd"):
        try:
            link = os.readlink(f"/proc/{pid}/fd/{fd}")
        except OSError:
            continue
        if link.startswith("socket:["):
            inodes.add(link[8:-1])
    ports = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        with open(table) as f:
            for line in f.readlines()[1:]:
                cols = line.split()
                if cols[3] == "0A" and cols[9] in inodes:  # 0A: LISTEN
                    ports.add(int(cols[1].rsplit(":", 1)[1], 16))
    return sorted(ports)


def main():
    dist.init_process_group("gloo", init_method="env://")
    t = torch.ones(1)
    dist.all_reduce(t)
    with open(os.environ["OUT"], "a") as f:
        f.write(json.dumps({
            "rank": dist.get_rank(), "group_rank": int(os.environ["GROUP_RANK"]),
            "attempt": int(os.environ["TORCHELASTIC_RESTART_COUNT"]),
            "master_addr": os.environ["MASTER_ADDR"], "master_port": int(os.environ["MASTER_PORT"]),
            "sum": t.item(), "world": dist.get_world_size(),
            "agent_listens": listening_ports(os.getppid())}) + "\n")
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
