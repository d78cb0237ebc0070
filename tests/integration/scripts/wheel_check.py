"""Worker of tests/integration/test_install.py: all_reduce over gloo through env://, then one
JSON line to $OUT with the sum, the agent's executable (the parent process) and every shared
library the agent has mapped, read from /proc/<agent>/maps."""
import json
import os

import torch
import torch.distributed as dist


def mapped_libraries(pid):
    libs = set()
    with open(f"/proc/{pid}/maps") as f:
        for line in f:
            cols = line.split(maxsplit=5)
            if len(cols) == 6 and ".so" in os.path.basename(cols[5].strip()):
                libs.add(cols[5].strip())
    return sorted(libs)


def main():
    dist.init_process_group("gloo", init_method="env://")
    t = torch.ones(1)
    dist.all_reduce(t)
    agent = os.getppid()
    with open(os.environ["OUT"], "a") as f:
        f.write(json.dumps({"rank": dist.get_rank(), "sum": t.item(),
                            "agent_exe": os.readlink(f"/proc/{agent}/exe"),
                            "agent_libs": mapped_libraries(agent)}) + "\n")
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
