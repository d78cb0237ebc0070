#!/usr/bin/python3
"""torchrun from Debian's python3-torch 1.13, usable on Python 3.11.

Debian's /usr/bin/torchrun crashes on Python 3.11 in Std.from_str (enum members compared
with ints no longer match, so it returns None). This wrapper replaces that one function
with one that builds Std(int(v)), then runs torch.distributed.run.main() unchanged
(reference/torch_contract.md Appendix A). Tests and benchmarks use it as the reference agent.
"""
import re
import sys

from torch.distributed.elastic.multiprocessing import api


def _from_str(vm):
    if re.match(r"^[0-3]$", vm):
        return api.Std(int(vm))
    return {int(i): api.Std(int(v)) for i, v in (m.split(":") for m in vm.split(","))}


api.Std.from_str = classmethod(lambda cls, vm: _from_str(vm))

from torch.distributed.run import main  # noqa: E402  (after the patch, on purpose)

if __name__ == "__main__":
    sys.exit(main())
